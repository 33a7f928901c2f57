package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// complete runs the shell completion of args (the last one is the word
// being completed) and returns the candidates, without descriptions.
func (tg target) complete(t *testing.T, args ...string) []string {
	t.Helper()
	out := tg.ok(t, append([]string{"__completeNoDesc"}, args...)...)
	var words []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, ":") || strings.HasPrefix(line, "Completion ended") {
			continue
		}
		words = append(words, line)
	}
	return words
}

// TestCompletion: the shell completion offers fixed flag values, and seqs,
// generation ids, tags and lease names read from the store.
func TestCompletion(t *testing.T) {
	for _, tg := range targets(t)[:2] {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			src := writeTree(t, map[string]string{"a": "1"})
			tg.ok(t, "put", "-m", "first", src, url)
			src2 := writeTree(t, map[string]string{"a": "2"})
			tg.ok(t, "put", "-m", "second", src2, url)
			tg.ok(t, "tag", url, "release-1")
			tg.ok(t, "run", "--lease", "nightly", url, "--", "true")

			assert.Equal(t, []string{"none", "zstd"}, tg.complete(t, "put", "--compress", ""))
			assert.Equal(t, []string{"follow", "follow-any"}, tg.complete(t, "put", "--links", "f"))
			assert.Equal(t, []string{"2", "1"}, tg.complete(t, "get", url, "--seq", ""))
			assert.Equal(t, []string{"release-1"}, tg.complete(t, "get", url, "--tag", "rel"))
			assert.Empty(t, tg.complete(t, "get", url, "--tag", "nope"))
			assert.Equal(t, []string{"2", "1", "tag:release-1"}, tg.complete(t, "diff", url, ""))
			assert.Equal(t, []string{"tag:release-1"}, tg.complete(t, "rollback", url, "--to", "tag:"))
			assert.Equal(t, []string{"current", "@2", "@1", "tag:release-1"}, tg.complete(t, "mount", url, "--ref", ""))
			assert.Equal(t, []string{"nightly"}, tg.complete(t, "lease", "status", url, ""))
			gens := tg.complete(t, "show", url, "--gen", "")
			require.Len(t, gens, 2)
			assert.Contains(t, tg.ok(t, "show", url), gens[0], "the newest generation comes first")
			assert.Equal(t, []string{"release-1"}, tg.complete(t, "tag", url, ""))
		})
	}
}
