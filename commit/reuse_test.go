package commit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// writeFiles writes n files d/0000, d/0001, … below a fresh directory,
// each with content naming it and version v.
func writeFiles(t *testing.T, n int, v string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "d"), 0o755))
	for i := range n {
		name := filepath.Join(dir, "d", fmt.Sprintf("%04d", i))
		require.NoError(t, os.WriteFile(name, []byte(fmt.Sprintf("file %d version %s", i, v)), 0o644))
	}
	return dir
}

// putDir publishes dir as the next generation and returns the Tx too.
func putDir(t *testing.T, d *commit.Dataset, dir string) (*commit.Tx, *pointer.Pointer) {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.AddDir(ctx, dir))
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	return tx, p
}

// TestReuseProvesObjects: an incremental publish whose base lost one
// object and had another replaced by one of the wrong size uploads both
// files again instead of referencing them, and the new generation reads
// completely (I1); the other files are still reused.
func TestReuseProvesObjects(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		dir := writeFiles(t, 10, "1")
		_, p1 := putDir(t, d, dir)
		snap, err := d.Open(ctx)
		require.NoError(t, err)
		gone, _ := snap.Manifest.Find("d/0003")
		short, _ := snap.Manifest.Find("d/0005")
		require.NoError(t, s.Delete(ctx, gone.Key, store.DeleteOptions{}))
		_, err = s.Put(ctx, short.Key, strings.NewReader("x"), store.PutOptions{})
		require.NoError(t, err)

		tx, p2 := putDir(t, d, dir)
		assert.Equal(t, 8, tx.Reused())
		assert.Equal(t, 2, tx.Repaired())
		cur := checkComplete(t, d)
		assert.Equal(t, p2.Generation, cur.Generation())
		for _, e := range cur.Files() {
			want := p1.Generation
			if e.Path == "d/0003" || e.Path == "d/0005" {
				want = p2.Generation
			}
			assert.Equal(t, want, generation.FromKey(e.Key), e.Path)
		}
		got, err := cur.ReadFile(ctx, "d/0005")
		require.NoError(t, err)
		assert.Equal(t, "file 5 version 1", string(got))
	})
}

// TestReferenceWithoutSource: a rollback (KeepFrom) or an update (KeepAll)
// that references a missing object has no local file to upload again: the
// commit fails with ErrMissingObject naming the path and the key, and the
// dataset is unchanged.
func TestReferenceWithoutSource(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		_, err := publish(t, d, map[string]string{"x": "1", "y": "1"}, commit.CommitOptions{})
		require.NoError(t, err)
		_, err = publish(t, d, map[string]string{"x": "2", "y": "2"}, commit.CommitOptions{})
		require.NoError(t, err)
		old, err := d.OpenAt(ctx, "1")
		require.NoError(t, err)
		gone, _ := old.Manifest.Find("y")
		require.NoError(t, s.Delete(ctx, gone.Key, store.DeleteOptions{}))
		before := keysUnder(t, s, "")

		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		tx.KeepFrom(old)
		_, err = tx.Commit(ctx, commit.CommitOptions{Message: "rollback to 1"})
		require.ErrorIs(t, err, commit.ErrMissingObject)
		assert.Contains(t, err.Error(), "y: object "+gone.Key+" missing")
		assert.Equal(t, before, keysUnder(t, s, ""), "the refused rollback wrote nothing")

		cur, err := d.Open(ctx)
		require.NoError(t, err)
		kept, _ := cur.Manifest.Find("x")
		require.NoError(t, s.Delete(ctx, kept.Key, store.DeleteOptions{}))
		before = keysUnder(t, s, "")
		_, err = d.Update(ctx, commit.CommitOptions{}, func(ctx context.Context, tx *commit.Tx) error {
			return tx.PutBytes(ctx, "z", []byte("new"))
		})
		require.ErrorIs(t, err, commit.ErrMissingObject)
		assert.Contains(t, err.Error(), "x: object "+kept.Key+" missing")
		assert.Equal(t, before, keysUnder(t, s, ""), "the refused update left nothing behind")
		p, _, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		assert.EqualValues(t, 2, p.Seq)
	})
}

// TestWithoutReuse: WithReuse(false) uploads every file, unchanged or not.
func TestWithoutReuse(t *testing.T) {
	for _, f := range []bool{true, false} {
		t.Run(fmt.Sprint("reuse=", f), func(t *testing.T) {
			s := store.Count(mem.New())
			dir := writeFiles(t, 5, "1")
			putDir(t, commit.New(s), dir)
			before := s.Counts()
			tx, p := putDir(t, commit.New(s, commit.WithReuse(f)), dir)
			puts := s.Counts().Sub(before)[store.OpPut]
			if f {
				assert.Equal(t, 5, tx.Reused())
				assert.EqualValues(t, 2, puts, "manifest and pointer only")
				return
			}
			assert.Equal(t, 0, tx.Reused())
			assert.EqualValues(t, 7, puts, "every file, the manifest and the pointer")
			snap, err := commit.New(s).Open(context.Background())
			require.NoError(t, err)
			for _, e := range snap.Files() {
				assert.Equal(t, p.Generation, generation.FromKey(e.Key), e.Path)
			}
		})
	}
}

// TestReuseProofPaths: references in a generation that holds many other
// objects are proven with one LIST page and then HEADs; references in runs
// of 1,000 with one LIST page each. A missing object is caught on both
// paths and its file uploaded again.
func TestReuseProofPaths(t *testing.T) {
	for _, f := range testenv.LocalStores() {
		t.Run(f.Name, func(t *testing.T) {
			const n = 3000
			ctx := context.Background()
			c := store.Count(f.New(t))
			d := commit.New(c, commit.WithConcurrency(32))
			dir := writeFiles(t, n, "1")
			_, p1 := putDir(t, d, dir)
			// Change every file but three: they stay in seq 1, which holds
			// 3,000 objects; the other 2,997 are seq 2's only objects.
			kept := []int{0, 1500, 2999}
			for i := range n {
				if !slices.Contains(kept, i) {
					require.NoError(t, os.WriteFile(filepath.Join(dir, "d", fmt.Sprintf("%04d", i)), []byte(fmt.Sprint("changed ", i)), 0o644))
				}
			}
			_, p2 := putDir(t, d, dir)
			require.NoError(t, c.Delete(ctx, generation.DataKey(p1.Generation, "d/1500"), store.DeleteOptions{}))
			require.NoError(t, c.Delete(ctx, generation.DataKey(p2.Generation, "d/1001"), store.DeleteOptions{}))

			before := c.Counts()
			tx, _ := putDir(t, d, dir)
			// seq 1: one page proves d/0000 only, so d/1500 and d/2999 get
			// HEADs; seq 2: three runs of up to 1,000 keys, a page each.
			// Two files uploaded again. The base's manifest is the one d
			// committed: it is not read again.
			assert.Equal(t, "get=1 head=2 put=4 list=4", c.Counts().Sub(before).String())
			assert.Equal(t, 2, tx.Repaired())
			assert.Equal(t, n-2, tx.Reused())
			checkComplete(t, d)
		})
	}
}

// TestMissingAfterBaseMoved: a writer kept its base's files (KeepAll);
// meanwhile another writer replaced one and the collector removed the
// superseded object. The writer's commit is a lost race, which Update
// retries on the new base, not a damaged dataset.
func TestMissingAfterBaseMoved(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		_, err := publish(t, d, map[string]string{"x": "1", "y": "1"}, commit.CommitOptions{})
		require.NoError(t, err)
		base, err := d.Open(ctx)
		require.NoError(t, err)
		old, _ := base.Manifest.Find("x")

		interleave := func() {
			_, err := d.Update(ctx, commit.CommitOptions{}, func(ctx context.Context, tx *commit.Tx) error {
				return tx.PutBytes(ctx, "x", []byte("2"))
			})
			require.NoError(t, err)
			require.NoError(t, s.Delete(ctx, old.Key, store.DeleteOptions{}), "what the collector does to a superseded object")
		}
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.KeepAll(ctx))
		require.NoError(t, tx.PutBytes(ctx, "z", []byte("1")))
		interleave()
		_, err = tx.Commit(ctx, commit.CommitOptions{})
		var ce *commit.ConflictError
		require.ErrorAs(t, err, &ce)
		assert.EqualValues(t, 2, ce.Seq)

		first := true
		_, err = d.Update(ctx, commit.CommitOptions{}, func(ctx context.Context, tx *commit.Tx) error {
			if first {
				first = false
				old = baseEntry(t, tx, "x")
				interleave()
			}
			return tx.PutBytes(ctx, "w", []byte("1"))
		})
		require.NoError(t, err, "Update retried on the new base")
		snap := checkComplete(t, d)
		assert.EqualValues(t, 4, snap.Seq())
	})
}

// baseEntry returns the entry for path of the Tx's base.
func baseEntry(t *testing.T, tx *commit.Tx, path string) generation.Entry {
	t.Helper()
	snap, err := tx.BaseSnapshot(context.Background())
	require.NoError(t, err)
	e, ok := snap.Manifest.Find(path)
	require.True(t, ok, path)
	return e
}

// TestKeepFromOverReuse: a file PutFile reused, then replaced by KeepFrom
// with an older version whose object is gone, is not "repaired" with the
// local file, which holds other content: the commit fails.
func TestKeepFromOverReuse(t *testing.T) {
	for _, f := range testenv.LocalStores() {
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			s := f.New(t)
			d := commit.New(s)
			putDir(t, d, writeFiles(t, 1, "1"))
			dir := writeFiles(t, 1, "2")
			putDir(t, d, dir)
			old, err := d.OpenAt(ctx, "1")
			require.NoError(t, err)
			gone, _ := old.Manifest.Find("d/0000")
			require.NoError(t, s.Delete(ctx, gone.Key, store.DeleteOptions{}))

			tx, err := d.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.AddDir(ctx, dir))
			require.Equal(t, 1, tx.Reused())
			tx.KeepFrom(old)
			_, err = tx.Commit(ctx, commit.CommitOptions{})
			require.ErrorIs(t, err, commit.ErrMissingObject)
			assert.Contains(t, err.Error(), gone.Key)
		})
	}
}

// TestReuseRecordsNewMode: a file whose content is unchanged but whose
// mode and time changed references the old object and records the new
// mode and time; a file uploaded again because its reused object is gone
// keeps them too.
func TestReuseRecordsNewMode(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	dir := writeFiles(t, 2, "1")
	_, p1 := putDir(t, d, dir)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	e0, _ := snap.Manifest.Find("d/0000")
	assert.Equal(t, "0644", e0.Mode)

	mtime := time.Date(2026, 11, 24, 9, 30, 0, 5, time.UTC)
	for _, name := range []string{"0000", "0001"} {
		local := filepath.Join(dir, "d", name)
		require.NoError(t, os.Chmod(local, 0o755))
		require.NoError(t, os.Chtimes(local, mtime, mtime))
	}
	gone, _ := snap.Manifest.Find("d/0001")
	require.NoError(t, s.Delete(ctx, gone.Key, store.DeleteOptions{}))

	tx, _ := putDir(t, d, dir)
	assert.Equal(t, 1, tx.Reused())
	assert.Equal(t, 1, tx.Repaired())
	cur := checkComplete(t, d)
	assert.Equal(t, generation.Format, cur.Manifest.Format)
	for _, e := range cur.Files() {
		assert.Equal(t, "0755", e.Mode, e.Path)
		assert.True(t, mtime.Equal(e.MTime), "%s: mtime %v", e.Path, e.MTime)
	}
	reused, _ := cur.Manifest.Find("d/0000")
	assert.Equal(t, generation.FromKey(e0.Key), p1.Generation)
	assert.Equal(t, e0.Key, reused.Key, "same content: the old object is referenced")
}
