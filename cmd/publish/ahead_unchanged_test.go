package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPutOfTheCurrentGenerationIsUnchangedWhateverThisMachineCommittedLast:
// this machine committed a=1, b=1 last (its heads record); another writer
// (here a put without the cache, which records nothing) committed a=2
// since. SRC is now exactly the current generation: the dry run says
// unchanged, and so must put, committing nothing, though a differs from
// the manifest this machine expected, through a store 20 ms away.
func TestPutOfTheCurrentGenerationIsUnchangedWhateverThisMachineCommittedLast(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var log proxyLog
	_, flags, bucket := loggedS3(t, 20*time.Millisecond, &log)
	url := "s3://" + bucket + "/ds"

	src := writeTree(t, map[string]string{"a": "1", "b": "1"})
	ok(t, append(flags, "put", src, url)...)
	ok(t, append(flags, "--no-cache", "put", writeTree(t, map[string]string{"a": "2", "b": "1"}), url)...)

	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("2"), 0o644))
	assert.Contains(t, ok(t, append(flags, "put", "--dry-run", src, url)...), "unchanged")
	out := ok(t, append(flags, "put", src, url)...)
	assert.Contains(t, out, "unchanged: seq 2 ", "put committed instead:\n%s", out)
}

// TestPutReadsNoHeadRecordThatIsNotAFile: the record of the manifest this
// machine committed last is read only from a regular file: a FIFO put in
// its place neither blocks put nor counts as a record.
func TestPutReadsNoHeadRecordThatIsNotAFile(t *testing.T) {
	url := memURL()
	ok(t, "put", writeTree(t, map[string]string{"a": "1"}), url)
	g := &globalOptions{}
	path := g.headPath(url)
	require.NotEmpty(t, g.lastHead(url), "the put recorded its manifest")
	require.NoError(t, os.Remove(path))
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	done := make(chan string, 1)
	go func() { done <- g.lastHead(url) }()
	select {
	case head := <-done:
		assert.Empty(t, head)
	case <-time.After(30 * time.Second):
		t.Fatal("reading the record waits on a FIFO")
	}
	ok(t, "put", writeTree(t, map[string]string{"a": "2"}), url)
}
