package commit_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// TestTagNeverMovesByAccident: an existing tag is refused without force;
// with force it moves by a compare-and-swap, so a change of the tag made
// between its read and the write is never overwritten.
func TestTagNeverMovesByAccident(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		var interfere atomic.Bool
		var other *commit.Snapshot
		interfering := faults.NewStore(s)
		interfering.Add(faults.Rule{Op: store.OpPut, Kind: faults.Latency, Then: func() {
			if interfere.CompareAndSwap(true, false) {
				_, err := other.Tag(ctx, "release", true)
				require.NoError(t, err)
			}
		}})
		d := commit.New(interfering)
		for i := range 3 {
			_, err := publish(t, d, map[string]string{"x": strconv.Itoa(i + 1)}, commit.CommitOptions{})
			require.NoError(t, err)
		}
		first, err := d.OpenAt(ctx, "1")
		require.NoError(t, err)
		_, err = first.Tag(ctx, "release", false)
		require.NoError(t, err)
		cur, err := d.Open(ctx)
		require.NoError(t, err)
		_, err = cur.Tag(ctx, "release", false)
		require.ErrorIs(t, err, commit.ErrTagExists)

		other, err = d.OpenAt(ctx, "2")
		require.NoError(t, err)
		interfere.Store(true)
		_, err = cur.Tag(ctx, "release", true)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "changed while it was being moved")
		tag, err := d.ReadTag(ctx, "release")
		require.NoError(t, err)
		assert.EqualValues(t, 2, tag.Seq, "the concurrent move stands")

		_, err = cur.Tag(ctx, "release", true)
		require.NoError(t, err)
		snap, err := d.OpenAt(ctx, commit.TagRefPrefix+"release")
		require.NoError(t, err)
		assert.EqualValues(t, 3, snap.Seq())
		require.NoError(t, d.DeleteTag(ctx, "release"))
		require.ErrorIs(t, d.DeleteTag(ctx, "release"), commit.ErrNotFound)
	})
}

// TestTagBelowFloor: a tag of a generation below the collector's floor
// stands only while another live pin or tag holds it; a tag holds it
// without a TTL, for pins and rollbacks too.
func TestTagBelowFloor(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	s := mem.New(mem.WithClock(func() time.Time { return now }))
	d, pin, _ := pinnedChain(t, s, time.Minute)
	target, err := d.OpenAt(ctx, "2")
	require.NoError(t, err)
	_, err = target.Tag(ctx, "kept", false)
	require.NoError(t, err, "the live pin holds seq 2")
	require.NoError(t, pin.Release(ctx))
	collectAll(t, s)
	kept, err := d.OpenAt(ctx, commit.TagRefPrefix+"kept")
	require.NoError(t, err)
	b, err := kept.ReadFile(ctx, "x")
	require.NoError(t, err, "the collector keeps a tagged generation")
	assert.Equal(t, "2", string(b))
	_, err = target.Tag(ctx, "second", false)
	require.NoError(t, err, "the first tag holds seq 2")
	require.NoError(t, d.DeleteTag(ctx, "kept"))
	require.NoError(t, d.DeleteTag(ctx, "second"))
	_, err = target.Tag(ctx, "late", false)
	require.ErrorIs(t, err, commit.ErrCollected)
	assert.Empty(t, keysUnder(t, s, commit.TagDir), "the refused tag was removed")
}
