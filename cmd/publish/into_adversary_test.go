package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAdversaryPutIntoOverFile: a dataset holds a file "p1"; a put --into
// p1/ makes "p1" a directory too. Today it commits (exit 0) a generation
// holding both "p1" and "p1/x", which verify passes and get cannot
// materialize (create "p1": file exists, exit 1): the dataset is no longer
// downloadable, by a put that reported success. The same holds for any
// ancestor of the prefix (a file "a" under --into a/b/). Expected: the put
// is refused, naming the file in the way, and nothing is committed, so
// that get still works.
func TestAdversaryPutIntoOverFile(t *testing.T) {
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
