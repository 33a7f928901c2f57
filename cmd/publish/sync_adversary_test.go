package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
)

// corruptObject flips the first byte of every object file of a local store
// below storeDir whose body starts with old (the body leads the file, its
// trailer follows), so a download of it fails verification.
func corruptObject(t *testing.T, storeDir, old string) {
	t.Helper()
	n := 0
	require.NoError(t, filepath.Walk(storeDir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && strings.HasPrefix(string(b), old) {
			n++
			b[0] ^= 0xff
			return os.WriteFile(p, b, fi.Mode().Perm())
		}
		return err
	}))
	require.NotZero(t, n, "no stored object holds %q", old)
}

// TestSyncAdversaryNoDeleteBeforeVerify: sync promises that deletions come
// last, after every download was verified, and that if a download fails
// nothing is deleted. The break: a path in DEST that is "in the way" (a
// directory where the snapshot has a file, or a file where the snapshot
// needs a directory) was removed (RemoveAll) before the downloads, so a
// corrupt object lost the user's files, which sync then reported as
// "no file was deleted" on an interrupt.
func TestSyncAdversaryNoDeleteBeforeVerify(t *testing.T) {
	tg := fileTargets(t)[0]
	storeDir := filepath.Join(t.TempDir(), "store")
	url := "file://" + storeDir
	src := writeTree(t, map[string]string{"data": "snapshot-data-file", "sub/b.txt": "snapshot-b-file"})
	tg.ok(t, "put", src, url)
	corruptObject(t, storeDir, "snapshot-data-file")
	corruptObject(t, storeDir, "snapshot-b-file")

	dest := writeTree(t, map[string]string{"data/precious": "mine", "sub": "my file named sub"})
	r := tg.run(t, "sync", url, dest)
	require.Equal(t, exitError, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.Equal(t, map[string]string{"data/precious": "mine", "sub": "my file named sub"}, readTree(t, dest),
		"a failed download must leave DEST's files in place")
}

// TestSyncAdversaryFilteredInsideReplacedDir: sync promises that a file in
// DEST that the filters leave out is left alone. The break: a directory
// where the snapshot has a file was removed with everything below it,
// including files the filters leave out.
func TestSyncAdversaryFilteredInsideReplacedDir(t *testing.T) {
	tg := fileTargets(t)[0]
	url := tg.url(t)
	src := writeTree(t, map[string]string{"data": "snapshot-data-file"})
	tg.ok(t, "put", src, url)

	dest := writeTree(t, map[string]string{"data/notes.local": "mine"})
	r := tg.run(t, "sync", "--exclude", "*.local", url, dest)
	assert.Equal(t, map[string]string{"data/notes.local": "mine"}, readTree(t, dest),
		"a file the filters leave out is left alone (stdout: %s, stderr: %s)", r.stdout, r.stderr)
	assert.Equal(t, exitError, r.code, "the snapshot's file cannot be written without deleting a filtered-out file")
	assert.Contains(t, r.stderr, filepath.Join(dest, "data"))
}

// TestSyncAdversaryFileAndDirSameName: the manifest format accepts a path
// that is both a file and the directory of another file ("a" and "a/b";
// the library's Tx.PutBytes writes such a snapshot). The break: sync went
// ahead, removed DEST's directory "a" with the file below it, renamed the
// file "a" in, and then failed on "a/b", leaving DEST neither the old nor
// the new snapshot. Such a snapshot cannot be a directory tree; sync must
// refuse it before it changes anything.
func TestSyncAdversaryFileAndDirSameName(t *testing.T) {
	tg := fileTargets(t)[0]
	ctx := context.Background()
	url := tg.url(t)
	tg.ok(t, "put", writeTree(t, map[string]string{"a/b": "one"}), url)
	dest := filepath.Join(t.TempDir(), "dest")
	tg.ok(t, "sync", url, dest)

	d := commit.New(tg.open(t, url))
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutBytes(ctx, "a", []byte("file a")))
	require.NoError(t, tx.PutBytes(ctx, "a/b", []byte("two")))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)

	r := tg.run(t, "sync", url, dest)
	assert.Equal(t, exitError, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, `"a"`)
	assert.Equal(t, map[string]string{"a/b": "one"}, readTree(t, dest), "DEST is left as it was")
}
