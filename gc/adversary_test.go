package gc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/internal/faultstore"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

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
			held := faultstore.New(s)
			if tc.sent > 0 {
				// A HoldResponse without Then passes the write through.
				held.Add(faultstore.Rule{Op: store.OpPut, Key: pointer.Key, Mode: faultstore.HoldResponse, Times: tc.sent})
			}
			held.Add(faultstore.Rule{Op: store.OpPut, Key: pointer.Key, Mode: faultstore.HoldRequest, Times: 1, Then: func() {
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
