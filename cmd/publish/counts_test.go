package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCountsReadRight: a count of one is singular in every line that
// prints one ("1 file", "1 attempt", "1 pin"), and gc calls a generation
// that a tag keeps "tagged", one a pin keeps "pinned".
func TestCountsReadRight(t *testing.T) {
	u := "file://" + filepath.Join(t.TempDir(), "store")
	src := writeTree(t, map[string]string{"f": "1"})
	out := ok(t, "put", src, u)
	assert.Contains(t, out, ": 1 file (0 reused), ")
	assert.Regexp(t, `^put: 1 file: 1 uploaded`, lastLine(out))
	assert.Contains(t, ok(t, "put", src, u), "already holds exactly these files (1 file, 1 B);")
	ok(t, "put", writeTree(t, map[string]string{"f": "2"}), u)
	assert.Contains(t, ok(t, "rollback", u, "--to", "1"), "(1 file, ")
	assert.Contains(t, ok(t, "get", u, filepath.Join(t.TempDir(), "out")), ": 1 file, ")
	assert.Contains(t, ok(t, "verify", u), "verified 1 object (1 B) of 1 generation: ok")
	assert.Contains(t, ok(t, "update", u, "shared/n", "--", "sh", "-c", "echo 1"), "(2 bytes, etag ")
	assert.Contains(t, ok(t, "update", u, "shared/m", "--", "printf", "x"), "(1 byte, etag ")
	assert.Regexp(t, `, 1 attempt\)\n$`, ok(t, "update", u, "shared/n", "--", "sh", "-c", "echo 2"))

	ok(t, "put", writeTree(t, map[string]string{"f": "4"}), u) // seq 4; seq 1 and 2 are beyond --keep 0
	ok(t, "tag", "--seq", "1", u, "release")
	ok(t, "pin", "--seq", "2", "--ttl", "1h", u)
	ok(t, "pin", "--seq", "2", "--ttl", "1h", u)
	gc := ok(t, "gc", "--dry-run", "--keep", "0", "--grace", "0", u)
	assert.Regexp(t, regexp.MustCompile(`(?m)^\s+1\s+\S+\s+\d+\s+.+\s+tagged$`), gc)
	assert.Regexp(t, regexp.MustCompile(`(?m)^\s+2\s+\S+\s+\d+\s+.+\s+pinned \(2 pins\)$`), gc)
	ok(t, "pin", "--seq", "1", "--ttl", "1h", u)
	gc = ok(t, "gc", "--dry-run", "--keep", "0", "--grace", "0", u)
	assert.Regexp(t, regexp.MustCompile(`(?m)^\s+1\s+\S+\s+\d+\s+.+\s+tagged and pinned$`), gc)

	var pin pinInfo
	require.NoError(t, json.Unmarshal([]byte(ok(t, "pin", "--json", "--ttl", "1h", u)), &pin))
	assert.Equal(t, "removed 1 pin\n", ok(t, "unpin", u, pin.Key))
}
