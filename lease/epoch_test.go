package lease_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// listCounter counts the entries that listings return.
type listCounter struct {
	store.Store
	entries atomic.Int64
}

func (l *listCounter) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	p, err := l.Store.List(ctx, req)
	l.entries.Add(int64(len(p.Objects) + len(p.Prefixes)))
	return p, err
}

func epochKeys(t *testing.T, s store.Store, name string) []string {
	t.Helper()
	var keys []string
	for o, err := range store.List(context.Background(), s, lease.Dir+name+"/", "", "") {
		require.NoError(t, err)
		keys = append(keys, o.Key)
	}
	return keys
}

func TestEpochLock(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		c := store.Count(s)
		before := c.Counts()
		a, err := lease.TryAcquireEpoch(ctx, c, "leader", opts("a", time.Minute))
		require.NoError(t, err)
		n := c.Counts().Sub(before)
		assert.Equal(t, "get=1 put=1 list=2", n.String(), "first epoch: hint GET, LIST, create, LIST for a newer epoch")
		assert.EqualValues(t, 1, a.Epoch())
		assert.EqualValues(t, 1, a.Token())
		assert.Equal(t, lease.EpochKey("leader", 1), a.Key())
		assert.True(t, a.Held())

		before = c.Counts()
		_, err = lease.TryAcquireEpoch(ctx, c, "leader", opts("b", time.Minute))
		he := heldError(t, err)
		assert.Equal(t, "a", he.Owner)
		assert.EqualValues(t, 1, he.Token)
		assert.Equal(t, "get=2 list=1", c.Counts().Sub(before).String(), "held: hint, LIST, read the epoch")

		before = c.Counts()
		require.NoError(t, a.Renew(ctx))
		assert.Equal(t, "put=1", c.Counts().Sub(before).String())
		before = c.Counts()
		require.NoError(t, a.Release(ctx))
		assert.Equal(t, "put=1", c.Counts().Sub(before).String())
		assert.True(t, isClosed(a.Done()))

		before = c.Counts()
		b, err := lease.TryAcquireEpoch(ctx, c, "leader", opts("b", time.Minute))
		require.NoError(t, err)
		assert.Equal(t, "get=2 put=1 list=2", c.Counts().Sub(before).String())
		assert.EqualValues(t, 2, b.Epoch())

		info, err := lease.StatusEpoch(ctx, s, "leader")
		require.NoError(t, err)
		assert.Equal(t, "b", info.Owner)
		assert.EqualValues(t, 2, info.Token)
		assert.False(t, info.Expired)

		// Epoch 1 stays, released.
		assert.Equal(t, []string{lease.EpochKey("leader", 1), lease.EpochKey("leader", 2)}, epochKeys(t, s, "leader"))
		if !strings.HasSuffix(t.Name(), "/s3") && !strings.HasSuffix(t.Name(), "/minio") {
			// A single-key lease of the same name is independent. (The
			// test server, versitygw on POSIX, cannot store an object
			// whose key is also a "directory"; AWS S3 can.)
			l, err := lease.TryAcquire(ctx, s, "leader", opts("c", time.Minute))
			require.NoError(t, err)
			assert.EqualValues(t, 1, l.Token())
			require.NoError(t, l.Release(ctx))
		}
		require.NoError(t, b.Release(ctx))

		_, err = lease.StatusEpoch(ctx, s, "none")
		assert.ErrorIs(t, err, store.ErrNotExist)
	})
}

// TestEpochExpiry: epoch N+1 is created only once N is expired by the
// store's clock.
func TestEpochExpiry(t *testing.T) {
	clock := newFakeClock()
	s := mem.New(mem.WithClock(clock.Now))
	ctx := context.Background()
	a, err := lease.TryAcquireEpoch(ctx, s, "e", opts("a", 10*time.Second))
	require.NoError(t, err)
	clock.Advance(10*time.Second + 999*time.Millisecond)
	_, err = lease.TryAcquireEpoch(ctx, s, "e", opts("b", 10*time.Second))
	requireHeld(t, err)
	assert.Equal(t, []string{lease.EpochKey("e", 1)}, epochKeys(t, s, "e"), "no epoch 2 while 1 is live")

	clock.Advance(time.Millisecond)
	b, err := lease.TryAcquireEpoch(ctx, s, "e", opts("b", 10*time.Second))
	require.NoError(t, err)
	assert.EqualValues(t, 2, b.Epoch())
	assert.Greater(t, b.Token(), a.Token())
	require.NoError(t, b.Release(ctx))
}

// TestEpochLookupBounded: finding the latest epoch does not list the
// history. With 50 old epochs, an acquisition costs what it costs with 2,
// and its listing returns a bounded number of keys.
func TestEpochLookupBounded(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		lc := &listCounter{Store: s}
		c := store.Count(lc)
		cycle := func() (store.Counts, int64) {
			before, entries := c.Counts(), lc.entries.Load()
			e, err := lease.TryAcquireEpoch(ctx, c, "hist", opts("x", time.Minute))
			require.NoError(t, err)
			n, listed := c.Counts().Sub(before), lc.entries.Load()-entries
			require.NoError(t, e.Release(ctx))
			return n, listed
		}
		cycle()
		small, _ := cycle()
		for range 48 {
			_, listed := cycle()
			assert.LessOrEqual(t, listed, int64(18), "listed keys per acquisition: at most 16 epochs and the hint, then the hint again")
		}
		big, listed := cycle()
		assert.Equal(t, small[store.OpList], big[store.OpList])
		assert.Equal(t, small[store.OpGet], big[store.OpGet])
		assert.LessOrEqual(t, big[store.OpPut], small[store.OpPut]+1, "at most one hint write")
		assert.LessOrEqual(t, listed, int64(18))
		assert.Len(t, epochKeys(t, s, "hist"), 52, "51 epochs and the hint")
	})
}

// TestEpochHintIsOnlyAHint: a stale, bogus or corrupt hint, and holes left
// by cleanup, never make an acquisition reuse an old epoch.
func TestEpochHintIsOnlyAHint(t *testing.T) {
	for name, hint := range map[string]string{
		"stale":   `{"epoch":1}`,
		"ahead":   `{"epoch":999}`,
		"corrupt": `{"epoch":`,
	} {
		t.Run(name, func(t *testing.T) {
			s := mem.New()
			ctx := context.Background()
			for range 20 {
				e, err := lease.TryAcquireEpoch(ctx, s, "h", opts("x", time.Minute))
				require.NoError(t, err)
				require.NoError(t, e.Release(ctx))
			}
			_, err := s.Put(ctx, lease.Dir+"h/latest", bytes.NewReader([]byte(hint)), store.PutOptions{})
			require.NoError(t, err)
			var holes []string
			for i := uint64(2); i <= 10; i++ {
				holes = append(holes, lease.EpochKey("h", i))
			}
			require.NoError(t, s.DeleteMany(ctx, holes))
			e, err := lease.TryAcquireEpoch(ctx, s, "h", opts("y", time.Minute))
			require.NoError(t, err)
			assert.EqualValues(t, 21, e.Epoch())
		})
	}
}

func TestCleanupEpochs(t *testing.T) {
	clock := newFakeClock()
	s := mem.New(mem.WithClock(clock.Now))
	ctx := context.Background()
	for range 20 {
		e, err := lease.TryAcquireEpoch(ctx, s, "c", opts("x", time.Minute))
		require.NoError(t, err)
		require.NoError(t, e.Release(ctx))
		clock.Advance(time.Minute)
	}
	_, err := lease.CleanupEpochs(ctx, s, "c", time.Second)
	require.ErrorIs(t, err, lease.ErrInvalid)

	// Epochs 1..20 were last written 20..1 minutes ago.
	n, err := lease.CleanupEpochs(ctx, s, "c", 10*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 11, n, "epochs 1..11 are at least 10 minutes old")
	keys := epochKeys(t, s, "c")
	assert.Equal(t, lease.EpochKey("c", 12), keys[0])
	assert.Contains(t, keys, lease.Dir+"c/latest", "the hint is kept")

	clock.Advance(24 * time.Hour)
	n, err = lease.CleanupEpochs(ctx, s, "c", time.Hour)
	require.NoError(t, err)
	assert.Equal(t, 8, n)
	assert.Equal(t, []string{lease.EpochKey("c", 20), lease.Dir + "c/latest"}, epochKeys(t, s, "c"), "the latest is always kept")
	n, err = lease.CleanupEpochs(ctx, s, "c", time.Hour)
	require.NoError(t, err)
	assert.Zero(t, n)

	e, err := lease.TryAcquireEpoch(ctx, s, "c", opts("y", time.Minute))
	require.NoError(t, err)
	assert.EqualValues(t, 21, e.Epoch(), "numbering continues after cleanup")

	n, err = lease.CleanupEpochs(ctx, s, "none", time.Hour)
	require.NoError(t, err)
	assert.Zero(t, n)
}

func TestEpochAmbiguousCreate(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		for _, kind := range []faults.Kind{faults.Lost, faults.Retried} {
			f := faults.NewStore(s)
			f.Add(faults.Rule{Op: store.OpPut, Key: lease.Dir + "amb/", Kind: kind, Times: 1})
			e, err := lease.TryAcquireEpoch(ctx, f, "amb", opts("a", time.Minute))
			require.NoError(t, err)
			f.Add(faults.Rule{Op: store.OpPut, Key: lease.Dir + "amb/", Kind: kind, Times: 1})
			require.NoError(t, e.Renew(ctx))
			require.NoError(t, e.Release(ctx))
			info, err := lease.StatusEpoch(ctx, s, "amb")
			require.NoError(t, err)
			assert.True(t, info.Released)
			assert.Equal(t, e.Epoch(), info.Token)
		}
	})
}

func TestAcquireEpochBlocks(t *testing.T) {
	s := mem.New()
	ctx := context.Background()
	a, err := lease.TryAcquireEpoch(ctx, s, "w", opts("a", time.Minute))
	require.NoError(t, err)
	go func() {
		time.Sleep(100 * time.Millisecond)
		a.Release(ctx)
	}()
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := lease.AcquireEpoch(actx, s, "w", opts("b", time.Minute))
	require.NoError(t, err)
	assert.EqualValues(t, 2, b.Epoch())

	// Long enough for at least one complete poll on a loaded machine.
	sctx, cancel2 := context.WithTimeout(ctx, time.Second)
	defer cancel2()
	_, err = lease.AcquireEpoch(sctx, s, "w", opts("c", time.Minute))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	requireHeld(t, err)
}

// TestEpochCreateLandsAfterCleanup: a create of epoch 2 that was sent after
// epoch 1 was proven released, and held in flight while others took and
// released epoch 2, took epoch 3 and cleaned epoch 2 up, lands on the
// emptied key. Its sender must not hold it: the holder of epoch 3 does.
func TestEpochCreateLandsAfterCleanup(t *testing.T) {
	clock := newFakeClock() // the store's clock, and A's: one timeline
	s := mem.New(mem.WithClock(clock.Now))
	ctx := context.Background()
	first, err := lease.TryAcquireEpoch(ctx, s, "e", opts("first", time.Minute))
	require.NoError(t, err)
	require.NoError(t, first.Release(ctx))

	inFlight, land := make(chan struct{}), make(chan struct{})
	f := faults.NewStore(s)
	f.Add(faults.Rule{Op: store.OpPut, Key: lease.EpochKey("e", 2), Kind: faults.Latency, Times: 1, Then: func() {
		close(inFlight)
		<-land
	}})
	type result struct {
		e   *lease.Epoch
		err error
	}
	got := make(chan result, 1)
	go func() {
		oa := opts("a", time.Hour)
		oa.Clock = clock
		e, err := lease.TryAcquireEpoch(ctx, f, "e", oa)
		got <- result{e, err}
	}()
	<-inFlight

	b, err := lease.TryAcquireEpoch(ctx, s, "e", opts("b", time.Hour))
	require.NoError(t, err)
	require.EqualValues(t, 2, b.Epoch())
	require.NoError(t, b.Release(ctx))
	c, err := lease.TryAcquireEpoch(ctx, s, "e", opts("c", time.Hour))
	require.NoError(t, err)
	require.EqualValues(t, 3, c.Epoch())
	clock.Advance(2 * lease.MinCleanupAge)
	n, err := lease.CleanupEpochs(ctx, s, "e", lease.MinCleanupAge)
	require.NoError(t, err)
	require.Equal(t, 2, n, "epochs 1 and 2 are cleaned up")
	close(land)

	r := <-got
	if r.e != nil {
		assert.Failf(t, "two holders", "a holds epoch %d (held=%v) while c holds epoch %d", r.e.Epoch(), r.e.Held(), c.Epoch())
	}
	he := heldError(t, r.err)
	assert.Equal(t, "c", he.Owner)
	assert.EqualValues(t, 3, he.Token)
	assert.True(t, he.Race)
	assert.True(t, c.Held())

	// The late epoch 2 is given back; it is below epoch 3 and nobody
	// acts on it.
	rc, _, err := s.Get(ctx, lease.EpochKey("e", 2))
	require.NoError(t, err)
	body, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	assert.Contains(t, string(body), `"owner":"a"`)
	assert.Contains(t, string(body), `"released":true`)
	info, err := lease.StatusEpoch(ctx, s, "e")
	require.NoError(t, err)
	assert.Equal(t, "c", info.Owner)
	assert.EqualValues(t, 3, info.Token)
	require.NoError(t, c.Release(ctx))
}
