package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/store"
)

// linkDAG makes SRC with depth directories d0 … d(depth-1), each holding
// a file and two links, a and b, to the next: --links follow reaches the
// last directory by 2^(depth-1) paths.
func linkDAG(t *testing.T, depth int) string {
	t.Helper()
	src := t.TempDir()
	for i := range depth {
		d := filepath.Join(src, fmt.Sprintf("d%d", i))
		require.NoError(t, os.Mkdir(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o644))
		if i+1 < depth {
			next := filepath.Join("..", fmt.Sprintf("d%d", i+1))
			require.NoError(t, os.Symlink(next, filepath.Join(d, "a")))
			require.NoError(t, os.Symlink(next, filepath.Join(d, "b")))
		}
	}
	return src
}

// TestCollectBoundedByManifest: following links that fan out makes the
// walk stop once the files listed could not fit in a manifest a reader
// accepts, with an error naming SRC and the cause, instead of growing
// without bound.
func TestCollectBoundedByManifest(t *testing.T) {
	src := linkDAG(t, 14) // 2^14 - 1 paths to files, far more than the bound holds
	_, err := collectUpTo(context.Background(), src, linksFollow, &filters{}, 64<<10, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), src)
	assert.Contains(t, err.Error(), "more files than one generation can list")
	assert.Contains(t, err.Error(), "--links follow")

	// The same tree with a bound it fits in is listed whole.
	files, err := collectUpTo(context.Background(), linkDAG(t, 4), linksFollow, &filters{}, 64<<10, nil)
	require.NoError(t, err)
	assert.Len(t, files, 15+7+3+1) // below di, 2^(4-i) - 1 paths lead to a file
	assert.EqualValues(t, generation.MaxDecoded, collectBound, "put lists what a reader accepts")
}

// TestCollectStopsWhenCancelled: an interrupt ends the walk.
func TestCollectStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := collect(ctx, linkDAG(t, 3), linksFollow, &filters{})
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "listing SRC")
}

// TestStageRefusesSwappedFile: a file that put listed and that is then
// replaced by a link to a file outside SRC, before it is uploaded, is
// refused with its path, and nothing of the outside file is uploaded.
func TestStageRefusesSwappedFile(t *testing.T) {
	src := writeTree(t, map[string]string{"a": "listed a", "b": "listed b"})
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("outside SRC"), 0o600))
	files, err := collect(context.Background(), src, linksRefuse, &filters{})
	require.NoError(t, err)
	require.Len(t, files, 2)
	require.NoError(t, os.Remove(filepath.Join(src, "b")))
	require.NoError(t, os.Symlink(secret, filepath.Join(src, "b")))

	ctx := context.Background()
	s, err := store.Open(ctx, memURL(), store.Config{})
	require.NoError(t, err)
	tx, err := commit.New(s).Begin(ctx)
	require.NoError(t, err)
	err = stage(ctx, putOptions{globalOptions: &globalOptions{}, Concurrency: 1}, tx, files, nil, &discard{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(src, "b"))
	assert.Contains(t, err.Error(), "symbolic link")
	require.NoError(t, tx.Discard(ctx))
	for o, err := range store.List(ctx, s, "", "", "") {
		require.NoError(t, err)
		t.Errorf("left behind: %s", o.Key)
	}
}

// TestRepairRefusesChangedFile: a repair uploads only the published
// content; a file that no longer has it by the time it is uploaded fails
// the repair.
func TestRepairRefusesChangedFile(t *testing.T) {
	ctx := context.Background()
	src := writeTree(t, map[string]string{"a": "changed since it was checked"})
	s, err := store.Open(ctx, memURL(), store.Config{})
	require.NoError(t, err)
	tx, err := commit.New(s).Begin(ctx)
	require.NoError(t, err)
	defer tx.Discard(ctx) //nolint:errcheck // nothing is committed
	gen := uuid.Must(uuid.NewV7()).String()
	e := generation.Entry{Path: "a", Key: generation.DataKey(gen, "a"), Size: 28, SHA256: "0000000000000000000000000000000000000000000000000000000000000000"}
	err = putLocal(ctx, tx, e, filepath.Join(src, "a"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "changed after it was checked")
	assert.Contains(t, err.Error(), "content differs")
	assert.Contains(t, err.Error(), filepath.Join(src, "a"))
	assert.False(t, errors.Is(err, context.Canceled))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestStageLinkedSRCFile: a SRC that is a link to a file, with --links
// follow, is staged from its target under the link's name.
func TestStageLinkedSRCFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "real"), []byte("target"), 0o644))
	require.NoError(t, os.Symlink("real", filepath.Join(dir, "lnk")))
	ctx := context.Background()
	files, err := collect(ctx, filepath.Join(dir, "lnk"), linksFollow, &filters{})
	require.NoError(t, err)
	require.Len(t, files, 1)
	assert.Equal(t, "lnk", files[0].path)

	s, err := store.Open(ctx, memURL(), store.Config{})
	require.NoError(t, err)
	d := commit.New(s)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, stage(ctx, putOptions{globalOptions: &globalOptions{}, Concurrency: 1}, tx, files, nil, &discard{}))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	got, err := snap.ReadFile(ctx, "lnk")
	require.NoError(t, err)
	assert.Equal(t, "target", string(got))
}
