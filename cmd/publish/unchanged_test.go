package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRollbackToCurrentIsUnchanged: a second rollback to the same version
// says "unchanged" and commits nothing, as put of an unchanged tree.
func TestRollbackToCurrentIsUnchanged(t *testing.T) {
	u := "file://" + filepath.Join(t.TempDir(), "store")
	ok(t, "put", writeTree(t, map[string]string{"f": "1"}), u)
	ok(t, "put", writeTree(t, map[string]string{"f": "2"}), u)
	assert.Contains(t, ok(t, "rollback", u, "--to", "1"), "committed seq 3")
	out := ok(t, "rollback", u, "--to", "1")
	assert.Regexp(t, `^unchanged: seq 3 generation \S+ already holds the files of seq 1 \(1 file, 1 B\); nothing committed\n$`, out)
	var res putResult
	require.NoError(t, json.Unmarshal([]byte(ok(t, "--json", "rollback", u, "--to", "1")), &res))
	assert.True(t, res.Unchanged)
	assert.EqualValues(t, 3, res.Seq)
	var log logResult
	require.NoError(t, json.Unmarshal([]byte(ok(t, "log", "--json", u)), &log))
	assert.Len(t, log.Commits, 3, "nothing was committed")
	assert.Contains(t, ok(t, "rollback", u, "--to", "2"), "committed seq 4", "a rollback to other files commits")
}

// TestUpdateRefusesEmptyOutput: an update whose command writes nothing
// fails with status 1, names the key and leaves the object as it was;
// --allow-empty writes the empty object.
func TestUpdateRefusesEmptyOutput(t *testing.T) {
	u := "file://" + filepath.Join(t.TempDir(), "shared")
	ok(t, "update", u, "state", "--", "sh", "-c", "echo 1")
	code, out, errs := cli(t, "", "update", u, "state", "--", "true")
	assert.Equal(t, exitError, code, out)
	assert.Contains(t, errs, `update "state" in `+u+`: true wrote nothing, which would leave the object empty; pass --allow-empty`)
	assert.Contains(t, errs, "nothing was written")
	assert.Equal(t, "1\n", ok(t, "cat", "--object", u, "state"))

	code, _, errs = cli(t, "", "update", u, "fresh", "--", "true")
	assert.Equal(t, exitError, code, errs)
	code, _, _ = cli(t, "", "cat", "--object", u, "fresh")
	assert.Equal(t, exitError, code, "an object that did not exist is not created")

	assert.Contains(t, ok(t, "update", "--allow-empty", u, "state", "--", "true"), "updated state (0 bytes")
	assert.Empty(t, ok(t, "cat", "--object", u, "state"))
}

// TestPutLeavesOutStoreInsideSRC: 'put . ./store' leaves the store's own
// directory out of SRC, and says so at -v: the second run is unchanged,
// and the dataset holds SRC's files only.
func TestPutLeavesOutStoreInsideSRC(t *testing.T) {
	src := writeTree(t, map[string]string{"a": "1", "sub/b": "2"})
	t.Chdir(src)
	out := ok(t, "put", ".", "./store")
	assert.Contains(t, out, ": 2 files (0 reused)")
	code, out, errs := cli(t, "", "-v", "put", ".", "./store")
	require.Equal(t, exitOK, code, errs)
	assert.Regexp(t, `^unchanged: seq 1 `, out)
	assert.Contains(t, errs, "excluded store/ (the store's own directory)\n")
	assert.Equal(t, "1  a\n1  sub/b\n", ok(t, "ls", "./store"))

	// Named as a file:// URL, the same directory is left out too.
	code, out, errs = cli(t, "", "put", src, "file://"+filepath.Join(src, "store"))
	require.Equal(t, exitOK, code, errs)
	assert.Regexp(t, `^unchanged: seq 1 `, out)
}
