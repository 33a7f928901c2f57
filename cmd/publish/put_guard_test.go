package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/store"
)

// TestPutGuards: an empty SRC, a put that drops too many files, and an
// unchanged SRC are refused or skipped, and write nothing; a put over a
// damaged dataset is not "unchanged" and repairs it.
func TestPutGuards(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			empty := t.TempDir()
			r := tg.run(t, "put", empty, url)
			assert.Equal(t, exitError, r.code, r.stderr)
			assert.Contains(t, r.stderr, "holds no files")
			assert.Contains(t, r.stderr, "--allow-empty")
			r = tg.run(t, "show", url)
			assert.NotEqual(t, 0, r.code, "nothing was committed")

			files := map[string]string{}
			for _, p := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
				files[p] = "content of " + p
			}
			src := writeTree(t, files)
			tg.ok(t, "put", src, url)

			// Unchanged: nothing committed, exit 0.
			var res putResult
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "put", "--json", src, url)), &res))
			assert.True(t, res.Unchanged)
			assert.Equal(t, uint64(1), res.Seq)
			assert.Contains(t, tg.ok(t, "put", src, url), "unchanged: seq 1")
			res = putResult{}
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "put", "--json", "--allow-unchanged", src, url)), &res))
			assert.False(t, res.Unchanged)
			assert.Equal(t, uint64(2), res.Seq)

			// --max-delete: dropping 3 of 10 files.
			for _, p := range []string{"a", "b", "c"} {
				require.NoError(t, os.Remove(filepath.Join(src, p)))
			}
			for _, limit := range []string{"2", "20%"} {
				r = tg.run(t, "put", "--max-delete", limit, src, url)
				assert.Equal(t, exitError, r.code, r.stderr)
				assert.Contains(t, r.stderr, "drop 3 of the current generation's 10 files")
			}
			r = tg.run(t, "put", "--max-delete", "x", src, url)
			assert.Equal(t, exitUsage, r.code, r.stderr)
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "put", "--json", "--max-delete", "30%", src, url)), &res))
			assert.Equal(t, uint64(3), res.Seq)
			tg.ok(t, "put", "--allow-empty", empty, url)

			// A damaged dataset is not unchanged: the put repairs it.
			tg.ok(t, "put", src, url)
			s := tg.open(t, url)
			snap, err := commit.New(s).Open(t.Context())
			require.NoError(t, err)
			var key string
			for _, e := range snap.Files() {
				if e.Path == "d" {
					key = e.Key
				}
			}
			require.NotEmpty(t, key)
			require.NoError(t, s.Delete(t.Context(), key, store.DeleteOptions{}))
			res = putResult{}
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "put", "--json", src, url)), &res))
			assert.False(t, res.Unchanged, "a missing object makes the put commit")
			assert.Equal(t, 1, res.Repaired)
			out := t.TempDir() + "/out"
			tg.ok(t, "get", url, out)
			assert.Equal(t, readTree(t, src), readTree(t, out))
		})
	}
}
