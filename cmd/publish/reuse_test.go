package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// TestPutRepairsReuse: an object of the current generation deleted by hand
// and another overwritten with fewer bytes. Publishing the same directory
// again uploads those two files again instead of referencing them, and the
// new seq reads back whole; --no-reuse uploads everything; a rollback to
// the damaged seq, which has no local copy to repair from, is refused and
// names the missing object.
func TestPutRepairsReuse(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := context.Background()
			url := tg.url(t)
			files := map[string]string{}
			for i := range 31 {
				files[fmt.Sprintf("part/%02d.csv", i)] = fmt.Sprintf("row %d\n", i)
			}
			src := writeTree(t, files)
			tg.ok(t, "put", src, url)

			s := tg.open(t, url)
			first, err := commit.New(s).Open(ctx)
			require.NoError(t, err)
			gone, _ := first.Manifest.Find("part/07.csv")
			short, _ := first.Manifest.Find("part/19.csv")
			require.NoError(t, s.Delete(ctx, gone.Key, store.DeleteOptions{}))
			_, err = s.Put(ctx, short.Key, strings.NewReader("r"), store.PutOptions{})
			require.NoError(t, err)

			out := tg.ok(t, "put", src, url)
			assert.Contains(t, out, "committed seq 2")
			assert.Contains(t, out, "31 files (29 reused, 2 uploaded again")
			dest := filepath.Join(t.TempDir(), "out")
			tg.ok(t, "get", "--seq", "2", url, dest)
			assert.Equal(t, files, readTree(t, dest))
			assert.Contains(t, tg.ok(t, "verify", url), ": ok")

			var res putResult
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "--json", "put", "--no-reuse", src, url)), &res))
			assert.Equal(t, 0, res.Reused)
			cur, err := commit.New(s).Open(ctx)
			require.NoError(t, err)
			for _, e := range cur.Files() {
				assert.Equal(t, res.Generation, generation.FromKey(e.Key), "--no-reuse uploaded %s", e.Path)
			}

			r := tg.run(t, "rollback", url, "--to", "1")
			assert.Equal(t, exitError, r.code, r.stderr)
			assert.Contains(t, r.stderr, "part/07.csv: object "+gone.Key+" missing")
			assert.Contains(t, r.stderr, "part/19.csv: object "+short.Key+" has 1 bytes, the manifest says 7")
			p, _, err := pointer.Read(ctx, s)
			require.NoError(t, err)
			assert.EqualValues(t, 3, p.Seq, "the refused rollback committed nothing")
		})
	}
}

// TestVerifyRepair: verify --repair SRC uploads the damaged files of the
// current generation again from SRC, including one whose bytes changed
// but not its size (which put's reuse cannot see), and refuses a SRC that
// holds other content. A repaired file keeps its recorded mode and time.
func TestVerifyRepair(t *testing.T) {
	for _, tg := range targets(t)[:2] {
		t.Run(tg.name, func(t *testing.T) {
			ctx := context.Background()
			url := tg.url(t)
			files := map[string]string{"a.txt": "alpha", "b.txt": "bravo", "c/d.txt": "delta"}
			src := writeTree(t, files)
			require.NoError(t, os.Chmod(filepath.Join(src, "a.txt"), 0o755))
			stamp := time.Date(2020, 2, 3, 4, 5, 6, 0, time.UTC)
			require.NoError(t, os.Chtimes(filepath.Join(src, "a.txt"), stamp, stamp))
			tg.ok(t, "put", src, url)
			s := tg.open(t, url)
			snap, err := commit.New(s).Open(ctx)
			require.NoError(t, err)
			flipped, _ := snap.Manifest.Find("a.txt")
			gone, _ := snap.Manifest.Find("c/d.txt")
			_, err = s.Put(ctx, flipped.Key, strings.NewReader("alphA"), store.PutOptions{})
			require.NoError(t, err)
			require.NoError(t, s.Delete(ctx, gone.Key, store.DeleteOptions{}))

			other := writeTree(t, map[string]string{"a.txt": "other", "c/d.txt": "delta"})
			r := tg.run(t, "verify", "--repair", other, url)
			assert.Equal(t, exitError, r.code)
			assert.Contains(t, r.stderr, "repair a.txt:")
			assert.Contains(t, r.stderr, "differs from the manifest entry")

			// The copy the repair reads from has other permission bits
			// and times: what was published is what comes back.
			require.NoError(t, os.Chmod(filepath.Join(src, "a.txt"), 0o644))
			require.NoError(t, os.Chtimes(filepath.Join(src, "a.txt"), time.Now(), time.Now()))
			out := tg.ok(t, "verify", "--repair", src, url)
			assert.Contains(t, out, "2 problems")
			assert.Contains(t, out, "repaired 2 files from "+src+": committed seq 2")
			assert.Contains(t, tg.ok(t, "verify", url), ": ok")
			dest := filepath.Join(t.TempDir(), "out")
			tg.ok(t, "get", url, dest)
			assert.Equal(t, files, readTree(t, dest))
			fi, err := os.Stat(filepath.Join(dest, "a.txt"))
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "the repaired file keeps its mode")
			assert.True(t, stamp.Equal(fi.ModTime()), "the repaired file keeps its time: %s", fi.ModTime())
		})
	}
}
