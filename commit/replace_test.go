package commit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// stageDir begins a Tx that stages dir's files, under prefix when it is
// not empty (replacing only the base's files there).
func stageDir(t *testing.T, d *commit.Dataset, dir, prefix string) *commit.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	if prefix != "" {
		_, _, err := tx.ReplacePrefix(ctx, prefix)
		require.NoError(t, err)
	}
	err = filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		return tx.PutFile(ctx, prefix+filepath.ToSlash(rel), path)
	})
	require.NoError(t, err)
	return tx
}

func unchanged(t *testing.T, tx *commit.Tx) bool {
	t.Helper()
	same, err := tx.Unchanged(context.Background())
	require.NoError(t, err)
	require.NoError(t, tx.Discard(context.Background()))
	return same
}

func TestUnchangedWhenEveryFileIsTheBaseFile(t *testing.T) {
	d := commit.New(mem.New())
	dir := writeFiles(t, 5, "1")
	putDir(t, d, dir)
	assert.True(t, unchanged(t, stageDir(t, d, dir, "")))
}

func TestUnchangedIsFalseForAFirstCommit(t *testing.T) {
	d := commit.New(mem.New())
	assert.False(t, unchanged(t, stageDir(t, d, writeFiles(t, 5, "1"), "")))
	assert.False(t, unchanged(t, stageDir(t, d, t.TempDir(), "")), "an empty first commit")
}

func TestChangedWhenContentModeOrFileSetDiffers(t *testing.T) {
	for name, change := range map[string]func(t *testing.T, dir string){
		"content": func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "d", "0002"), []byte("other"), 0o644))
		},
		"mode": func(t *testing.T, dir string) {
			require.NoError(t, os.Chmod(filepath.Join(dir, "d", "0002"), 0o755))
		},
		"a file more": func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "d", "new"), []byte("new"), 0o644))
		},
		"a file fewer": func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "d", "0002")))
		},
		"a file renamed": func(t *testing.T, dir string) {
			require.NoError(t, os.Rename(filepath.Join(dir, "d", "0002"), filepath.Join(dir, "d", "moved")))
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := commit.New(mem.New())
			dir := writeFiles(t, 5, "1")
			putDir(t, d, dir)
			change(t, dir)
			assert.False(t, unchanged(t, stageDir(t, d, dir, "")))
		})
	}
}

// An identical file that was uploaded, not matched against the base, is
// a change: the commit would reference another object.
func TestChangedWhenAFileWasUploadedAgain(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	_, err := d.Update(ctx, commit.CommitOptions{}, func(ctx context.Context, tx *commit.Tx) error { return tx.PutBytes(ctx, "a", []byte("a")) })
	require.NoError(t, err)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutBytes(ctx, "a", []byte("a")))
	assert.False(t, unchanged(t, tx))
}

// A base object that is gone is uploaded again by the check, and the
// commit that repairs the dataset is a change.
func TestChangedWhenABaseObjectIsMissing(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	dir := writeFiles(t, 5, "1")
	putDir(t, d, dir)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	e, _ := snap.Manifest.Find("d/0001")
	require.NoError(t, s.Delete(ctx, e.Key, store.DeleteOptions{}))

	tx := stageDir(t, d, dir, "")
	assert.False(t, unchanged(t, tx))
	assert.Equal(t, 1, tx.Repaired())
}

func TestUnchangedUnderAPrefixJudgesOnlyThePrefix(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	part := writeFiles(t, 3, "1")
	_, err := d.Update(ctx, commit.CommitOptions{}, func(ctx context.Context, tx *commit.Tx) error {
		return tx.PutBytes(ctx, "other/x", []byte("x"))
	})
	require.NoError(t, err)
	tx := stageDir(t, d, part, "p/")
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)

	assert.True(t, unchanged(t, stageDir(t, d, part, "p/")), "the prefix's files as they are")
	assert.False(t, unchanged(t, stageDir(t, d, part, "q/")), "files under another prefix")

	require.NoError(t, os.Remove(filepath.Join(part, "d", "0000")))
	assert.False(t, unchanged(t, stageDir(t, d, part, "p/")), "a file fewer under the prefix")
}

func TestReplacedIsTheBaseOrThePrefixPart(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	r, err := tx.Replaced(ctx)
	require.NoError(t, err)
	assert.Empty(t, r, "a first commit replaces nothing")
	require.NoError(t, tx.PutBytes(ctx, "p/a", []byte("a")))
	require.NoError(t, tx.PutBytes(ctx, "p/b", []byte("b")))
	require.NoError(t, tx.PutBytes(ctx, "q/c", []byte("c")))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)

	tx, err = d.Begin(ctx)
	require.NoError(t, err)
	r, err = tx.Replaced(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"p/a", "p/b", "q/c"}, keys(r))
	require.NoError(t, tx.Discard(ctx))

	tx, err = d.Begin(ctx)
	require.NoError(t, err)
	removed, kept, err := tx.ReplacePrefix(ctx, "p/")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"p/a", "p/b"}, keys(removed))
	assert.Equal(t, 1, kept)
	assert.Equal(t, []string{"q/c"}, tx.Files(), "the files outside the prefix are kept")
	r, err = tx.Replaced(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"p/a", "p/b"}, keys(r))
	require.NoError(t, tx.Discard(ctx))

	tx, err = d.Begin(ctx)
	require.NoError(t, err)
	_, _, err = tx.ReplacePrefix(ctx, "p")
	assert.Error(t, err, "a prefix must end in /")
	assert.Empty(t, tx.Files(), "a refused prefix keeps nothing")
	require.NoError(t, tx.Discard(ctx))
}

func keys(m map[string]generation.Entry) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestDeleteLimitProperty checks Check against its definition on random
// sets: it refuses exactly when more replaced files are missing from the
// paths than N, or than N percent of the replaced files rounded down.
func TestDeleteLimitProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		replaced := map[string]generation.Entry{}
		for i := range rng.IntN(12) {
			p := fmt.Sprintf("f%d", i)
			replaced[p] = generation.Entry{Path: p}
		}
		var paths []string
		dropped := len(replaced)
		for i := range rng.IntN(16) {
			p := fmt.Sprintf("f%d", i)
			paths = append(paths, p)
			if _, ok := replaced[p]; ok {
				dropped--
			}
		}
		l := commit.DeleteLimit{N: rng.IntN(14), Percent: rng.IntN(2) == 0}
		if l.Percent {
			l.N = rng.IntN(101)
		}
		allowed := l.N
		if l.Percent {
			allowed = len(replaced) * l.N / 100
		}
		err := l.Check(replaced, paths)
		if dropped > allowed {
			var e *commit.DeleteLimitError
			require.True(t, errors.As(err, &e), "%v %v %v", l, replaced, paths)
			require.ErrorIs(t, err, commit.ErrTooManyDeletes)
			require.Equal(t, commit.DeleteLimitError{Dropped: dropped, Replaced: len(replaced), Limit: l}, *e)
		} else {
			require.NoError(t, err, "%v %v %v", l, replaced, paths)
		}
	}
}

func TestParseDeleteLimit(t *testing.T) {
	for in, want := range map[string]commit.DeleteLimit{
		"0": {N: 0}, "7": {N: 7}, "0%": {N: 0, Percent: true}, "100%": {N: 100, Percent: true}, "25%": {N: 25, Percent: true},
	} {
		got, err := commit.ParseDeleteLimit(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
		assert.Equal(t, in, got.String())
	}
	for _, in := range []string{"", "-1", "101%", "x", "5%%", "%", "1.5"} {
		_, err := commit.ParseDeleteLimit(in)
		assert.Error(t, err, in)
	}
}

// A path matched against the base, then staged again with other content:
// the commit would publish the new content, so it is not unchanged.
func TestChangedWhenAReusedPathIsStagedAgain(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	dir := writeFiles(t, 2, "1")
	putDir(t, d, dir)
	tx := stageDir(t, d, dir, "") // every file reused
	require.NoError(t, tx.PutBytes(ctx, "d/0001", []byte("file 1 version 2")))
	e, _ := func() (generation.Entry, bool) {
		for _, e := range tx.Entries() {
			if e.Path == "d/0001" {
				return e, true
			}
		}
		return generation.Entry{}, false
	}()
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	old, _ := snap.Manifest.Find("d/0001")
	require.NotEqual(t, old.SHA256, e.SHA256, "the Tx stages other content at d/0001")
	assert.False(t, unchanged(t, tx), "content differs at d/0001")
}

// Same through PutFile: reused, then the local file is replaced and staged again.
func TestChangedWhenAReusedPathIsPutFileAgain(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	dir := writeFiles(t, 2, "1")
	putDir(t, d, dir)
	tx := stageDir(t, d, dir, "")
	other := filepath.Join(t.TempDir(), "x")
	require.NoError(t, os.WriteFile(other, []byte("other content"), 0o644))
	require.NoError(t, tx.PutFile(ctx, "d/0001", other))
	assert.False(t, unchanged(t, tx), "content differs at d/0001")
}

// DeleteLimit with a path named twice: b is dropped, the limit is 0.
func TestDeleteLimitCountsAPathOnce(t *testing.T) {
	replaced := map[string]generation.Entry{"a": {Path: "a"}, "b": {Path: "b"}}
	assert.Error(t, commit.DeleteLimit{N: 0}.Check(replaced, []string{"a", "a"}))
}

// The check that the referenced objects are still there fails (the store
// refuses): Unchanged cannot say the put is unchanged.
func TestUnchangedFailsWhenTheReferencesCannotBeVerified(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	dir := writeFiles(t, 3, "1")
	putDir(t, d, dir)
	fs := faults.NewStore(s)
	tx := stageDir(t, commit.New(fs), dir, "")
	fs.Add(faults.Rule{Op: store.OpHead, Key: "_gen/", Kind: faults.Refused, Times: 1000})
	fs.Add(faults.Rule{Op: store.OpList, Key: "_gen/", Kind: faults.Refused, Times: 1000})
	same, err := tx.Unchanged(ctx)
	require.NoError(t, tx.Discard(ctx))
	assert.False(t, same && err == nil, "unchanged without proof that the objects are there")
}
