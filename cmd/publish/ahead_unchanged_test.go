package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/internal/wanproxy"
)

// TestPutOfTheCurrentGenerationIsUnchangedWhateverThisMachineCommittedLast:
// this machine committed a=1, b=1 last (its heads record); another writer
// (here a put without the cache, which records nothing) committed a=2
// since. SRC is now exactly the current generation: the dry run says
// unchanged, and so must put, committing nothing, though a differs from
// the manifest this machine expected, through a store 20 ms away.
func TestPutOfTheCurrentGenerationIsUnchangedWhateverThisMachineCommittedLast(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	srv := testenv.S3(t)
	srv.UseCredentials()
	bucket := srv.NewBucket(t)
	var log proxyLog
	p, err := wanproxy.Start("127.0.0.1:0", srv.Endpoint, 20*time.Millisecond, &log)
	require.NoError(t, err)
	defer p.Close()
	flags := []string{"--endpoint", p.URL, "--path-style"}
	url := "s3://" + bucket + "/ds"

	src := writeTree(t, map[string]string{"a": "1", "b": "1"})
	ok(t, append(flags, "put", src, url)...)
	ok(t, append(flags, "--no-cache", "put", writeTree(t, map[string]string{"a": "2", "b": "1"}), url)...)

	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("2"), 0o644))
	assert.Contains(t, ok(t, append(flags, "put", "--dry-run", src, url)...), "unchanged")
	out := ok(t, append(flags, "put", src, url)...)
	assert.Contains(t, out, "unchanged: seq 2 ", "put committed instead:\n%s", out)
}
