package gc_test

import (
	"context"
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
)

// pinListHook calls after once, right after the first listing of _pin/.
type pinListHook struct {
	store.Store
	once  sync.Once
	after func()
}

func (h *pinListHook) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	page, err := h.Store.List(ctx, req)
	if req.Prefix == commit.PinDir {
		h.once.Do(h.after)
	}
	return page, err
}

// TestRenewedPinAcrossReplans: a plan made again after a commit beat the
// horizon CAS reuses the first plan's pin listing. A pin renewed in
// between, whose listed age now looks past its TTL, must be judged at the
// time of that listing: not dropped as expired, and its generation kept.
func TestRenewedPinAcrossReplans(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	d := dataset(s)
	publish(t, d, false, files(2, "one"))
	first, err := d.Open(ctx)
	require.NoError(t, err)
	pin, err := first.Pin(ctx, 10*time.Second, "reader")
	require.NoError(t, err)
	publish(t, d, false, files(2, "two"))
	stage(t, d, 1) // an orphan: the collector needs its horizon CAS
	clock.Advance(9500 * time.Millisecond)

	hook := &pinListHook{Store: s, after: func() {
		publish(t, d, false, files(2, "three")) // the horizon CAS fails
		require.NoError(t, pin.Renew(ctx))
		clock.Advance(5 * time.Second)
	}}
	opts := strict()
	opts.Keep = 2 // seq 1 is kept anyway; only its pin is at stake
	rep, err := gc.Run(ctx, hook, opts)
	require.NoError(t, err)
	assert.Len(t, rep.Orphans, 1)
	assert.Zero(t, rep.PinsDropped, "the renewed pin is live")
	assert.Len(t, keysUnder(t, s, commit.PinDir), 1)
	assert.NoError(t, readAll(ctx, first))
}

// TestPinAfterListing: a reader pins a generation after the collector
// listed the pins and before it published the floor that gives the
// generation up. The pin passed Pin's floor check, so it must be honoured:
// the collector lists the pins again after its CAS and keeps the pinned
// generation.
func TestPinAfterListing(t *testing.T) {
	testenv.EachStoreAtOnce(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := dataset(s)
		first := publish(t, d, false, files(2, "one"))
		snap, err := d.OpenAt(ctx, "1")
		require.NoError(t, err)
		publish(t, d, false, files(2, "two"))
		publish(t, d, false, files(2, "three"))

		hook := &pinListHook{Store: s, after: func() {
			_, err := snap.Pin(ctx, time.Hour, "late reader")
			require.NoError(t, err, "the floor is not published yet")
		}}
		rep, err := gc.Run(ctx, hook, strict())
		require.NoError(t, err)
		assert.Contains(t, genIDs(rep.Kept), first.Generation)
		assert.Empty(t, rep.Deleted)
		p, _, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		assert.EqualValues(t, 2, p.GCFloor, "the floor was published before the pin was seen")
		require.NoError(t, readAll(ctx, snap), "the pinned generation is whole")
	})
}
