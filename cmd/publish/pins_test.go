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

// TestTags: a tag names a generation durably: creating an existing tag is
// refused unless --force; the collector keeps the tagged generation after
// the links to it are gone; every reader reaches it by the tag (and by seq
// through the tag), a rollback to it commits, and a deleted tag is gone.
func TestTags(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			v1 := map[string]string{"a.txt": "one", "dir/b.txt": "bee"}
			tg.ok(t, "put", writeTree(t, v1), url)
			tg.ok(t, "put", writeTree(t, map[string]string{"a.txt": "two"}), url)
			var tag tagInfo
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "tag", "--json", "--seq", "1", url, "release")), &tag))
			assert.EqualValues(t, 1, tag.Seq)
			r := tg.run(t, "tag", url, "release")
			assert.Equal(t, exitError, r.code)
			assert.Contains(t, r.stderr, "tag exists")
			tg.ok(t, "put", writeTree(t, map[string]string{"a.txt": "three"}), url)
			tg.ok(t, "put", writeTree(t, map[string]string{"a.txt": "four"}), url)
			tg.ok(t, "gc", "--keep", "0", "--grace", "0s", url)

			dest := filepath.Join(t.TempDir(), "out")
			tg.ok(t, "get", "--tag", "release", url, dest)
			assert.Equal(t, v1, readTree(t, dest))
			dest = filepath.Join(t.TempDir(), "out")
			tg.ok(t, "get", "--seq", "1", url, dest)
			assert.Equal(t, v1, readTree(t, dest), "a seq beyond a collected link is found through its tag")
			assert.Contains(t, tg.ok(t, "ls", "--tag", "release", url), "dir/b.txt")
			assert.Equal(t, "bee", tg.ok(t, "cat", "--tag", "release", url, "dir/b.txt"))
			assert.Contains(t, tg.ok(t, "show", "--tag", "release", url), tag.Generation)
			assert.Contains(t, tg.ok(t, "diff", url, "tag:release"), "- dir/b.txt")

			assert.Contains(t, tg.ok(t, "rollback", url, "--tag", "release"), "committed seq 5")
			tg.ok(t, "tag", "--force", url, "release")
			var tags []tagInfo
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "tag", "--list", "--json", url)), &tags))
			require.Len(t, tags, 1)
			assert.EqualValues(t, 5, tags[0].Seq, "--force moved the tag")
			tg.ok(t, "tag", "--delete", url, "release")
			assert.Equal(t, "[]\n", tg.ok(t, "tag", "--list", "--json", url))
			r = tg.run(t, "get", "--tag", "release", url, filepath.Join(t.TempDir(), "out"))
			assert.Equal(t, exitError, r.code)
			assert.Contains(t, r.stderr, `no tag "release"`)
		})
	}
}
