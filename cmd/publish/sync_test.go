package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
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

// TestSyncDeletesNothingBeforeDownloadsVerify: sync deletes last, after
// every download was verified, and deletes nothing if a download fails.
// That holds for a path of DEST in the snapshot's way too (a directory
// where the snapshot has a file, a file where it needs a directory): a
// corrupt object leaves it in place.
func TestSyncDeletesNothingBeforeDownloadsVerify(t *testing.T) {
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

// TestSyncKeepsFilteredFileInReplacedDir: a file of DEST that the filters
// leave out is left alone, even below a directory where the snapshot has a
// file: sync fails, naming that directory, rather than delete it.
func TestSyncKeepsFilteredFileInReplacedDir(t *testing.T) {
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

// TestSyncRefusesFileAndDirOfOneName: a snapshot with a path that is both
// a file and the directory of another file ("a" and "a/b", as a writer of
// an older version could commit) cannot be a directory tree: sync refuses
// it, naming the path, before it changes anything in DEST.
func TestSyncRefusesFileAndDirOfOneName(t *testing.T) {
	tg := fileTargets(t)[0]
	url := tg.url(t)
	tg.ok(t, "put", writeTree(t, map[string]string{"a/b": "one"}), url)
	dest := filepath.Join(t.TempDir(), "dest")
	tg.ok(t, "sync", url, dest)

	// Commit refuses such a generation (commit.ErrFileDirClash), so it is
	// written by hand, as an older writer could have.
	commitByHand(t, tg.open(t, url), map[string]string{"a": "file a", "a/b": "two"})

	r := tg.run(t, "sync", url, dest)
	assert.Equal(t, exitError, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, `"a"`)
	assert.Equal(t, map[string]string{"a/b": "one"}, readTree(t, dest), "DEST is left as it was")
}

// commitByHand commits files as the next generation without Commit's
// checks: the objects, a manifest and a pointer write, as a writer of an
// older version could have.
func commitByHand(t *testing.T, s store.Store, files map[string]string) {
	t.Helper()
	ctx := context.Background()
	cur, attrs, err := pointer.Read(ctx, s)
	require.NoError(t, err)
	gen, err := generation.New()
	require.NoError(t, err)
	m := &generation.Manifest{Format: generation.FormatV1, Generation: gen, Parent: cur.Generation,
		ParentManifestSHA256: cur.ManifestSHA256, Seq: cur.Seq + 1, StagingStart: time.Now().UTC()}
	for p, body := range files {
		sum := sha256.Sum256([]byte(body))
		_, err := s.Put(ctx, generation.DataKey(gen, p), strings.NewReader(body), store.PutOptions{})
		require.NoError(t, err)
		m.Entries = append(m.Entries, generation.Entry{Path: p, Key: generation.DataKey(gen, p), Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:])})
	}
	stored, err := generation.Encode(m)
	require.NoError(t, err)
	_, err = s.Put(ctx, generation.ManifestKey(gen), bytes.NewReader(stored), store.PutOptions{})
	require.NoError(t, err)
	msum := sha256.Sum256(stored)
	_, err = pointer.Write(ctx, s, &pointer.Pointer{Seq: m.Seq, Generation: gen, Parent: cur.Generation,
		Manifest: generation.ManifestKey(gen), ManifestSHA256: hex.EncodeToString(msum[:])}, attrs.ETag)
	require.NoError(t, err)
}

// A file of DEST moved aside, where the snapshot needs a directory, is put
// back when a download fails, even though a download below it verified:
// that one waits for every download, so the directory is not made.
func TestSyncPutsBackAFileMovedAsideWhenAnotherDownloadFails(t *testing.T) {
	tg := fileTargets(t)[0]
	storeDir := filepath.Join(t.TempDir(), "store")
	url := "file://" + storeDir
	// The corrupt object is large, so that it fails after the one below
	// sub verified.
	big := "snapshot-big-file" + strings.Repeat("x", 4<<20)
	src := writeTree(t, map[string]string{"big": big, "sub/b.txt": "snapshot-b-file"})
	tg.ok(t, "put", src, url)
	corruptObject(t, storeDir, "snapshot-big-file")

	dest := writeTree(t, map[string]string{"sub": "my file named sub"})
	r := tg.run(t, "sync", url, dest)
	require.Equal(t, exitError, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.Equal(t, map[string]string{"sub": "my file named sub"}, readTree(t, dest),
		"a failed download must leave DEST's file in place")
}
