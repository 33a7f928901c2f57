package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
)

// writeRequests is how many writes (puts, deletes) c has counted.
func writeRequests(c *store.Counter) int64 {
	n := c.Counts()
	return n[store.OpPut] + n[store.OpDelete] + n[store.OpDeleteMany]
}

// dryRunDrivers are the local store and S3 (versitygw).
func dryRunDrivers(t *testing.T) []testenv.Factory {
	fs := testenv.Stores()[1:3]
	require.Equal(t, []string{"fs", "s3"}, []string{fs[0].Name, fs[1].Name})
	return fs
}

// TestPutDryRunWritesNothing: put --dry-run says what a put would upload,
// reuse and remove, with the summary line of put in "would be" form, and
// sends no write to the store: the request count of writes stays 0 and the
// listing is the same before and after, on an empty dataset and on one with
// commits.
func TestPutDryRunWritesNothing(t *testing.T) {
	for _, f := range dryRunDrivers(t) {
		t.Run(f.Name, func(t *testing.T) {
			s := f.New(t)
			c := store.Count(s)
			u := hookedURL(t, c)
			src := writeTree(t, map[string]string{"a": "aa", "b": "bbb"})

			out := ok(t, "put", "--dry-run", src, u)
			assert.Contains(t, out, "dry run on a dataset without commits: a put would commit 2 files (0 reused), 5 B; nothing was written\n")
			assert.Regexp(t, `^put: 2 files: 2 would be uploaded \(5 B\), 0 would be reused \(0 B\); \S+, nothing written$`, lastLine(out))
			assert.Zero(t, writeRequests(c))
			assert.Empty(t, listing(t, s))

			ok(t, "put", src, u)
			require.NoError(t, os.Remove(filepath.Join(src, "a")))
			require.NoError(t, os.WriteFile(filepath.Join(src, "c"), []byte("cccc"), 0o644))
			before, writes := listing(t, s), writeRequests(c)
			code, out, errs := cli(t, "", "-v", "put", "--dry-run", src, u)
			require.Equal(t, exitOK, code, errs)
			assert.Regexp(t, `^dry run on seq 1 generation \S+: a put would commit 2 files \(1 reused\), 7 B; nothing was written\n`, out)
			assert.Regexp(t, `^put: 2 files: 1 would be uploaded \(4 B\), 1 would be reused \(3 B\), 1 would be removed; \S+, nothing written$`, lastLine(out))
			assert.Contains(t, errs, "would reuse b\n")
			assert.Contains(t, errs, "would upload c\n")
			assert.Contains(t, errs, "would remove a\n")
			var res putResult
			require.NoError(t, json.Unmarshal([]byte(ok(t, "--json", "put", "--dry-run", src, u)), &res))
			assert.True(t, res.DryRun)
			assert.EqualValues(t, 1, res.Seq)
			assert.Equal(t, 1, res.Summary.Transferred)
			assert.Equal(t, 1, res.Summary.Reused)
			assert.Equal(t, 1, res.Summary.Deleted)
			assert.Equal(t, writes, writeRequests(c), "a dry run sends no write")
			assert.Equal(t, before, listing(t, s))

			// What the dry run said is what put does.
			assert.Regexp(t, `^put: 2 files: 1 uploaded \(4 B\), 1 reused \(3 B\); `, lastLine(ok(t, "put", src, u)))
			before, writes = listing(t, s), writeRequests(c)
			assert.Contains(t, ok(t, "put", "--dry-run", src, u), "unchanged, it already holds exactly these files (2 files, 7 B); a put would commit nothing\n")
			assert.Equal(t, writes, writeRequests(c))
			assert.Equal(t, before, listing(t, s))
		})
	}
}

// TestGCDryRunSendsNoWrite: gc --dry-run prints its plan and sends no
// write request, not even for the collector's lease, so that a role that
// may only read can run it; it runs while another collector holds the
// lease.
func TestGCDryRunSendsNoWrite(t *testing.T) {
	for _, f := range dryRunDrivers(t) {
		t.Run(f.Name, func(t *testing.T) {
			s := f.New(t)
			c := store.Count(s)
			u := hookedURL(t, c)
			for i := range 3 {
				ok(t, "put", writeTree(t, map[string]string{"f": strconv.Itoa(i)}), u)
			}
			before, writes := listing(t, s), writeRequests(c)
			out := ok(t, "gc", "--dry-run", "--keep", "0", "--grace", "0", u)
			assert.Contains(t, out, "dry run at seq 3")
			assert.Contains(t, out, "would delete (superseded): 2 generations")
			assert.Equal(t, writes, writeRequests(c), "a dry run sends no write")
			assert.Equal(t, before, listing(t, s))

			ok(t, "lease", "acquire", u, "gc")
			before, writes = listing(t, s), writeRequests(c)
			assert.Contains(t, ok(t, "gc", "--dry-run", "--keep", "0", "--grace", "0", u), "dry run at seq 3")
			assert.Equal(t, writes, writeRequests(c))
			assert.Equal(t, before, listing(t, s))
		})
	}
}

// The dry run agrees with the real put on unchanged and --max-delete,
// with and without --into, for a mode-only change and a file fewer.
func TestPutDryRunAgreesWithPutOnUnchangedAndMaxDelete(t *testing.T) {
	dryUnchanged := func(out string) bool { return strings.Contains(out, "unchanged") }
	for _, into := range []string{"", "p/"} {
		t.Run("into="+into, func(t *testing.T) {
			url := memURL()
			ok(t, "put", writeTree(t, map[string]string{"top.txt": "t"}), url)
			args := func(a ...string) []string {
				if into != "" {
					a = append([]string{a[0], "--into", into}, a[1:]...)
				}
				return a
			}
			src := writeTree(t, map[string]string{"a": "a", "b": "b", "c": "c"})
			ok(t, args("put", src, url)...)

			// a mode-only change: put commits, the dry run must not say unchanged
			require.NoError(t, os.Chmod(filepath.Join(src, "a"), 0o755))
			assert.False(t, dryUnchanged(ok(t, args("put", "--dry-run", src, url)...)), "mode only: dry run")
			require.NoError(t, os.Chmod(filepath.Join(src, "a"), 0o644))

			// a file fewer, the rest the same
			require.NoError(t, os.Remove(filepath.Join(src, "c")))
			assert.False(t, dryUnchanged(ok(t, args("put", "--dry-run", src, url)...)), "a file fewer: dry run")

			// --max-delete 0 refuses dropping c, in the dry run as in put
			code, _, _ := cli(t, "", args("put", "--dry-run", "--max-delete", "0", src, url)...)
			assert.Equal(t, exitError, code, "dry run with --max-delete 0")
			code, _, _ = cli(t, "", args("put", "--max-delete", "0", src, url)...)
			assert.Equal(t, exitError, code, "put with --max-delete 0")
			// the files outside --into are not judged: only c is dropped under p/
			code, _, _ = cli(t, "", args("put", "--dry-run", "--max-delete", "1", src, url)...)
			assert.Equal(t, exitOK, code, "dry run with --max-delete 1")
		})
	}
}
