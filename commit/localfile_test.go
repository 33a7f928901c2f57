package commit_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// TestPutFileExpect: a file listed before it is staged and then replaced,
// by a symbolic link to a file outside or by another file, is refused with
// its path; its content never reaches the store. The file as listed stages.
func TestPutFileExpect(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("outside SRC"), 0o600))
	listed := func(name string) os.FileInfo {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("listed "+name), 0o644))
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		return fi
	}
	kept, linked, swapped := listed("kept"), listed("linked"), listed("swapped")
	require.NoError(t, os.Remove(filepath.Join(dir, "linked")))
	require.NoError(t, os.Symlink(secret, filepath.Join(dir, "linked")))
	other := filepath.Join(dir, "other")
	require.NoError(t, os.WriteFile(other, []byte("another file"), 0o644))
	require.NoError(t, os.Rename(other, filepath.Join(dir, "swapped")))

	s := mem.New()
	d := commit.New(s)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	defer tx.Discard(ctx) //nolint:errcheck // the test checks what was staged
	require.NoError(t, tx.PutFile(ctx, "kept", filepath.Join(dir, "kept"), commit.Expect(kept)))

	err = tx.PutFile(ctx, "linked", filepath.Join(dir, "linked"), commit.Expect(linked))
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(dir, "linked"))
	assert.Contains(t, err.Error(), "symbolic link")

	err = tx.PutFile(ctx, "swapped", filepath.Join(dir, "swapped"), commit.Expect(swapped))
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(dir, "swapped"))
	assert.Contains(t, err.Error(), "another file")

	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	var paths []string
	for _, e := range snap.Files() {
		paths = append(paths, e.Path)
	}
	assert.Equal(t, []string{"kept"}, paths)
	assertNoObjectHolds(t, s, "outside SRC", "another file")
}

// TestReuploadExpect: a reused file whose object turned out missing is
// read again for the upload under the same Expect; a file replaced by a
// link in between is refused, not read through.
func TestReuploadExpect(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	dir := t.TempDir()
	p := filepath.Join(dir, "x")
	require.NoError(t, os.WriteFile(p, []byte("same"), 0o644))
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutFile(ctx, "x", p, commit.Expect(fi)))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	e, _ := snap.Manifest.Find("x")
	require.NoError(t, s.Delete(ctx, e.Key, store.DeleteOptions{}))

	tx, err = d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutFile(ctx, "x", p, commit.Expect(fi)))
	require.Equal(t, 1, tx.Reused())
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("same"), 0o600)) // same size and content: only the link differs
	require.NoError(t, os.Remove(p))
	require.NoError(t, os.Symlink(secret, p))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), p)
	assert.Contains(t, err.Error(), "symbolic link")
}

// assertNoObjectHolds fails if any object of s holds one of the bodies.
func assertNoObjectHolds(t *testing.T, s store.Store, bodies ...string) {
	t.Helper()
	ctx := context.Background()
	for o, err := range store.List(ctx, s, "", "", "") {
		require.NoError(t, err)
		b := testenv.ReadString(t, s, o.Key)
		for _, body := range bodies {
			assert.NotContains(t, b, body, "object %s", o.Key)
		}
	}
}
