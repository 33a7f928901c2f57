package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// heldURL returns a held:// dataset URL and its fault store.
func heldURL(t *testing.T) (string, *faults.Store) {
	t.Helper()
	name := "into-" + uuid.NewString()[:8]
	fs := faults.NewStore(mem.New())
	heldStores.Store(name, fs)
	t.Cleanup(func() { heldStores.Delete(name) })
	return "held://" + name, fs
}

// TestPutIntoRace: a put --into whose commit another put beats rebases
// when the other published another prefix (exit 0, nothing uploaded
// again), and loses when it published the same prefix (exit 3, naming
// the paths), deterministically: the other put runs while the first one's
// pointer write is held.
func TestPutIntoRace(t *testing.T) {
	url, fs := heldURL(t)
	ok(t, "put", writeTree(t, map[string]string{"base/keep.txt": "keep"}), url)

	mine := writeTree(t, map[string]string{"a.csv": "mine a", "b.csv": "mine b"})
	other := writeTree(t, map[string]string{"x.csv": "other"})
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		ok(t, "put", "--into", "q/", other, url)
	}})
	var res putResult
	require.NoError(t, json.Unmarshal([]byte(ok(t, "--json", "put", "--into", "p/", mine, url)), &res))
	assert.Equal(t, 1, res.Rebased)
	assert.Equal(t, "p/", res.Into)
	assert.Equal(t, 2, res.Summary.Transferred, "uploaded once")
	assert.EqualValues(t, 3, res.Seq)
	dest := filepath.Join(t.TempDir(), "all")
	ok(t, "get", url, dest)
	assert.Equal(t, map[string]string{"base/keep.txt": "keep", "p/a.csv": "mine a", "p/b.csv": "mine b", "q/x.csv": "other"}, readTree(t, dest))

	// The same prefix: the held put loses.
	again := writeTree(t, map[string]string{"c.csv": "mine c"})
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		ok(t, "put", "--into", "p/", other, url)
	}})
	code, out, errs := cli(t, "", "put", "--into", "p/", again, url)
	assert.Equal(t, exitLost, code, "stdout: %s\nstderr: %s", out, errs)
	assert.Contains(t, errs, "lost the race")
	assert.Contains(t, errs, "p/x.csv")
	dest = filepath.Join(t.TempDir(), "p")
	ok(t, "get", "--into", "p/", url, dest)
	assert.Equal(t, map[string]string{"x.csv": "other"}, readTree(t, dest), "the winner's partition")

	// rm --into beside a put into another prefix.
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		ok(t, "put", "--into", "r/", mine, url)
	}})
	assert.Contains(t, ok(t, "rm", "--into", "q/", url), "rebased 1 time")
	dest = filepath.Join(t.TempDir(), "after-rm")
	ok(t, "get", url, dest)
	assert.Equal(t, map[string]string{"base/keep.txt": "keep", "p/x.csv": "other", "r/a.csv": "mine a", "r/b.csv": "mine b"}, readTree(t, dest))
}

// TestIntoCommands: put --into replaces only the prefix, rm --into drops
// it, get --into downloads it without the prefix, and bad prefixes are
// usage errors that name the prefix.
func TestIntoCommands(t *testing.T) {
	url := memURL()
	ok(t, "put", writeTree(t, map[string]string{"top.txt": "t", "p/old.txt": "old", "pp/x": "x"}), url)
	out := ok(t, "put", "--into", "p/", writeTree(t, map[string]string{"new.txt": "new", "sub/deep.txt": "deep"}), url)
	assert.Contains(t, out, "2 files under p/")
	assert.Contains(t, out, "2 files outside it kept")
	dest := filepath.Join(t.TempDir(), "all")
	ok(t, "get", url, dest)
	assert.Equal(t, map[string]string{"top.txt": "t", "p/new.txt": "new", "p/sub/deep.txt": "deep", "pp/x": "x"}, readTree(t, dest))

	// The same again: unchanged, nothing committed.
	assert.Contains(t, ok(t, "put", "--into", "p/", writeTree(t, map[string]string{"new.txt": "new", "sub/deep.txt": "deep"}), url), "unchanged")

	// --max-delete counts the partition's files only.
	code, _, errs := cli(t, "", "put", "--into", "p/", "--max-delete", "1", writeTree(t, map[string]string{"other.txt": "o"}), url)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "drop 2 of the current generation's 2 files")

	dest = filepath.Join(t.TempDir(), "p")
	ok(t, "get", "--into", "p/", url, dest)
	assert.Equal(t, map[string]string{"new.txt": "new", "sub/deep.txt": "deep"}, readTree(t, dest))

	assert.Contains(t, ok(t, "rm", "--into", "p/", url), "removed 2 files under p/, kept 2 files")
	dest = filepath.Join(t.TempDir(), "after")
	ok(t, "get", url, dest)
	assert.Equal(t, map[string]string{"top.txt": "t", "pp/x": "x"}, readTree(t, dest))
	code, _, errs = cli(t, "", "rm", "--into", "p/", url)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "holds no file under p/")
	assert.Contains(t, ok(t, "rm", "--into", "p/", "--missing-ok", url), "unchanged")
	code, _, errs = cli(t, "", "get", "--into", "p/", url, filepath.Join(t.TempDir(), "none"))
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "holds no file under p/")

	for _, bad := range []string{"p", "/p/", "a/../b/", "./p/", "a//b/", "/"} {
		for _, args := range [][]string{
			{"put", "--into", bad, writeTree(t, map[string]string{"f": "f"}), url},
			{"rm", "--into", bad, url},
			{"get", "--into", bad, url, filepath.Join(t.TempDir(), "d")},
		} {
			code, _, errs := cli(t, "", args...)
			assert.Equal(t, exitUsage, code, "%v: %s", args, errs)
			assert.Contains(t, errs, fmt.Sprintf("--into %q", bad), "%v", args)
		}
	}
	code, _, errs = cli(t, "", "rm", url)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "--into")
}

// TestPutIntoConcurrentBinary: N processes put --into N different
// prefixes at once; all exit 0, each uploads its files once, and the
// dataset holds every partition and the file kept from before. Then pairs
// of processes on one prefix: each exits 0 or 3, and the prefix holds
// exactly the last winner's files, the others intact.
func TestPutIntoConcurrentBinary(t *testing.T) {
	for _, tg := range targets(t) {
		if tg.name != "fs" && tg.name != "s3" {
			continue
		}
		t.Run(tg.name, func(t *testing.T) {
			const writers = 6
			url := tg.url(t)
			tg.ok(t, "put", writeTree(t, map[string]string{"keep.txt": "kept"}), url)
			want := map[string]string{"keep.txt": "kept"}
			dirs := make([]string, writers)
			for i := range writers {
				files := map[string]string{}
				for j := range 3 {
					files[fmt.Sprintf("f%d.csv", j)] = fmt.Sprintf("writer %d file %d", i, j)
					want[fmt.Sprintf("p%02d/f%d.csv", i, j)] = files[fmt.Sprintf("f%d.csv", j)]
				}
				dirs[i] = writeTree(t, files)
			}
			results := make([]result, writers)
			var wg sync.WaitGroup
			for i := range writers {
				wg.Go(func() {
					results[i] = tg.run(t, "--json", "put", "--into", fmt.Sprintf("p%02d/", i), dirs[i], url)
				})
			}
			wg.Wait()
			rebased, carried := 0, 0
			for i, r := range results {
				require.Equal(t, exitOK, r.code, "writer %d: %s", i, r.stderr)
				var res putResult
				require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
				assert.Equal(t, 3, res.Summary.Transferred, "writer %d uploaded its files once", i)
				rebased += res.Rebased
				if res.Carried {
					carried++
				}
			}
			t.Logf("%d writers, %d rebases, %d carried by another's commit", writers, rebased, carried)
			dest := filepath.Join(t.TempDir(), "all")
			tg.ok(t, "get", url, dest)
			assert.Equal(t, want, readTree(t, dest))
			var log logResult
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "--json", "log", url)), &log))
			assert.Len(t, log.Commits, writers+1-carried, "one commit per writer not carried by another's, and the first")
			named := 0
			for _, c := range log.Commits {
				named += len(c.Carried)
			}
			assert.Equal(t, carried, named, "log names every writer carried")

			// Same prefix, four at a time.
			same := make([]string, 4)
			for i := range same {
				same[i] = writeTree(t, map[string]string{fmt.Sprintf("only-%d.csv", i): strings.Repeat("y", i+1)})
			}
			results = make([]result, len(same))
			for i := range same {
				wg.Go(func() { results[i] = tg.run(t, "--json", "put", "--into", "p00/", same[i], url) })
			}
			wg.Wait()
			var lastSeq uint64
			last, lost := -1, 0
			for i, r := range results {
				require.Contains(t, []int{exitOK, exitLost}, r.code, "writer %d: %s", i, r.stderr)
				if r.code == exitLost {
					lost++
					assert.Contains(t, r.stderr, "lost the race")
					continue
				}
				var res putResult
				require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
				if res.Seq > lastSeq {
					lastSeq, last = res.Seq, i
				}
			}
			t.Logf("same prefix: %d of %d lost", lost, len(same))
			require.GreaterOrEqual(t, last, 0)
			dest = filepath.Join(t.TempDir(), "p00")
			tg.ok(t, "get", "--into", "p00/", url, dest)
			assert.Equal(t, map[string]string{fmt.Sprintf("only-%d.csv", last): strings.Repeat("y", last+1)}, readTree(t, dest))
			dest = filepath.Join(t.TempDir(), "p01")
			tg.ok(t, "get", "--into", "p01/", url, dest)
			assert.Len(t, readTree(t, dest), 3, "another partition is intact")
			tg.ok(t, "verify", "--all", url)
		})
	}
}

// TestPutIntoOverFileRefused: a put --into a prefix below a file of the
// dataset ("p1/" over the file "p1", "a/b/" over "a") is refused, naming
// the file in the way, and commits nothing, so that get still works: a
// generation holding both "p1" and "p1/x" could not be written out.
func TestPutIntoOverFileRefused(t *testing.T) {
	for _, c := range []struct{ file, into string }{{"p1", "p1/"}, {"a", "a/b/"}} {
		t.Run(c.into, func(t *testing.T) {
			url := memURL()
			ok(t, "put", writeTree(t, map[string]string{c.file: "file"}), url)
			code, out, errs := cli(t, "", "put", "--into", c.into, writeTree(t, map[string]string{"x": "x"}), url)
			assert.NotEqual(t, exitOK, code, "put --into %s over the file %q: stdout %s", c.into, c.file, out)
			assert.Contains(t, errs, c.file)
			code, _, errs = cli(t, "", "get", url, filepath.Join(t.TempDir(), "d"))
			assert.Equal(t, exitOK, code, "get after the put: %s", errs)
		})
	}
}
