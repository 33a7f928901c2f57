package commit_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

const fixtureGen = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"

func fixtures(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "testdata", "corrupt", dir, "*"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	out := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		out[filepath.Base(p)] = b
	}
	return out
}

// snapshotKeys returns every key and ETag in s.
func snapshotKeys(t *testing.T, s store.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for o, err := range store.List(context.Background(), s, "", "", "") {
		require.NoError(t, err)
		out[o.Key] = o.ETag
	}
	return out
}

// TestCorruptPointer (I8): every bad pointer body is refused with a typed
// error by readers and writers, and nothing is written or deleted.
func TestCorruptPointer(t *testing.T) {
	for name, body := range fixtures(t, "pointer") {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			raw := mem.New()
			_, err := raw.Put(ctx, pointer.Key, bytes.NewReader(body), store.PutOptions{})
			require.NoError(t, err)
			before := snapshotKeys(t, raw)
			c := store.Count(raw)
			d := commit.New(c)

			_, err = d.Open(ctx)
			require.ErrorIs(t, err, pointer.ErrCorrupt)
			_, err = d.Begin(ctx)
			require.ErrorIs(t, err, pointer.ErrCorrupt, "a writer must not build on a corrupt pointer")
			_, err = d.Update(ctx, commit.CommitOptions{}, func(context.Context, *commit.Tx) error { return nil })
			require.ErrorIs(t, err, pointer.ErrCorrupt)

			n := c.Counts()
			assert.Zero(t, n[store.OpPut]+n[store.OpDelete]+n[store.OpDeleteMany], "no writes on corrupt input: %s", n)
			assert.Equal(t, before, snapshotKeys(t, raw))
		})
	}
}

// TestCorruptManifest (I8): a pointer naming a bad manifest is refused on
// open; paths like ../x or /abs never reach a caller.
func TestCorruptManifest(t *testing.T) {
	for name, body := range fixtures(t, "manifest") {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			raw := mem.New()
			sum := sha256.Sum256(body)
			_, err := raw.Put(ctx, generation.ManifestKey(fixtureGen), bytes.NewReader(body), store.PutOptions{})
			require.NoError(t, err)
			_, err = pointer.Write(ctx, raw, &pointer.Pointer{
				Seq: 1, Generation: fixtureGen, Manifest: generation.ManifestKey(fixtureGen),
				ManifestSHA256: hex.EncodeToString(sum[:]),
			}, "")
			require.NoError(t, err)
			before := snapshotKeys(t, raw)
			c := store.Count(raw)
			d := commit.New(c)

			_, err = d.Open(ctx)
			require.ErrorIs(t, err, generation.ErrCorrupt)
			assert.Contains(t, err.Error(), generation.ManifestKey(fixtureGen), "the error names the manifest")
			_, err = d.Update(ctx, commit.CommitOptions{}, func(context.Context, *commit.Tx) error { return nil })
			require.ErrorIs(t, err, generation.ErrCorrupt, "a writer must not build on a corrupt manifest")

			n := c.Counts()
			assert.Zero(t, n[store.OpPut]+n[store.OpDelete]+n[store.OpDeleteMany], "no writes on corrupt input: %s", n)
			assert.Equal(t, before, snapshotKeys(t, raw))
		})
	}
}

// TestManifestChecksumMismatch: a manifest replaced after commit no longer
// matches the pointer's sha256.
func TestManifestChecksumMismatch(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	p, err := publish(t, d, map[string]string{"a": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	rc, _, err := s.Get(ctx, p.Manifest)
	require.NoError(t, err)
	b, _ := io.ReadAll(rc)
	rc.Close()
	_, err = s.Put(ctx, p.Manifest, bytes.NewReader(append(b, ' ')), store.PutOptions{})
	require.NoError(t, err)
	_, err = d.Open(ctx)
	require.ErrorIs(t, err, generation.ErrCorrupt)
	assert.Contains(t, err.Error(), "sha256")
}

// TestDataChecksumMismatch: a data object altered or truncated after commit
// fails verification at EOF; a deleted one reads as ErrCollected.
func TestDataChecksumMismatch(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		_, err := publish(t, d, map[string]string{"same-size": "hello", "shorter": "hello", "longer": "hello", "gone": "x"}, commit.CommitOptions{})
		require.NoError(t, err)
		snap, err := d.Open(ctx)
		require.NoError(t, err)
		replace := map[string]string{"same-size": "jello", "shorter": "hell", "longer": "hello!"}
		for path, body := range replace {
			e, ok := snap.Manifest.Find(path)
			require.True(t, ok)
			_, err := s.Put(ctx, e.Key, strings.NewReader(body), store.PutOptions{})
			require.NoError(t, err)
		}
		for path := range replace {
			_, err := snap.ReadFile(ctx, path)
			require.ErrorIs(t, err, commit.ErrChecksum, path)
			assert.Contains(t, err.Error(), path)
		}
		e, _ := snap.Manifest.Find("gone")
		require.NoError(t, s.Delete(ctx, e.Key, store.DeleteOptions{}))
		_, err = snap.ReadFile(ctx, "gone")
		require.ErrorIs(t, err, commit.ErrCollected)
	})
}

func TestBadPaths(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	for _, p := range []string{"../x", "/abs", "a/../b", "a//b", "", "C:/win", `a\b`, "_manifest", "./a"} {
		err := tx.PutBytes(ctx, p, []byte("x"))
		require.Error(t, err, "path %q", p)
		assert.Contains(t, err.Error(), "bad path")
	}
	assert.Empty(t, snapshotKeys(t, d.Store()), "refused paths write nothing")
}
