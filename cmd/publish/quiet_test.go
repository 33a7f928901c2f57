package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestQuietStatusCommands: with -q, the commands that report what they
// wrote (tag, pin, unpin, rollback, update, lease acquire and release)
// print nothing on success; without it they say what they did.
func TestQuietStatusCommands(t *testing.T) {
	u := "file://" + filepath.Join(t.TempDir(), "store")
	ok(t, "put", writeTree(t, map[string]string{"f": "1"}), u)
	ok(t, "put", writeTree(t, map[string]string{"f": "2"}), u)
	shared := "file://" + filepath.Join(t.TempDir(), "shared")

	for _, args := range [][]string{
		{"tag", u, "release"},
		{"tag", "--delete", u, "release"},
		{"pin", "--ttl", "1h", u},
		{"unpin", "--gen", genOf(t, u), u},
		{"rollback", u, "--to", "1"},
		{"update", shared, "counter", "--", "sh", "-c", "echo 1"},
		{"lease", "acquire", u, "maint"},
		{"lease", "release", u, "maint", "--token", "1"},
	} {
		code, out, errs := cli(t, "", append([]string{"-q"}, args...)...)
		require.Equal(t, exitOK, code, "publish -q %v: %s", args, errs)
		assert.Empty(t, out, "publish -q %v", args)
		assert.Empty(t, errs, "publish -q %v", args)
	}

	// The same commands speak without -q.
	assert.Contains(t, ok(t, "tag", u, "again"), "tagged seq 3")
	assert.Contains(t, ok(t, "lease", "acquire", u, "maint"), "acquired lease maint")
	assert.Contains(t, ok(t, "update", shared, "counter", "--", "sh", "-c", "echo 2"), "updated counter")
}

// genOf is the generation of the dataset's current commit.
func genOf(t *testing.T, u string) string {
	t.Helper()
	var s struct {
		Pointer struct {
			Generation string `json:"generation"`
		} `json:"pointer"`
	}
	require.NoError(t, json.Unmarshal([]byte(ok(t, "show", "--json", u)), &s))
	require.NotEmpty(t, s.Pointer.Generation)
	return s.Pointer.Generation
}
