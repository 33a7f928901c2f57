package gc_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// TestFloorStopsAtGap: the floor is the lowest seq of the window retained
// without a gap from the current generation. A pinned generation below a
// deleted one does not lower it, or a rollback could reference the deleted
// one.
func TestFloorStopsAtGap(t *testing.T) {
	ctx := context.Background()
	s := storeFor(t)
	d := dataset(s)
	for i := range 5 {
		publish(t, d, false, files(1, string(rune('a'+i))))
	}
	two, err := d.OpenAt(ctx, "2")
	require.NoError(t, err)
	_, err = two.Pin(ctx, time.Hour, "reader")
	require.NoError(t, err)
	three, err := d.OpenAt(ctx, "3")
	require.NoError(t, err)

	rep, err := gc.Run(ctx, s, strict()) // keeps 5 and 4, and 2 for its pin
	require.NoError(t, err)
	require.Contains(t, genIDs(rep.Deleted), three.Generation())
	p, _, err := pointer.Read(ctx, s)
	require.NoError(t, err)
	assert.EqualValues(t, 4, p.GCFloor)

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	tx.KeepFrom(three)
	_, err = tx.Commit(ctx, commit.CommitOptions{Message: "rollback to 3"})
	require.ErrorIs(t, err, commit.ErrStale, "seq 3 was collected")
	requireComplete(t, d)
}

// stealAtPins is a store on which another collector takes the "gc" lease
// over (token 1 released by hand, as for a dead holder, then acquired)
// when the collector first lists the pins: after it planned, before it
// publishes its horizon.
type stealAtPins struct {
	store.Store
	t      *testing.T
	stolen atomic.Bool
}

func (s *stealAtPins) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	if req.Prefix == commit.PinDir && s.stolen.CompareAndSwap(false, true) {
		require.NoError(s.t, lease.ReleaseToken(ctx, s.Store, gc.LeaseName, 1))
		_, err := lease.TryAcquire(ctx, s.Store, gc.LeaseName, lease.Options{TTL: time.Hour, Owner: "thief"})
		require.NoError(s.t, err)
	}
	return s.Store.List(ctx, req)
}

// TestHorizonNeedsTheLease: a collector whose lease was taken over after it
// planned does not publish its horizon (I6).
func TestHorizonNeedsTheLease(t *testing.T) {
	ctx := context.Background()
	s := storeFor(t)
	d := dataset(s)
	for i := range 3 {
		publish(t, d, false, files(1, string(rune('a'+i))))
	}
	before, _, err := pointer.Read(ctx, s)
	require.NoError(t, err)

	_, err = gc.Run(ctx, &stealAtPins{Store: s, t: t}, strict())
	require.ErrorIs(t, err, lease.ErrLost)
	// Only the run's registration of its token, made while it held the
	// lease, reached the pointer: no horizon, no floor.
	registeredOnly(t, s, before)
}
