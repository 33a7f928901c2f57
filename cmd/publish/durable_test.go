package main

import (
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordSyncs makes fsync record the path of each file and directory it
// syncs, for the rest of the test, with the temporary names of get and
// sync replaced by the names they are renamed to.
func recordSyncs(t *testing.T) (synced func() []string) {
	var mu sync.Mutex
	var got []string
	tmpName := regexp.MustCompile(`(^|/)\.([^/]+)\.publish-(get|sync)-[^/]+`)
	real := fsync
	fsync = func(f *os.File) error {
		mu.Lock()
		got = append(got, tmpName.ReplaceAllString(filepath.Clean(f.Name()), "$1$2"))
		mu.Unlock()
		return real(f)
	}
	t.Cleanup(func() { fsync = real })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// TestGetSyncsEveryFileAndDirectory: get syncs each file it wrote, each
// directory it created, and the directories that DEST and its new parent
// were created in, each once.
func TestGetSyncsEveryFileAndDirectory(t *testing.T) {
	u := memURL()
	ok(t, "put", writeTree(t, map[string]string{"a": "1", "d/b": "2", "d/e/c": "3", "f/g": "4", "h/i/j": "5"}), u)
	base := t.TempDir()
	synced := recordSyncs(t)
	ok(t, "get", u, filepath.Join(base, "new", "out"))
	out := filepath.Join(base, "new", "out")
	want := []string{base, filepath.Join(base, "new"), out}
	for _, p := range []string{"a", "d", "d/b", "d/e", "d/e/c", "f", "f/g", "h", "h/i", "h/i/j"} {
		want = append(want, filepath.Join(out, p))
	}
	assert.ElementsMatch(t, want, synced())
}

// TestSyncSyncsWhatItChanged: sync syncs each file it downloaded or whose
// mode it set, and each directory where it created, renamed or removed a
// name (ex lost a file, rm a directory), and nothing else.
func TestSyncSyncsWhatItChanged(t *testing.T) {
	u := memURL()
	ok(t, "put", writeTree(t, map[string]string{"keep": "k", "mode": "m", "old/x": "x", "chg/c": "c1",
		"ex/k": "k", "ex/gone": "g", "rm/k": "k", "rm/old/x": "x"}), u)
	dest := filepath.Join(t.TempDir(), "dest")
	ok(t, "sync", "--no-times", u, dest)

	v2 := map[string]string{"keep": "k", "mode": "m", "chg/c": "c2", "new/deep/n": "n", "ex/k": "k", "rm/k": "k"}
	src := writeTree(t, v2)
	require.NoError(t, os.Chmod(filepath.Join(src, "mode"), 0o600))
	ok(t, "put", src, u)
	synced := recordSyncs(t)
	ok(t, "sync", "--no-times", u, dest)
	var want []string
	for _, p := range []string{".", "chg", "chg/c", "mode", "new", "new/deep", "new/deep/n", "ex", "rm"} {
		want = append(want, filepath.Join(dest, p))
	}
	assert.ElementsMatch(t, want, synced())
	assert.Equal(t, v2, readTree(t, dest))
}
