package commit_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// A copy cut short, emptied, or replaced by a directory is a miss: the
// reader and the writer read the store's manifest, and get the pointer's
// generation.
func TestManifestCacheCopyCutShortEmptiedOrADirectoryIsReadFromTheStore(t *testing.T) {
	ctx := context.Background()
	for name, spoil := range map[string]func(t *testing.T, path string){
		"cut short": func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, b[:len(b)/2], 0o600))
		},
		"empty": func(t *testing.T, path string) {
			require.NoError(t, os.WriteFile(path, nil, 0o600))
		},
		"a directory": func(t *testing.T, path string) {
			require.NoError(t, os.Remove(path))
			require.NoError(t, os.MkdirAll(filepath.Join(path, "sub"), 0o700))
		},
		"unreadable": func(t *testing.T, path string) {
			if os.Geteuid() == 0 {
				require.NoError(t, os.Remove(path)) // root reads any file
				require.NoError(t, os.Symlink("/dev/zero", path))
				return
			}
			require.NoError(t, os.Chmod(path, 0))
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := mem.New()
			dir := t.TempDir()
			p, err := publish(t, commit.New(s, commit.WithManifestCache(dir)), map[string]string{"a": "1"}, commit.CommitOptions{})
			require.NoError(t, err)
			spoil(t, filepath.Join(dir, p.ManifestSHA256))

			counted, gets := manifestGets(s)
			snap, err := commit.New(counted, commit.WithManifestCache(dir)).Open(ctx)
			require.NoError(t, err)
			assert.Equal(t, p.Generation, snap.Generation())
			assert.Equal(t, "1", readAll(t, snap, "a"))
			assert.EqualValues(t, 1, gets.Load(), "read from the store")

			tx, err := commit.New(counted, commit.WithManifestCache(dir)).Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.KeepAll(ctx))
			require.NoError(t, tx.PutBytes(ctx, "b", []byte("2")))
			next, err := tx.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
			assert.Equal(t, p.Generation, next.Parent)
			snap = checkComplete(t, commit.New(s))
			assert.Equal(t, "1", readAll(t, snap, "a"))
		})
	}
}

// A cache directory that cannot be made or written is only a miss: put,
// commit and open work as without it.
func TestManifestCacheThatCannotBeWrittenIsOnlyAMiss(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	notADir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notADir, []byte("x"), 0o600))
	for _, dir := range []string{notADir, filepath.Join(notADir, "manifests")} {
		d := commit.New(s, commit.WithManifestCache(dir))
		_, err := publish(t, d, map[string]string{"a": dir}, commit.CommitOptions{})
		require.NoError(t, err)
		snap, err := commit.New(s, commit.WithManifestCache(dir)).Open(ctx)
		require.NoError(t, err)
		assert.Equal(t, dir, readAll(t, snap, "a"))
	}
}

// On a miss, a manifest GET that fails fails the Open and the Begin's base:
// its error is not taken for a manifest, and nothing is kept.
func TestManifestCacheMissPassesOnTheStoresError(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	p, err := publish(t, commit.New(s), map[string]string{"a": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	dir := t.TempDir()
	for _, kind := range []faults.Kind{faults.Internal, faults.Cut} {
		fs := faults.NewStore(s)
		fs.Add(faults.Rule{Op: store.OpGet, Suffix: "/_manifest", Kind: kind})
		d := commit.New(fs, commit.WithManifestCache(dir))
		_, err := d.Open(ctx)
		require.Error(t, err, "%s", kind)
		assert.True(t, faults.IsInjected(err), "%s: %v", kind, err)
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.BaseSnapshot(ctx)
		require.Error(t, err, "%s", kind)
		require.NoError(t, tx.Discard(ctx))
		assert.NoFileExists(t, filepath.Join(dir, p.ManifestSHA256), "%s", kind)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "no copy, and no temporary file left")
}

// The cache saves the manifest GETs and no other request: a writer's
// begin, keep and commit and a reader's open send the same requests with
// a warm cache as without one, less one GET each for the manifest.
func TestManifestCacheSavesOnlyTheManifestGETs(t *testing.T) {
	ctx := context.Background()
	run := func(opts ...commit.Option) store.Counts {
		s := mem.New()
		_, err := publish(t, commit.New(s, opts...), map[string]string{"a": "1", "b": "2"}, commit.CommitOptions{})
		require.NoError(t, err)
		c := store.Count(s)
		tx, err := commit.New(c, opts...).Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.KeepAll(ctx))
		require.NoError(t, tx.PutBytes(ctx, "b", []byte("3")))
		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		snap, err := commit.New(c, opts...).Open(ctx)
		require.NoError(t, err)
		assert.Equal(t, "3", readAll(t, snap, "b"))
		return c.Counts()
	}
	without := run()
	with := run(commit.WithManifestCache(t.TempDir()))
	want := without
	want[store.OpGet] -= 2
	assert.Equal(t, want, with, "without the cache: %s", without)
}

// A writer that rebases on a head another writer committed meanwhile
// reads that head's manifest through the cache, and publishes both
// changes on it.
func TestManifestCacheRebaseBuildsOnTheNewHeadsManifest(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	dir := t.TempDir()
	_, err := publish(t, commit.New(s, commit.WithManifestCache(dir)), map[string]string{"w/keep": "k", "o/f": "0"}, commit.CommitOptions{})
	require.NoError(t, err)

	counted, gets := manifestGets(s)
	w := commit.New(counted, commit.WithManifestCache(dir))
	tx, err := w.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.KeepAll(ctx))
	require.NoError(t, tx.PutBytes(ctx, "w/f", []byte("w")))
	require.NoError(t, tx.EnableRebase(commit.Rebase{Scope: "w/", NoGroup: true}))

	other, err := commit.New(s, commit.WithManifestCache(dir)).Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, other.KeepAll(ctx))
	require.NoError(t, other.PutBytes(ctx, "o/f", []byte("1")))
	head, err := other.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)

	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, head.Generation, p.Parent, "rebased on the new head")
	assert.Zero(t, gets.Load(), "both manifests came from the cache")
	snap := checkComplete(t, commit.New(s))
	assert.Equal(t, "w", readAll(t, snap, "w/f"))
	assert.Equal(t, "k", readAll(t, snap, "w/keep"))
	assert.Equal(t, "1", readAll(t, snap, "o/f"))
}

// A kept copy is the manifest the pointer's sum names, but it must also be
// the manifest of the pointer's generation: a pointer that names one
// generation with the sum of another's manifest fails as it does without
// the cache, instead of opening that other generation.
func TestManifestCacheCopyOfAnotherGenerationIsRefused(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	dir := t.TempDir()
	first, err := publish(t, commit.New(s, commit.WithManifestCache(dir)), map[string]string{"a": "old"}, commit.CommitOptions{})
	require.NoError(t, err)
	second, err := publish(t, commit.New(s, commit.WithManifestCache(dir)), map[string]string{"a": "new"}, commit.CommitOptions{})
	require.NoError(t, err)
	// The second generation's id, with the first's seq and manifest sum:
	// only the generation the manifest describes tells them apart.
	crossed := *second
	crossed.Seq, crossed.ManifestSHA256 = first.Seq, first.ManifestSHA256

	_, err = commit.New(s).OpenPointer(ctx, &crossed)
	require.ErrorIs(t, err, generation.ErrCorrupt, "without the cache")
	snap, err := commit.New(s, commit.WithManifestCache(dir)).OpenPointer(ctx, &crossed)
	require.ErrorIs(t, err, generation.ErrCorrupt, "with the cache")
	assert.Nil(t, snap)
}
