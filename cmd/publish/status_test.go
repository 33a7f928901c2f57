package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
)

// readOnly checks that what runs in between sends no write to the store
// behind c and leaves its keys as they were.
func readOnly(t *testing.T, s store.Store, c *store.Counter) func() {
	t.Helper()
	before, writes := listing(t, s), writeRequests(c)
	return func() {
		t.Helper()
		assert.Equal(t, writes, writeRequests(c), "status sends no write")
		assert.Equal(t, before, listing(t, s), "status changes no key")
	}
}

// seqGen is "seq N generation G" of the dataset's current commit.
func seqGen(t *testing.T, u string) string {
	t.Helper()
	var res showResult
	require.NoError(t, json.Unmarshal([]byte(ok(t, "--json", "show", u)), &res))
	return "seq " + strconv.FormatUint(res.Pointer.Seq, 10) + " generation " + res.Pointer.Generation
}

// TestStatusOfTheSameTreeExitsZeroAndPrintsNothing: a tree that is the
// current generation prints nothing on stdout, only the summary on
// stderr, exits 0, and writes nothing.
func TestStatusOfTheSameTreeExitsZeroAndPrintsNothing(t *testing.T) {
	for _, f := range dryRunDrivers(t) {
		t.Run(f.Name, func(t *testing.T) {
			s := f.New(t)
			c := store.Count(s)
			u := hookedURL(t, c)
			src := writeTree(t, map[string]string{"a": "aa", "d/b": "bbb"})
			ok(t, "put", src, u)

			done := readOnly(t, s, c)
			code, out, errs := cli(t, "", "status", src, u)
			assert.Equal(t, exitOK, code, errs)
			assert.Empty(t, out)
			assert.Equal(t, "0 added, 0 modified, 0 deleted, 2 unchanged against "+seqGen(t, u)+"\n", errs)

			code, out, _ = cli(t, "", "-v", "status", src, u)
			assert.Equal(t, exitOK, code)
			assert.Equal(t, "= a\n= d/b\n", out, "-v lists the files that are the same")
			done()
		})
	}
}

// TestStatusListsAddedModifiedAndDeletedFiles: a file only in SRC is A, one
// of the same size with other content M (its sha256 decides), one only in
// the dataset D, one with the same content and another mode m; the lines
// are sorted by path, the status is 8 with no error message, and nothing
// is written. --json gives the same lists.
func TestStatusListsAddedModifiedAndDeletedFiles(t *testing.T) {
	for _, f := range dryRunDrivers(t) {
		t.Run(f.Name, func(t *testing.T) {
			s := f.New(t)
			c := store.Count(s)
			u := hookedURL(t, c)
			src := writeTree(t, map[string]string{"a": "aaaa", "c": "cc", "d/b": "bb", "d/x.sh": "#!/bin/sh\n"})
			ok(t, "put", src, u)
			require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("zzzz"), 0o644))
			require.NoError(t, os.Remove(filepath.Join(src, "c")))
			require.NoError(t, os.WriteFile(filepath.Join(src, "d/e"), []byte("e"), 0o644))
			require.NoError(t, os.Chmod(filepath.Join(src, "d/x.sh"), 0o755))

			done := readOnly(t, s, c)
			code, out, errs := cli(t, "", "status", src, u)
			assert.Equal(t, exitDiffers, code)
			assert.Equal(t, "M a\nD c\nA d/e\nm d/x.sh\n", out)
			assert.Equal(t, "1 added, 1 modified, 1 mode changed, 1 deleted, 1 unchanged against "+seqGen(t, u)+"\n", errs,
				"the summary is the only thing on stderr: a difference is not an error")

			code, out, errs = cli(t, "", "-v", "status", src, u)
			assert.Equal(t, exitDiffers, code)
			assert.Equal(t, "M a\nD c\n= d/b\nA d/e\nm d/x.sh\n", out)
			assert.NotContains(t, errs, "publish:")

			code, out, errs = cli(t, "", "-q", "status", src, u)
			assert.Equal(t, exitDiffers, code)
			assert.Equal(t, "M a\nD c\nA d/e\nm d/x.sh\n", out, "-q keeps the lines")
			assert.Empty(t, errs)

			code, out, errs = cli(t, "", "--json", "status", src, u)
			assert.Equal(t, exitDiffers, code)
			assert.Empty(t, errs)
			var res statusResult
			require.NoError(t, json.Unmarshal([]byte(out), &res))
			assert.Equal(t, statusResult{Seq: 1, Generation: res.Generation, Added: []string{"d/e"}, Modified: []string{"a"},
				ModeChanged: []string{"d/x.sh"}, Deleted: []string{"c"}, Unchanged: 1}, res)
			assert.Equal(t, "seq 1 generation "+res.Generation, seqGen(t, u))
			done()

			// What status listed is what put changes.
			ok(t, "put", src, u)
			code, out, _ = cli(t, "", "status", src, u)
			assert.Equal(t, exitOK, code)
			assert.Empty(t, out)
		})
	}
}

// TestStatusIntoComparesThePrefixOnly: with --into PREFIX/ the paths carry
// the prefix, and the dataset's files outside it are not listed as
// deleted.
func TestStatusIntoComparesThePrefixOnly(t *testing.T) {
	for _, f := range dryRunDrivers(t) {
		t.Run(f.Name, func(t *testing.T) {
			s := f.New(t)
			c := store.Count(s)
			u := hookedURL(t, c)
			ok(t, "put", "--into", "us/", writeTree(t, map[string]string{"sales.csv": "1,2"}), u)
			src := writeTree(t, map[string]string{"sales.csv": "3,4", "old.csv": "x", "same.csv": "s"})
			ok(t, "put", "--into", "eu/", src, u)
			require.NoError(t, os.WriteFile(filepath.Join(src, "sales.csv"), []byte("5,6"), 0o644))
			require.NoError(t, os.Remove(filepath.Join(src, "old.csv")))
			require.NoError(t, os.WriteFile(filepath.Join(src, "new.csv"), []byte("n"), 0o644))

			done := readOnly(t, s, c)
			code, out, errs := cli(t, "", "status", "--into", "eu/", src, u)
			assert.Equal(t, exitDiffers, code)
			assert.Equal(t, "A eu/new.csv\nD eu/old.csv\nM eu/sales.csv\n", out)
			assert.Equal(t, "1 added, 1 modified, 1 deleted, 1 unchanged against "+seqGen(t, u)+" under eu/\n", errs)

			code, out, _ = cli(t, "", "status", "--into", "asia/", src, u)
			assert.Equal(t, exitDiffers, code)
			assert.Equal(t, "A asia/new.csv\nA asia/sales.csv\nA asia/same.csv\n", out, "nothing outside the prefix is deleted")

			// Without --into, SRC stands for the whole dataset.
			code, out, _ = cli(t, "", "status", src, u)
			assert.Equal(t, exitDiffers, code)
			assert.Equal(t, "D eu/old.csv\nD eu/sales.csv\nD eu/same.csv\nA new.csv\nA sales.csv\nA same.csv\nD us/sales.csv\n", out)
			done()
		})
	}
}

// TestStatusSelectsFilesAsPutDoes: the filters select SRC's files as for
// put, so a file they leave out is not added, and a file of the dataset
// they leave out is deleted, since a put would drop it.
func TestStatusSelectsFilesAsPutDoes(t *testing.T) {
	for _, f := range dryRunDrivers(t) {
		t.Run(f.Name, func(t *testing.T) {
			s := f.New(t)
			c := store.Count(s)
			u := hookedURL(t, c)
			src := writeTree(t, map[string]string{"a.csv": "a", "cache/tmp": "t", "b.csv": "b"})
			ok(t, "put", src, u)
			require.NoError(t, os.WriteFile(filepath.Join(src, "run.log"), []byte("log"), 0o644))

			done := readOnly(t, s, c)
			code, out, _ := cli(t, "", "status", "--exclude", "*.log", src, u)
			assert.Equal(t, exitOK, code, "the excluded file is not added")
			assert.Empty(t, out)

			code, out, errs := cli(t, "", "status", "--exclude", "*.log", "--exclude", "/cache/**", src, u)
			assert.Equal(t, exitDiffers, code)
			assert.Equal(t, "D cache/tmp\n", out)
			assert.Equal(t, "0 added, 0 modified, 1 deleted, 2 unchanged against "+seqGen(t, u)+"\n", errs)

			code, out, _ = cli(t, "", "status", "--include", "*.csv", "--into", "in/", src, u)
			assert.Equal(t, exitDiffers, code)
			assert.Equal(t, "A in/a.csv\nA in/b.csv\n", out)
			done()

			ok(t, "put", "--exclude", "*.log", "--exclude", "/cache/**", src, u)
			code, out, _ = cli(t, "", "status", "--exclude", "*.log", "--exclude", "/cache/**", src, u)
			assert.Equal(t, exitOK, code)
			assert.Empty(t, out)
		})
	}
}

// TestStatusAgainstADatasetWithoutCommits: every file of SRC is added
// (status 8); an empty SRC holds the same files as no commit (status 0).
// Nothing is written, not even the probe a first put runs.
func TestStatusAgainstADatasetWithoutCommits(t *testing.T) {
	for _, f := range dryRunDrivers(t) {
		t.Run(f.Name, func(t *testing.T) {
			s := f.New(t)
			c := store.Count(s)
			u := hookedURL(t, c)
			src := writeTree(t, map[string]string{"b": "b", "a/x": "x"})

			code, out, errs := cli(t, "", "status", src, u)
			assert.Equal(t, exitDiffers, code)
			assert.Equal(t, "A a/x\nA b\n", out)
			assert.Equal(t, "2 added, 0 modified, 0 deleted, 0 unchanged against a dataset without commits\n", errs)

			code, out, errs = cli(t, "", "--json", "status", src, u)
			assert.Equal(t, exitDiffers, code, errs)
			assert.JSONEq(t, `{"seq": 0, "generation": "", "added": ["a/x", "b"], "modified": [], "mode_changed": [], "deleted": [], "unchanged": 0}`, out)

			code, out, errs = cli(t, "", "status", t.TempDir(), u)
			assert.Equal(t, exitOK, code, errs)
			assert.Empty(t, out)
			assert.Zero(t, writeRequests(c))
			assert.Empty(t, listing(t, s))
		})
	}
}

// TestStatusOfAMissingSRCNamesIt: a SRC that does not exist is an error
// (status 1) that names it, found before the store is read; so is a
// symbolic link in SRC, unless --links says what to do with it.
func TestStatusOfAMissingSRCNamesIt(t *testing.T) {
	for _, f := range dryRunDrivers(t) {
		t.Run(f.Name, func(t *testing.T) {
			s := f.New(t)
			c := store.Count(s)
			u := hookedURL(t, c)
			ok(t, "put", writeTree(t, map[string]string{"a": "a"}), u)
			before := c.Counts()
			missing := filepath.Join(t.TempDir(), "out")

			code, out, errs := cli(t, "", "status", missing, u)
			assert.Equal(t, exitError, code)
			assert.Empty(t, out)
			assert.Equal(t, "publish: SRC "+missing+": no such file or directory\n", errs)
			assert.Equal(t, before, c.Counts(), "SRC is read before the store")

			code, _, errs = cli(t, "", "status", "--into", "eu", missing, u)
			assert.Equal(t, exitUsage, code, errs)

			// Symbolic links follow put's rules: refused unless --links says.
			src := writeTree(t, map[string]string{"a": "a"})
			require.NoError(t, os.Symlink("a", filepath.Join(src, "l")))
			code, out, errs = cli(t, "", "status", src, u)
			assert.Equal(t, exitError, code)
			assert.Empty(t, out)
			assert.Equal(t, "publish: SRC "+filepath.Join(src, "l")+" is a symbolic link (to a); pass --links skip to leave links out, or --links follow to publish what they point to\n", errs)
			assert.Equal(t, before, c.Counts(), "a refused SRC reads nothing of the store")
			code, out, errs = cli(t, "", "status", "--links", "skip", src, u)
			assert.Equal(t, exitOK, code, errs)
			assert.Empty(t, out)
			code, out, _ = cli(t, "", "status", "--links", "follow", src, u)
			assert.Equal(t, exitDiffers, code)
			assert.Equal(t, "A l\n", out)
		})
	}
}
