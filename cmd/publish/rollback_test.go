package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/store"
)

// keysOf maps each file of a snapshot to the object key it reads.
func keysOf(files []generation.Entry) map[string]string {
	keys := map[string]string{}
	for _, e := range files {
		keys[e.Path] = e.Key
	}
	return keys
}

// TestRollbackByReference: a rollback publishes exactly the target's files
// by referencing its objects, copying nothing; a collection that keeps only
// the current generation afterwards leaves them readable (they are marked
// through the new manifest).
func TestRollbackByReference(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := store.Open(ctx, root, store.Config{})
	require.NoError(t, err)
	d := commit.New(s)
	v1 := map[string]string{"a.txt": "one", "dir/b.txt": "two"}
	ok(t, "put", writeTree(t, v1), root)
	ok(t, "put", writeTree(t, map[string]string{"a.txt": "uno", "c.txt": "tres"}), root)
	first, err := d.OpenAt(ctx, "1")
	require.NoError(t, err)
	objects := func() int {
		n := 0
		for _, err := range store.List(ctx, s, generation.Dir, "", "") {
			require.NoError(t, err)
			n++
		}
		return n
	}
	before := objects()

	var res putResult
	require.NoError(t, json.Unmarshal([]byte(ok(t, "rollback", "--json", root, "--to", "1")), &res))
	assert.EqualValues(t, 3, res.Seq)
	assert.Equal(t, 2, res.Files)
	assert.Equal(t, 2, res.Reused)
	cur, err := d.Open(ctx)
	require.NoError(t, err)
	assert.Equal(t, keysOf(first.Files()), keysOf(cur.Files()), "the rollback reads seq 1's objects")
	assert.Equal(t, before+1, objects(), "a rollback writes one manifest and no data")

	ok(t, "gc", "--keep", "0", "--grace", "0", "--orphan-age", "0", root)
	dest := filepath.Join(t.TempDir(), "out")
	ok(t, "get", root, dest)
	assert.Equal(t, v1, readTree(t, dest))
	assert.Contains(t, ok(t, "verify", "--all", root), ": ok")
	assert.Equal(t, 3, objects(), "the current manifest and seq 1's two objects remain")
}
