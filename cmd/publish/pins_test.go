package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPinnedGenerationReadable: a generation pinned and then cut off from
// the pointer by a collection that removed the links between them stays
// readable by seq and by id (get, ls, show, cat, diff), and a rollback to
// it commits although the collector's floor has passed it. The collection
// after the rollback keeps its files through the new manifest.
func TestPinnedGenerationReadable(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			v2 := map[string]string{"a.txt": "two", "dir/b.txt": "bee"}
			tg.ok(t, "put", writeTree(t, map[string]string{"a.txt": "one"}), url)
			tg.ok(t, "put", writeTree(t, v2), url)
			var pin pinInfo
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "pin", "--json", "--seq", "2", "--ttl", "24h", url)), &pin))
			tg.ok(t, "put", writeTree(t, map[string]string{"a.txt": "three"}), url)
			tg.ok(t, "put", writeTree(t, map[string]string{"a.txt": "four"}), url)
			gc := tg.ok(t, "gc", "--keep", "0", "--grace", "0s", url)
			assert.Contains(t, gc, "pinned")

			for _, ref := range [][]string{{"--seq", "2"}, {"--gen", pin.Generation}} {
				dest := filepath.Join(t.TempDir(), "out")
				tg.ok(t, append(append([]string{"get"}, ref...), url, dest)...)
				assert.Equal(t, v2, readTree(t, dest), "get %v", ref)
				assert.Contains(t, tg.ok(t, append(append([]string{"ls"}, ref...), url)...), "dir/b.txt")
				assert.Contains(t, tg.ok(t, append(append([]string{"show"}, ref...), url)...), pin.Generation)
				assert.Equal(t, "bee", tg.ok(t, append(append([]string{"cat"}, ref...), url, "dir/b.txt")...))
			}
			assert.Contains(t, tg.ok(t, "diff", url, "2"), "dir/b.txt")

			assert.Contains(t, tg.ok(t, "rollback", url, "--to", "2"), "committed seq 5")
			tg.ok(t, "gc", "--keep", "0", "--grace", "0s", url)
			dest := filepath.Join(t.TempDir(), "out")
			tg.ok(t, "get", url, dest)
			assert.Equal(t, v2, readTree(t, dest))
			assert.Contains(t, tg.ok(t, "verify", url), ": ok")
		})
	}
}
