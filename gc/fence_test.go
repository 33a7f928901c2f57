package gc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// TestStaleCollectorChangesNothing: a collector renews its lease, sends
// its compare-and-swap of the pointer, and the request is held in flight
// while the lease expires and another collector takes it over and
// collects. When the held write arrives, the pointer's horizon and floor
// must be what the current holder left (I6), and the stale collector must
// delete nothing.
//
// The current holder needs no new floor (an earlier run published it and
// crashed before deleting), so it leaves the pointer alone; the stale
// write, planned with a smaller Keep, would raise the floor if it landed.
func TestStaleCollectorChangesNothing(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	d := dataset(s)
	var gens []string
	for i := range 4 {
		gens = append(gens, publish(t, d, false, files(2, fmt.Sprint(i))).Generation)
	}
	crashed := faults.NewStore(s)
	crashed.Add(faults.Rule{Op: store.OpDeleteMany, Kind: faults.Refused, Times: 1})
	_, err := gc.Run(ctx, crashed, strict())
	require.ErrorIs(t, err, faults.ErrInjected)
	published, _, err := pointer.Read(ctx, s)
	require.NoError(t, err)
	require.EqualValues(t, 3, published.GCFloor, "the crashed run published its floor")

	var current *gc.Report
	var left *pointer.Pointer
	held := faults.NewStore(s)
	held.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		clock.Advance(strict().LeaseTTL + 2*time.Second) // the stale holder's lease expires
		opts := strict()
		opts.Owner = "current"
		var err error
		current, err = gc.Run(ctx, s, opts)
		require.NoError(t, err)
		left, _, err = pointer.Read(ctx, s)
		require.NoError(t, err)
	}})
	opts := strict()
	opts.Keep = -1 // would raise the floor to the current generation
	opts.Owner = "stale"
	rep, err := gc.Run(ctx, held, opts)
	require.ErrorIs(t, err, lease.ErrLost)
	require.NotNil(t, current, "the held write was sent")
	assert.Equal(t, gens[:2], genIDs(current.Deleted), "the current holder finished the crashed run")

	after, _, err := pointer.Read(ctx, s)
	require.NoError(t, err)
	assert.Equal(t, left.WriteID, after.WriteID, "the pointer is as the current holder left it")
	assert.EqualValues(t, 3, after.GCFloor, "the floor is the current holder's")
	assert.True(t, after.GCHorizon.Equal(left.GCHorizon), "the horizon is the current holder's")
	assert.Zero(t, rep.ObjectsDeleted, "the stale collector deleted nothing")
	assert.NotEmpty(t, keysUnder(t, s, generation.Prefix(gens[2])), "seq 3, kept by the current holder, is whole")
	assert.Equal(t, referenced(t, d, 1), keysUnder(t, s, generation.Dir))
	requireComplete(t, d)
}

// TestLowerTokenRefused: a collection whose lease token is lower than the
// one registered in the pointer is refused before it writes or deletes
// anything, even when its lease renews fine: here the lease object was
// deleted, so its tokens restarted. A commit in between carries the
// registered token forward.
func TestLowerTokenRefused(t *testing.T) {
	ctx := context.Background()
	s := storeFor(t)
	d := dataset(s)
	for i := range 3 {
		publish(t, d, false, files(2, fmt.Sprint(i)))
	}
	_, err := gc.Run(ctx, s, strict())
	require.NoError(t, err)
	for range 3 {
		publish(t, d, false, files(2, "more"))
	}
	_, err = gc.Run(ctx, s, strict())
	require.NoError(t, err)
	registered, _, err := pointer.Read(ctx, s)
	require.NoError(t, err)
	require.EqualValues(t, 2, registered.GCToken, "the second collection registered its token")

	require.NoError(t, s.Delete(ctx, lease.Key(gc.LeaseName), store.DeleteOptions{}))
	publish(t, d, false, files(2, "last"))
	before := objects(t, s)
	rep, err := gc.Run(ctx, s, strict())
	require.ErrorIs(t, err, lease.ErrLost)
	assert.Contains(t, err.Error(), "token 1 is stale")
	assert.Contains(t, err.Error(), "token 2")
	assert.Zero(t, rep.ObjectsDeleted)
	assert.Equal(t, before, objects(t, s), "nothing changed")
}

// TestStaleCollectorWriteWhenHolderHasNothingToDelete (I6): a collector
// renews its lease and sends a pointer write (its registration of its
// lease token, or its compare-and-swap planned with Keep -1, which raises
// the floor to the current generation), and the request is held in flight
// while the lease expires. The new holder runs with a longer Keep and
// finds nothing to delete. The held write then arrives. Unless the new
// holder changed the pointer's ETag all the same, it lands: a collector
// that lost its lease changed the pointer, raising the floor the current
// holder's policy keeps below (readers' Pin and rollbacks to the retained
// generations are refused from then on). Every run registers its token
// before it plans, so the held write fails its If-Match.
func TestStaleCollectorWriteWhenHolderHasNothingToDelete(t *testing.T) {
	for _, tc := range []struct {
		name string
		// sent is how many of the stale collector's pointer writes land
		// before the one held.
		sent int
	}{
		{"registration held", 0},
		{"horizon held", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clock := newStoreClock()
			s := memStore(clock.Now)
			d := dataset(s)
			for i := range 4 {
				publish(t, d, false, files(2, fmt.Sprint(i)))
			}

			var current *gc.Report
			var left *pointer.Pointer
			held := faults.NewStore(s)
			if tc.sent > 0 {
				// A Held rule without Then passes the write through.
				held.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Held, Times: tc.sent})
			}
			held.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
				clock.Advance(strict().LeaseTTL + 2*time.Second) // the stale holder's lease expires
				opts := strict()
				opts.Keep = 10
				opts.Owner = "current"
				var err error
				current, err = gc.Run(ctx, s, opts)
				require.NoError(t, err)
				left, _, err = pointer.Read(ctx, s)
				require.NoError(t, err)
			}})
			opts := strict()
			opts.Keep = -1
			opts.Owner = "stale"
			rep, err := gc.Run(ctx, held, opts)
			require.ErrorIs(t, err, lease.ErrLost, "the stale collector finds its lease lost before it deletes")
			require.NotNil(t, current, "the held write was sent")
			assert.Zero(t, current.ObjectsDeleted, "the current holder keeps every generation")
			assert.Zero(t, rep.ObjectsDeleted, "the stale collector deleted nothing")

			after, _, err := pointer.Read(ctx, s)
			require.NoError(t, err)
			assert.Equal(t, left.WriteID, after.WriteID,
				"the pointer is as the current holder left it; the stale collector (token %d) wrote gc_floor %d", after.GCToken, after.GCFloor)
			assert.EqualValues(t, 2, after.GCToken, "the current holder registered its token")
			snap, err := d.OpenAt(ctx, "3")
			require.NoError(t, err)
			_, err = snap.Pin(ctx, time.Hour, "reader")
			assert.NoError(t, err, "seq 3 is retained by the current holder's policy and can be pinned")
		})
	}
}

// TestCollectorOnAFullPointer (I7): the pointer keeps one fence per lease
// identity and never drops one, up to pointer.MaxSize. Once lease
// registrations have filled it, the collector's first compare-and-swap
// (which adds gc_horizon, gc_floor and gc_token) no longer encodes, so
// every run fails before deleting: the staged objects of a crashed writer
// are never removed.
func TestCollectorOnAFullPointer(t *testing.T) {
	ctx := context.Background()
	s := storeFor(t)
	d := dataset(s)
	publish(t, d, false, files(2, "first"))
	orphan := stage(t, d, 2).Generation() // a writer that crashed

	// Fill the pointer greedily: long identities until one no longer
	// fits, then shorter ones into what is left.
	n := 0
	for _, depth := range []int{400, 10, 0} {
		prefix := "s3://bucket/" + strings.Repeat("team/", depth) + "_lease/nightly-"
		var err error
		for err == nil && n < 1000 {
			if err = d.RegisterFence(ctx, fmt.Sprintf("%s%04d", prefix, n), 1); err == nil {
				n++
			}
		}
		require.Error(t, err, "the pointer did not fill up")
	}

	rep, err := gc.Run(ctx, s, strict())
	require.NoError(t, err, "collect after %d lease registrations", n)
	assert.Equal(t, []string{orphan}, genIDs(rep.Orphans))
	assert.Empty(t, keysUnder(t, s, generation.Prefix(orphan)), "the crashed writer's objects are gone")
}
