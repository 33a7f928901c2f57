package gc_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/fs"
	"github.com/commitptr/commitptr/store/s3"
)

// TestLeftovers: a write that dies mid-upload on the fs driver leaves a
// temp file that no listing shows. A collection removes it once it is older
// than the orphan age (I7), and not before: a younger upload completes.
func TestLeftovers(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	base, err := fs.New(root)
	require.NoError(t, err)
	s := store.WithPrefix(base, "ds/")
	d := dataset(s)
	publish(t, d, false, files(2, "one"))
	partial := bytes.Repeat([]byte("x"), 1000)
	newKey := func() string {
		gen, err := generation.New()
		require.NoError(t, err)
		return generation.Dir + gen + "/big"
	}
	key := newKey()
	finish := testenv.StalledPut(t, s, key, partial)
	require.Eventually(t, func() bool { return len(testenv.FSTempFiles(root)) == 1 }, 10*time.Second, 5*time.Millisecond)

	// Younger than the orphan age: kept, and the upload completes.
	opts := strict()
	opts.OrphanAge = time.Hour
	rep, err := gc.Run(ctx, s, opts)
	require.NoError(t, err)
	assert.Zero(t, rep.Leftovers)
	require.NoError(t, finish())
	assert.Empty(t, testenv.FSTempFiles(root))

	// A stalled upload past the orphan age (none here): removed, and the
	// upload can no longer publish.
	key = newKey()
	finish = testenv.StalledPut(t, s, key, partial)
	require.Eventually(t, func() bool { return len(testenv.FSTempFiles(root)) == 1 }, 10*time.Second, 5*time.Millisecond)
	rep, err = gc.Run(ctx, s, strict())
	require.NoError(t, err)
	assert.Equal(t, store.Leftovers{Count: 1, Bytes: int64(len(partial))}, rep.Leftovers)
	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	assert.Contains(t, text.String(), "leftovers of interrupted writes removed: 1")
	assert.Empty(t, testenv.FSTempFiles(root))
	require.Error(t, finish())
	_, err = s.Head(ctx, key)
	require.ErrorIs(t, err, store.ErrNotExist)
	requireComplete(t, d)
}

// TestLeftoversWithoutPointer: the first writer of a dataset is killed
// mid-upload, so the dataset has no pointer. Its leftovers, a temp file on
// fs and an incomplete multipart upload on S3 (which bills), are still
// removed by a collection past the orphan age, and nothing else changes.
func TestLeftoversWithoutPointer(t *testing.T) {
	ctx := context.Background()
	sweeps := func(t *testing.T, s store.Store, partial []byte, started func() bool) {
		gen, err := generation.New()
		require.NoError(t, err)
		key := generation.DataKey(gen, "big")
		finish := testenv.StalledPut(t, s, key, partial)
		require.Eventually(t, started, 30*time.Second, 10*time.Millisecond)

		opts := strict()
		opts.OrphanAge = time.Hour
		rep, err := gc.Run(ctx, s, opts)
		require.NoError(t, err)
		assert.Zero(t, rep.Leftovers.Count, "younger than the orphan age")

		// Past the orphan age (none here) by the store's clock; on S3
		// that takes its whole-second dates a second or two to show.
		var notes []string
		require.Eventually(t, func() bool {
			rep, err = gc.Run(ctx, s, strict())
			require.NoError(t, err)
			notes = rep.Notes
			return rep.Leftovers.Count > 0
		}, 30*time.Second, 100*time.Millisecond)
		assert.Equal(t, 1, rep.Leftovers.Count)
		assert.Positive(t, rep.Leftovers.Bytes)
		require.Len(t, notes, 1)
		assert.Contains(t, notes[0], "no pointer")
		require.Error(t, finish(), "the upload was removed under the stalled writer")
		_, err = s.Head(ctx, key)
		require.ErrorIs(t, err, store.ErrNotExist)
		_, _, err = pointer.Read(ctx, s)
		require.ErrorIs(t, err, store.ErrNotExist)
		assert.Empty(t, objects(t, s), "nothing was written")
	}
	t.Run("fs", func(t *testing.T) {
		root := t.TempDir()
		base, err := fs.New(root)
		require.NoError(t, err)
		sweeps(t, store.WithPrefix(base, "ds/"), bytes.Repeat([]byte("x"), 1000), func() bool {
			return len(testenv.FSTempFiles(root)) == 1
		})
		assert.Empty(t, testenv.FSTempFiles(root))
	})
	t.Run("s3", func(t *testing.T) {
		var s store.Store
		for _, f := range testenv.Stores() {
			if f.Name == "s3" {
				s = f.New(t)
			}
		}
		// Larger than one part, so that the driver uploads it in parts.
		sweeps(t, store.WithPrefix(s, "ds/"), make([]byte, s3.PartThreshold+1<<20), func() bool { return true })
	})
}

// deniedSweeper is a store whose credentials may not look for leftovers.
type deniedSweeper struct{ store.Store }

func (deniedSweeper) SweepLeftovers(context.Context, string, time.Duration) (store.Leftovers, error) {
	return store.Leftovers{}, store.Wrap("sweep-leftovers", "_gen/", store.ErrAccess, errors.New("AccessDenied"))
}

// TestLeftoversDenied: a store that refuses the sweep does not fail a
// collection that is otherwise done; the report says what was skipped.
func TestLeftoversDenied(t *testing.T) {
	s := storeFor(t)
	d := dataset(s)
	publish(t, d, false, files(2, "one"))
	publish(t, d, false, files(2, "two"))
	publish(t, d, false, files(2, "three"))
	rep, err := gc.Run(context.Background(), deniedSweeper{s}, strict())
	require.NoError(t, err)
	assert.Len(t, rep.Deleted, 1, "the collection itself went ahead")
	require.NotEmpty(t, rep.Notes)
	assert.Contains(t, strings.Join(rep.Notes, "\n"), "leftovers of interrupted writes under _gen/ were not removed")
}
