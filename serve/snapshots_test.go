package serve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/fs"
	"github.com/commitptr/commitptr/store/mem"
)

// pointerGate is a store whose reads of the pointer the test controls: it
// can hold the next one after it has read the pointer, until released, or
// fail them.
type pointerGate struct {
	store.Store
	mu      sync.Mutex
	reads   int
	hold    chan struct{} // non-nil: the next read waits for it to close
	held    chan struct{} // closed when that read has the pointer
	failing bool
}

func (g *pointerGate) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	if key != pointer.Key {
		return g.Store.Get(ctx, key)
	}
	g.mu.Lock()
	g.reads++
	hold, held, failing := g.hold, g.held, g.failing
	g.hold, g.held = nil, nil
	g.mu.Unlock()
	if failing {
		return nil, store.Attrs{}, errors.New("the store cannot be reached")
	}
	rc, attrs, err := g.Store.Get(ctx, key)
	if err != nil || hold == nil {
		return rc, attrs, err
	}
	b, err := io.ReadAll(rc)
	rc.Close()
	close(held)
	<-hold
	return io.NopCloser(bytes.NewReader(b)), attrs, err
}

// holdNext makes the next read of the pointer wait, once it has read it,
// until release is closed; held is closed when it has.
func (g *pointerGate) holdNext() (held, release chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold, g.held = make(chan struct{}), make(chan struct{})
	return g.held, g.hold
}

func (g *pointerGate) setFailing(f bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failing = f
}

func (g *pointerGate) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reads
}

// gatedSnapshots returns the snapshots of a dataset on a gated fs store,
// with refresh 10 s on a clock the test sets, and a function that commits
// one more generation.
func gatedSnapshots(t *testing.T) (*snapshots, *pointerGate, func(at time.Duration), func() string) {
	t.Helper()
	fsStore, err := fs.New(t.TempDir())
	require.NoError(t, err)
	writer := commit.New(fsStore)
	ctx := context.Background()
	commitOne := func() string {
		tx, err := writer.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.PutBytes(ctx, "a", []byte(time.Now().String())))
		c, err := tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		return c.Generation
	}
	gate := &pointerGate{Store: fsStore}
	s := newSnapshots(commit.New(gate), &Options{Refresh: 10 * time.Second, PinTTL: -1, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { require.NoError(t, s.releaseAll(context.Background())) })
	var mu sync.Mutex
	t0 := time.Unix(1_000_000, 0)
	now := t0
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	setClock := func(at time.Duration) { mu.Lock(); defer mu.Unlock(); now = t0.Add(at) }
	return s, gate, setClock, commitOne
}

// currentSoon calls current and fails the test if it waits for the store.
func currentSoon(t *testing.T, s *snapshots) string {
	t.Helper()
	type result struct {
		gen string
		err error
	}
	done := make(chan result, 1)
	go func() {
		snap, err := s.current(context.Background())
		if err != nil {
			done <- result{err: err}
			return
		}
		done <- result{gen: snap.Generation()}
	}()
	select {
	case r := <-done:
		require.NoError(t, r.err)
		return r.gen
	case <-time.After(30 * time.Second):
		t.Fatal("a request waits for a read of the pointer")
		return ""
	}
}

// waitHeld waits for a read of the pointer that holdNext holds.
func waitHeld(t *testing.T, held chan struct{}) {
	t.Helper()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no read ahead of the refresh")
	}
}

func TestServeReadsThePointerAheadOfItsRefreshAndNoRequestWaitsForIt(t *testing.T) {
	s, gate, setClock, commitOne := gatedSnapshots(t)
	gen1 := commitOne()
	snap, err := s.current(context.Background())
	require.NoError(t, err)
	require.Equal(t, gen1, snap.Generation())
	require.Equal(t, 1, gate.count())

	// Near the end of the refresh, a request is answered at once and
	// starts a read ahead.
	held, release := gate.holdNext()
	setClock(9500 * time.Millisecond)
	require.Equal(t, gen1, currentSoon(t, s))
	waitHeld(t, held)
	setClock(9800 * time.Millisecond)
	require.Equal(t, gen1, currentSoon(t, s), "one read ahead at a time, and requests go on meanwhile")
	gen2 := commitOne()
	close(release)
	s.aheadWG.Wait()
	require.Equal(t, 2, gate.count())

	// The read ahead began at 9.5 s, before gen2 landed: gen1 is trusted
	// until 19.5 s, also when the store cannot be reached.
	gate.setFailing(true)
	setClock(19 * time.Second)
	require.Equal(t, gen1, currentSoon(t, s))
	s.aheadWG.Wait() // the failed read ahead leaves gen1 as it was

	// Past 19.5 s it is not trusted any more: a request reads the pointer.
	gate.setFailing(false)
	setClock(19500 * time.Millisecond)
	require.Equal(t, gen2, currentSoon(t, s))
	require.Equal(t, 4, gate.count())
}

func TestServeNeverTakesAnOlderPointerFromALateReadAhead(t *testing.T) {
	s, gate, setClock, commitOne := gatedSnapshots(t)
	gen1 := commitOne()
	_, err := s.current(context.Background())
	require.NoError(t, err)

	// A read ahead reads gen1 at 9.5 s and is slow to come back.
	held, release := gate.holdNext()
	setClock(9500 * time.Millisecond)
	require.Equal(t, gen1, currentSoon(t, s))
	waitHeld(t, held)
	gen2 := commitOne()

	// At 10 s gen1 is stale: a request reads the pointer, gen2.
	setClock(10 * time.Second)
	require.Equal(t, gen2, currentSoon(t, s))
	close(release)
	s.aheadWG.Wait()

	// The late read began before the one that found gen2: it changes
	// nothing.
	setClock(11 * time.Second)
	require.Equal(t, gen2, currentSoon(t, s))
	require.Equal(t, 3, gate.count())
}

// pinKeys lists the pins of the store.
func pinKeys(t *testing.T, s store.Store) []string { return testenv.Keys(t, s, commit.PinDir) }

// twoCommits returns a dataset of two commits on a mem store whose clock
// the test moves, and the snapshot of seq 1.
func twoCommits(t *testing.T) (*commit.Dataset, store.Store, *commit.Snapshot, func(time.Duration)) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	var mu sync.Mutex
	s := mem.New(mem.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	d := commit.New(s)
	for _, body := range []string{"one", "two"} {
		_, err := d.Update(ctx, commit.CommitOptions{}, func(ctx context.Context, tx *commit.Tx) error {
			return tx.PutBytes(ctx, "a", []byte(body))
		})
		require.NoError(t, err)
	}
	first, err := d.OpenAt(ctx, "1")
	require.NoError(t, err)
	return d, s, first, func(by time.Duration) { mu.Lock(); now = now.Add(by); mu.Unlock() }
}

func TestServeUnpinsAGenerationUnusedForItsPinTTLAndRepinsALapsedOne(t *testing.T) {
	ctx := context.Background()
	d, s, first, advance := twoCommits(t)
	snaps := newSnapshots(d, &Options{Refresh: time.Hour, PinTTL: time.Minute, Owner: "test", Logger: slog.New(slog.DiscardHandler)})
	local := time.Now()
	snaps.now = func() time.Time { return local }
	cur, err := snaps.current(ctx)
	require.NoError(t, err)
	snaps.remember(ctx, first)
	require.Len(t, pinKeys(t, s), 2, "the current generation and seq 1")

	// Both pins lapse by the store's clock; a renewal pins them again.
	advance(2 * time.Minute)
	snaps.maintain(ctx)
	require.Len(t, pinKeys(t, s), 2)
	require.True(t, snaps.pins.Pinned(cur.Generation()))
	require.True(t, snaps.pins.Pinned(first.Generation()))

	// Unused for its TTL, seq 1 is forgotten and unpinned; the current
	// generation stays pinned.
	local = local.Add(time.Minute)
	snaps.maintain(ctx)
	keys := pinKeys(t, s)
	require.Len(t, keys, 1)
	gen, _, err := commit.ParsePinKey(keys[0])
	require.NoError(t, err)
	require.Equal(t, cur.Generation(), gen)
	require.NoError(t, snaps.releaseAll(ctx))
	require.Empty(t, pinKeys(t, s))
}

// A generation forgotten while its pin was being written, and cached again
// before the write returned, is pinned once, and unpinned once forgotten
// again: each cache entry holds the generation once, and drops it once.
func TestServePinsAGenerationForgottenAndCachedAgainWhileItWasPinnedOnce(t *testing.T) {
	ctx := context.Background()
	_, s, _, _ := twoCommits(t)
	fs := faults.NewStore(s)
	d := commit.New(fs)
	first, err := d.OpenAt(ctx, "1")
	require.NoError(t, err)
	snaps := newSnapshots(d, &Options{Refresh: time.Hour, PinTTL: time.Minute, Owner: "test", Logger: slog.New(slog.DiscardHandler)})
	local := time.Now()
	snaps.now = func() time.Time { return local }
	fs.Add(faults.Rule{Op: store.OpPut, Key: commit.PinDir, Kind: faults.Held, Times: 1, Then: func() {
		// The pin is written; before its response, the generation goes
		// unused for the TTL, maintenance forgets it, and a request
		// caches it again.
		local = local.Add(time.Minute)
		snaps.maintain(ctx)
		snaps.remember(ctx, first)
	}})
	snaps.remember(ctx, first)
	require.Len(t, pinKeys(t, s), 1)
	require.True(t, snaps.pins.Pinned(first.Generation()))

	local = local.Add(time.Minute)
	snaps.maintain(ctx)
	require.Empty(t, pinKeys(t, s), "forgotten again, it is unpinned")
	require.False(t, snaps.pins.Pinned(first.Generation()))
}

// A GET streams seq 1 for longer than the pin TTL, with no other request:
// maintenance keeps the generation and its pin until the body is closed.
func TestServeKeepsTheGenerationAGetStreamsAndItsPinUntilTheBodyCloses(t *testing.T) {
	ctx := context.Background()
	d, s, first, _ := twoCommits(t)
	snaps := newSnapshots(d, &Options{Refresh: time.Hour, PinTTL: time.Minute, Owner: "test", Logger: slog.New(slog.DiscardHandler)})
	local := time.Now()
	snaps.now = func() time.Time { return local }
	b := &backend{s: &Server{buckets: map[string]*snapshots{"daily": snaps}}}
	obj, err := b.GetObject(ctx, "daily", "@1/a", nil)
	require.NoError(t, err)

	local = local.Add(time.Minute)
	snaps.maintain(ctx)
	require.True(t, snaps.pins.Pinned(first.Generation()), "the body is still being read")
	body, err := io.ReadAll(obj.Contents)
	require.NoError(t, err)
	require.Equal(t, "one", string(body))
	require.NoError(t, obj.Contents.Close())

	local = local.Add(time.Minute)
	snaps.maintain(ctx)
	require.False(t, snaps.pins.Pinned(first.Generation()), "unused for the TTL since the body closed")
	for _, k := range pinKeys(t, s) {
		gen, _, err := commit.ParsePinKey(k)
		require.NoError(t, err)
		require.NotEqual(t, first.Generation(), gen, "seq 1 is unpinned")
	}
}

// Maintenance renews the pins of the generations served: once they lapsed
// by the store's clock, each is pinned anew.
func TestServeRenewsThePinsOfTheGenerationsItServes(t *testing.T) {
	ctx := context.Background()
	d, s, _, advance := twoCommits(t)
	snaps := newSnapshots(d, &Options{Refresh: time.Hour, PinTTL: time.Minute, Owner: "test", Logger: slog.New(slog.DiscardHandler)})
	_, err := snaps.current(ctx)
	require.NoError(t, err)
	for range 4 {
		advance(40 * time.Second)
		snaps.maintain(ctx)
	}
	keys := pinKeys(t, s)
	require.Len(t, keys, 1)
	a, err := s.Head(ctx, keys[0])
	require.NoError(t, err)
	require.Less(t, a.ServerTime.Sub(a.LastModified), time.Minute, "the pin is live")
}

// A generation forgotten between a GET's resolution and the start of its
// body is cached and pinned again for the read.
func TestServeCachesAgainAGenerationForgottenBeforeItsGetReadsIt(t *testing.T) {
	ctx := context.Background()
	d, _, first, _ := twoCommits(t)
	snaps := newSnapshots(d, &Options{Refresh: time.Hour, PinTTL: time.Minute, Owner: "test", Logger: slog.New(slog.DiscardHandler)})
	local := time.Now()
	snaps.now = func() time.Time { return local }
	snap, err := snaps.resolve(ctx, commit.SeqRef(1))
	require.NoError(t, err)
	local = local.Add(time.Minute)
	snaps.maintain(ctx)
	require.False(t, snaps.pins.Pinned(first.Generation()), "forgotten")

	done := snaps.reading(ctx, snap)
	require.True(t, snaps.pins.Pinned(first.Generation()), "pinned again for the read")
	local = local.Add(time.Minute)
	snaps.maintain(ctx)
	require.True(t, snaps.pins.Pinned(first.Generation()), "kept while it is read")
	done()
}
