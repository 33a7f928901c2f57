package commit_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// manifestGets wraps s, counting the GETs of manifests.
func manifestGets(s store.Store) (store.Store, *atomic.Int64) {
	var n atomic.Int64
	fs := faults.NewStore(s)
	fs.Add(faults.Rule{Op: store.OpGet, Suffix: "/_manifest", Kind: faults.Latency, Then: func() { n.Add(1) }})
	return fs, &n
}

func readAll(t *testing.T, snap *commit.Snapshot, path string) string {
	t.Helper()
	b, err := snap.ReadFile(context.Background(), path)
	require.NoError(t, err)
	return string(b)
}

// A manifest that one Dataset wrote is not read again by a later Dataset
// with the same cache directory: neither as a writer's base nor as a
// reader's current generation.
func TestManifestCacheSavesTheManifestGETAcrossDatasets(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	dir := filepath.Join(t.TempDir(), "manifests")
	_, err := publish(t, commit.New(s, commit.WithManifestCache(dir)), map[string]string{"a": "1", "b": "2"}, commit.CommitOptions{})
	require.NoError(t, err)

	counted, gets := manifestGets(s)
	w := commit.New(counted, commit.WithManifestCache(dir))
	tx, err := w.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.KeepAll(ctx))
	require.NoError(t, tx.PutBytes(ctx, "b", []byte("3")))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Zero(t, gets.Load(), "the writer's base came from the cache")

	snap, err := commit.New(counted, commit.WithManifestCache(dir)).Open(ctx)
	require.NoError(t, err)
	assert.Equal(t, "1", readAll(t, snap, "a"))
	assert.Equal(t, "3", readAll(t, snap, "b"))
	assert.Zero(t, gets.Load(), "the reader's manifest came from the cache")

	// Without the cache, each reads it from the store.
	_, err = commit.New(counted).Open(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, gets.Load())
}

// A copy in the cache is used only if it is the manifest the pointer
// records: one replaced by other bytes, even a valid manifest of the
// dataset, is read from the store again.
func TestManifestCacheCopyThatIsNotThePointersManifestIsReadFromTheStore(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	dir := t.TempDir()
	first, err := publish(t, commit.New(s, commit.WithManifestCache(dir)), map[string]string{"a": "old"}, commit.CommitOptions{})
	require.NoError(t, err)
	second, err := publish(t, commit.New(s, commit.WithManifestCache(dir)), map[string]string{"a": "new"}, commit.CommitOptions{})
	require.NoError(t, err)
	// The current manifest's copy now holds the older manifest's bytes.
	older, err := os.ReadFile(filepath.Join(dir, first.ManifestSHA256))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, second.ManifestSHA256), older, 0o600))

	counted, gets := manifestGets(s)
	snap, err := commit.New(counted, commit.WithManifestCache(dir)).Open(ctx)
	require.NoError(t, err)
	assert.Equal(t, second.Generation, snap.Generation())
	assert.Equal(t, "new", readAll(t, snap, "a"))
	assert.EqualValues(t, 1, gets.Load(), "read from the store")

	// The store's copy replaced the damaged one.
	again, err := commit.New(counted, commit.WithManifestCache(dir)).Open(ctx)
	require.NoError(t, err)
	assert.Equal(t, "new", readAll(t, again, "a"))
	assert.EqualValues(t, 1, gets.Load(), "the cache holds the right copy again")
}
