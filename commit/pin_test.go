package commit_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// collectAll runs the collector keeping only the current generation and
// what pins hold.
func collectAll(t *testing.T, s store.Store) {
	t.Helper()
	_, err := gc.Run(context.Background(), s, gc.Options{Keep: -1, Grace: -1, OrphanAge: -1, LeaseTTL: 10 * time.Second, Owner: "test"})
	require.NoError(t, err)
}

// pinnedChain publishes seq 1 to 4, pins seq 2 and collects: the links
// seq 3 and 1 are gone, seq 2 is kept below the floor.
func pinnedChain(t *testing.T, s store.Store, ttl time.Duration) (*commit.Dataset, *commit.Pin, string) {
	t.Helper()
	ctx := context.Background()
	d := commit.New(s)
	for i := range 4 {
		_, err := publish(t, d, map[string]string{"x": strconv.Itoa(i + 1)}, commit.CommitOptions{})
		require.NoError(t, err)
	}
	snap, err := d.OpenAt(ctx, "2")
	require.NoError(t, err)
	pin, err := snap.Pin(ctx, ttl, "reader")
	require.NoError(t, err)
	collectAll(t, s)
	cur, _, err := pointer.Read(ctx, s)
	require.NoError(t, err)
	require.EqualValues(t, 4, cur.GCFloor, "the floor passes the pinned seq: it bounds the contiguous window")
	return d, pin, snap.Generation()
}

// TestPinnedGenerationOffChain: a pinned generation beyond a collected link
// of the chain opens by seq and by id, from a fresh Dataset, through its pin
// (new and old pin bodies); a rollback to it commits under a pin of its
// own, and not without one.
func TestPinnedGenerationOffChain(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		_, pin, gen := pinnedChain(t, s, time.Hour)
		d := commit.New(s)
		for _, ref := range []string{"2", gen} {
			snap, err := d.OpenAt(ctx, ref)
			require.NoError(t, err, "OpenAt(%s)", ref)
			assert.EqualValues(t, 2, snap.Seq())
			b, err := snap.ReadFile(ctx, "x")
			require.NoError(t, err)
			assert.Equal(t, "2", string(b))
		}
		_, err := d.OpenAt(ctx, "3")
		require.ErrorIs(t, err, commit.ErrCollected, "an unpinned collected seq stays collected")

		// A pin written before pins named their manifest.
		old := fmt.Sprintf(`{"generation":%q,"seq":2,"owner":"old","ttl_ms":3600000,"renew_id":"r"}`, gen)
		_, err = s.Put(ctx, pin.Key, strings.NewReader(old), store.PutOptions{Size: int64(len(old))})
		require.NoError(t, err)
		target, err := d.OpenAt(ctx, "2")
		require.NoError(t, err, "an old pin body still reads")

		rollback := func(hold *commit.Pin) (*pointer.Pointer, error) {
			tx, err := d.Begin(ctx)
			require.NoError(t, err)
			tx.KeepFrom(target)
			if hold != nil {
				tx.HoldPin(hold)
			}
			return tx.Commit(ctx, commit.CommitOptions{Message: "rollback to 2"})
		}
		_, err = rollback(nil)
		require.ErrorIs(t, err, commit.ErrStale, "below the floor without a pin")
		mine, err := target.Pin(ctx, time.Minute, "rollback")
		require.NoError(t, err, "a generation below the floor can be pinned while another live pin holds it")
		p, err := rollback(mine)
		require.NoError(t, err)
		assert.EqualValues(t, 5, p.Seq)
		require.NoError(t, mine.Release(ctx))
		require.NoError(t, pin.Release(ctx))
		collectAll(t, s)
		b, err := checkComplete(t, d).ReadFile(ctx, "x")
		require.NoError(t, err)
		assert.Equal(t, "2", string(b))
	})
}

// TestPinnedBelowFloorExpired: once the only pin of a generation below the
// floor has expired by the store's clock, it can no longer be pinned, and
// a rollback holding the expired pin is refused.
func TestPinnedBelowFloorExpired(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	var mu sync.Mutex
	s := mem.New(mem.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	d, pin, _ := pinnedChain(t, s, time.Minute)
	target, err := d.OpenAt(ctx, "2")
	require.NoError(t, err)
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()

	_, err = target.Pin(ctx, time.Hour, "late")
	require.ErrorIs(t, err, commit.ErrCollected)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	tx.KeepFrom(target)
	tx.HoldPin(pin)
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrStale)
	assert.Contains(t, err.Error(), "expired")
	assert.EqualValues(t, 4, checkComplete(t, d).Seq(), "the refused rollback changed nothing")
}
