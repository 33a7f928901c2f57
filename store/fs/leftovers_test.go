package fs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/fs"
	"github.com/commitptr/commitptr/store/mem"
	"github.com/commitptr/commitptr/store/storetest"
)

// tempFiles returns the temp files under the store's root, waiting until
// there are want of them, each holding at least size bytes.
func tempFiles(t *testing.T, s *fs.Store, want int, size int64) []string {
	t.Helper()
	var found []string
	require.Eventually(t, func() bool {
		found = slices.DeleteFunc(testenv.FSTempFiles(s.Root()), func(p string) bool {
			fi, err := os.Stat(p)
			return err != nil || fi.Size() < size
		})
		return len(found) == want
	}, 10*time.Second, 5*time.Millisecond)
	return found
}

// TestSweepLeftovers: the temp files of stalled puts are removed only when
// older than the sweep's age and under its prefix; a put that loses its
// temp file fails and publishes nothing; the others complete.
func TestSweepLeftovers(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	put(t, s, "ds/kept", "v")
	partial := []byte("the first part of the body")
	oldPut := testenv.StalledPut(t, s, "ds/_gen/g1/old", partial)
	youngPut := testenv.StalledPut(t, s, "ds/_gen/g2/young", partial)
	otherPut := testenv.StalledPut(t, s, "other/_gen/g3/file", partial)
	temps := tempFiles(t, s, 3, int64(len(partial)))
	var oldTemp string
	for _, p := range temps {
		if filepath.Base(filepath.Dir(p)) == "g1" {
			oldTemp = p
		}
	}
	require.NotEmpty(t, oldTemp)
	past := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(oldTemp, past, past))

	// Nothing under "ds/" is older than 3 h; the old temp is older than 1 h.
	got, err := s.SweepLeftovers(ctx, "ds/", 3*time.Hour)
	require.NoError(t, err)
	assert.Zero(t, got)
	// Through the wrappers a dataset's store has.
	got, err = store.SweepLeftovers(ctx, store.Count(store.WithPrefix(s, "ds/")), "", time.Hour)
	require.NoError(t, err)
	assert.Equal(t, store.Leftovers{Count: 1, Bytes: int64(len(partial))}, got)
	assert.NoFileExists(t, oldTemp)
	assert.NoDirExists(t, filepath.Dir(oldTemp), "the emptied directory is pruned")
	tempFiles(t, s, 2, 0)

	err = oldPut()
	require.Error(t, err)
	assert.NotErrorIs(t, err, store.ErrNotExist)
	assert.Contains(t, err.Error(), "ds/_gen/g1/old")
	_, err = s.Head(ctx, "ds/_gen/g1/old")
	require.ErrorIs(t, err, store.ErrNotExist, "the put whose temp file was swept published nothing")
	require.NoError(t, youngPut())
	require.NoError(t, otherPut())
	assert.Equal(t, []string{"ds/_gen/g2/young", "ds/kept", "other/_gen/g3/file"}, listAll(t, s, "", "", ""))
	tempFiles(t, s, 0, 0)
}

func TestSweepLeftoversErrors(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	_, err := s.SweepLeftovers(ctx, "a//b", 0)
	require.ErrorIs(t, err, store.ErrInvalidKey)
	assert.Contains(t, err.Error(), "a//b")
	got, err := s.SweepLeftovers(ctx, "never/written/", 0)
	require.NoError(t, err, "a prefix with nothing under it has no leftovers")
	assert.Zero(t, got)
	require.NoError(t, os.RemoveAll(s.Root()))
	for _, prefix := range []string{"", "_gen/", "_pointer"} {
		_, err = s.SweepLeftovers(ctx, prefix, 0)
		require.ErrorIs(t, err, store.ErrNoBucket, prefix)
	}

	_, err = store.SweepLeftovers(ctx, store.WithPrefix(mem.New(), "ds/"), "", 0)
	require.ErrorIs(t, err, errors.ErrUnsupported, "the mem driver leaves nothing behind")
}

func TestLeftoversConformance(t *testing.T) {
	s := newStore(t)
	storetest.Leftovers(t, s, func(t *testing.T, _ store.Store, key string) int64 {
		partial := []byte("the part of " + key + " that arrived")
		finish := testenv.StalledPut(t, s, key, partial)
		t.Cleanup(func() { _ = finish() }) // fails: its temp file was swept
		dir := filepath.Join(s.Root(), filepath.Dir(filepath.FromSlash(key)))
		require.Eventually(t, func() bool {
			for _, p := range testenv.FSTempFiles(dir) {
				if fi, err := os.Stat(p); err == nil && fi.Size() == int64(len(partial)) {
					return true
				}
			}
			return false
		}, 10*time.Second, 5*time.Millisecond)
		return int64(len(partial))
	})
}

// TestSweepLeftoversFlat: a prefix that does not end with "/" sweeps only
// the directory that would hold it: the temp file of a pointer write, not
// those of the data below.
func TestSweepLeftoversFlat(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	partial := []byte("half a pointer")
	top := testenv.StalledPut(t, s, "ds/_pointer", partial)
	below := testenv.StalledPut(t, s, "ds/_gen/g/f", partial)
	tempFiles(t, s, 2, int64(len(partial)))
	got, err := store.SweepLeftovers(ctx, store.WithPrefix(s, "ds/"), "_pointer", 0)
	require.NoError(t, err)
	assert.Equal(t, 1, got.Count)
	left := tempFiles(t, s, 1, 0)
	assert.Equal(t, "g", filepath.Base(filepath.Dir(left[0])), "the data write's temp file is below the prefix's directory")
	require.Error(t, top())
	require.NoError(t, below())
}
