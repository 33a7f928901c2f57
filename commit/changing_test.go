package commit_test

import (
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// changingSize is the size of the files the tests change while they are
// read; changingAt is where the read pauses for the change.
const (
	changingSize = 256 << 10
	changingAt   = 64 << 10
)

// writeDated writes body at path, dated an hour ago, so that any later
// write moves its modification time whatever the clock's tick.
func writeDated(t *testing.T, path string, body []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, body, 0o644))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(path, old, old))
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

// localChange is a way a local file changes while it is read.
type localChange struct {
	name  string
	apply func(t *testing.T, path string)
}

// localChanges rewrites the file in place with the same size, appends to
// it, and cuts it short. They run in the store's reading goroutine, so
// they report with assert.
func localChanges() []localChange {
	return []localChange{
		{"rewritten", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if assert.NoError(t, err) {
				_, err = f.WriteAt(make([]byte, changingSize), 0)
				assert.NoError(t, err)
				assert.NoError(t, f.Close())
			}
		}},
		{"grown", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if assert.NoError(t, err) {
				_, err = f.Write(make([]byte, 4096))
				assert.NoError(t, err)
				assert.NoError(t, f.Close())
			}
		}},
		{"shrunk", func(t *testing.T, path string) {
			assert.NoError(t, os.Truncate(path, changingAt+1000))
		}},
	}
}

// TestAddDirRefusesFileChangedWhileRead: a file rewritten in place with
// the same size, grown, or cut short while AddDir uploads it fails the
// call with ErrChanged, naming the local file and what changed in words
// (not the store's byte count); the Tx holds no entry for it, and Discard
// leaves the store empty: nothing of it is committed.
func TestAddDirRefusesFileChangedWhileRead(t *testing.T) {
	for _, f := range testenv.Stores() {
		for _, ch := range localChanges() {
			t.Run(f.Name+"/"+ch.name, func(t *testing.T) {
				ctx := context.Background()
				s := f.New(t)
				dir := t.TempDir()
				big := filepath.Join(dir, "big.bin")
				writeDated(t, big, randomBytes(t, changingSize))
				writeDated(t, filepath.Join(dir, "small.txt"), []byte("small"))
				hook := faults.NewStore(s)
				var changed atomic.Bool
				hook.Add(faults.Rule{Op: store.OpPut, Suffix: "/big.bin", Kind: faults.Paused, At: changingAt, Times: 1, Then: func() {
					ch.apply(t, big)
					changed.Store(true)
				}})
				tx, err := commit.New(hook).Begin(ctx)
				require.NoError(t, err)
				err = tx.AddDir(ctx, dir)
				require.True(t, changed.Load(), "the upload of big.bin read past the change")
				require.Error(t, err)
				assert.ErrorIs(t, err, commit.ErrChanged)
				assert.Contains(t, err.Error(), big+": changed while it was read")
				assert.NotContains(t, err.Error(), "Size says")
				assert.NotContains(t, tx.Files(), "big.bin", "the Tx is left without the file")
				require.NoError(t, tx.Discard(ctx))
				assertEmpty(t, s)
			})
		}
	}
}

// assertEmpty fails if s holds any object.
func assertEmpty(t *testing.T, s store.Store) {
	t.Helper()
	for o, err := range store.List(context.Background(), s, "", "", "") {
		require.NoError(t, err)
		assert.Fail(t, "left in the store", o.Key)
	}
}

// TestPutFileIgnoreChanges: with IgnoreChanges, a file that grows while
// it is read stages the bytes it had when PutFile opened it, and one
// rewritten in place stages what was read; one that is cut short still
// fails with ErrChanged, since it no longer has the bytes its entry would
// record.
func TestPutFileIgnoreChanges(t *testing.T) {
	for _, f := range []string{"grown", "rewritten", "shrunk"} {
		t.Run(f, func(t *testing.T) {
			var ch localChange
			for _, c := range localChanges() {
				if c.name == f {
					ch = c
				}
			}
			ctx := context.Background()
			p := filepath.Join(t.TempDir(), "log")
			body := randomBytes(t, changingSize)
			writeDated(t, p, body)
			s := mem.New()
			hook := faults.NewStore(s)
			var changed atomic.Bool
			hook.Add(faults.Rule{Op: store.OpPut, Suffix: "/log", Kind: faults.Paused, At: changingAt, Times: 1, Then: func() {
				ch.apply(t, p)
				changed.Store(true)
			}})
			d := commit.New(hook)
			tx, err := d.Begin(ctx)
			require.NoError(t, err)
			err = tx.PutFile(ctx, "log", p, commit.IgnoreChanges())
			require.True(t, changed.Load())
			if f == "shrunk" {
				require.ErrorIs(t, err, commit.ErrChanged)
				assert.Contains(t, err.Error(), p+": changed while it was read")
				require.NoError(t, tx.Discard(ctx))
				assertEmpty(t, s)
				return
			}
			require.NoError(t, err)
			_, err = tx.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
			snap, err := d.Open(ctx)
			require.NoError(t, err)
			e, ok := snap.Manifest.Find("log")
			require.True(t, ok)
			assert.EqualValues(t, changingSize, e.Size, "the size it had when opened")
			rc, err := snap.OpenEntry(ctx, e)
			require.NoError(t, err)
			got, err := io.ReadAll(rc)
			rc.Close()
			require.NoError(t, err)
			want := body
			if f == "rewritten" {
				want = append(body[:changingAt:changingAt], make([]byte, changingSize-changingAt)...)
			}
			assert.Equal(t, want, got)
		})
	}
}

// TestPutFileRefusesReuseOfChangedFile: a file that changes after PutFile
// opened it, while PutFile reads the base's manifest, into the content of
// the base's entry, is refused rather than taken as that entry: it is
// not the file PutFile opened. (PutFile opens the file before it reads
// the base's manifest.)
func TestPutFileRefusesReuseOfChangedFile(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	base := []byte("the published content")
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	writeDated(t, p, base)
	tx, err := commit.New(s).Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutFile(ctx, "f", p))
	first, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)

	writeDated(t, p, []byte("another content, as long"[:len(base)]))
	held := faults.NewStore(s)
	held.Add(faults.Rule{Op: store.OpGet, Key: generation.ManifestKey(first.Generation), Kind: faults.Latency, Times: 1, Then: func() {
		writeDated(t, p, base) // before the read of the base's manifest is sent
	}})
	tx, err = commit.New(held).Begin(ctx)
	require.NoError(t, err)
	err = tx.PutFile(ctx, "f", p)
	require.ErrorIs(t, err, commit.ErrChanged)
	assert.Contains(t, err.Error(), p+": changed while it was read")
	assert.Zero(t, tx.Reused())
	assert.Empty(t, tx.Files())
}

// TestReuploadRefusesFileChangedWhileRead: a reused file whose object
// turned out missing is read again for the upload; rewritten in place
// while it is, the commit fails with ErrChanged, names it, and the
// pointer stays where it was.
func TestReuploadRefusesFileChangedWhileRead(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	p := filepath.Join(t.TempDir(), "x")
	writeDated(t, p, randomBytes(t, changingSize))
	d := commit.New(s)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutFile(ctx, "x", p))
	first, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	e, _ := snap.Manifest.Find("x")
	require.NoError(t, s.Delete(ctx, e.Key, store.DeleteOptions{}))

	hook := faults.NewStore(s)
	var changed atomic.Bool
	hook.Add(faults.Rule{Op: store.OpPut, Suffix: "/x", Kind: faults.Paused, At: changingAt, Times: 1, Then: func() {
		localChanges()[0].apply(t, p)
		changed.Store(true)
	}})
	tx, err = commit.New(hook).Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutFile(ctx, "x", p))
	require.Equal(t, 1, tx.Reused())
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.True(t, changed.Load())
	require.ErrorIs(t, err, commit.ErrChanged)
	assert.Contains(t, err.Error(), p+": changed while it was read")
	now, err := d.Open(ctx)
	require.NoError(t, err)
	assert.Equal(t, first.Generation, now.Generation(), "nothing committed")
}
