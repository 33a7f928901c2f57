package commit_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/testenv"
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
// fails verification at EOF; a deleted one reads as ErrMissing, not
// ErrCollected: the collector never deleted it.
func TestDataChecksumMismatch(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
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
		require.ErrorIs(t, err, commit.ErrMissing)
		require.NotErrorIs(t, err, commit.ErrCollected)
	})
}

// TestWrongLengthRefused: an object whose length differs from its
// manifest's size, longer or shorter, is refused. Stored as is, it fails
// when opened, by its stored length; zstd-encoded, by its decoded length,
// and a reader never gets a byte beyond the manifest's size.
func TestWrongLengthRefused(t *testing.T) {
	const body = "hello, world"
	enc, err := zstd.NewWriter(nil)
	require.NoError(t, err)
	defer enc.Close()
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("compress=%v", compress), func(t *testing.T) {
			testenv.EachStore(t, func(t *testing.T, s store.Store) {
				ctx := context.Background()
				d := commit.New(s, commit.WithCompression(compress))
				_, err := publish(t, d, map[string]string{"longer": body, "shorter": body}, commit.CommitOptions{})
				require.NoError(t, err)
				snap, err := d.Open(ctx)
				require.NoError(t, err)
				replace := map[string]string{
					"longer":  body + strings.Repeat("!", 1<<20),
					"shorter": body[:len(body)-1],
				}
				want := map[string]string{
					"longer":  fmt.Sprintf("is longer than the %d bytes", len(body)),
					"shorter": fmt.Sprintf("has %d bytes, its manifest says %d", len(body)-1, len(body)),
				}
				if !compress {
					want["longer"] = fmt.Sprintf("is stored with %d bytes, its manifest says %d", len(replace["longer"]), len(body))
					want["shorter"] = fmt.Sprintf("is stored with %d bytes, its manifest says %d", len(body)-1, len(body))
				}
				for path, content := range replace {
					e, ok := snap.Manifest.Find(path)
					require.True(t, ok)
					stored := []byte(content)
					if compress {
						require.Equal(t, generation.EncodingZstd, e.Encoding)
						stored = enc.EncodeAll(stored, nil)
					}
					_, err := s.Put(ctx, e.Key, bytes.NewReader(stored), store.PutOptions{})
					require.NoError(t, err)

					rc, err := snap.Open(ctx, path)
					if !compress {
						require.ErrorIs(t, err, commit.ErrChecksum, "%s: refused when opened", path)
						assert.Contains(t, err.Error(), want[path])
						assert.Contains(t, err.Error(), e.Key, "the error names the key")
						continue
					}
					require.NoError(t, err)
					var got bytes.Buffer
					_, err = io.Copy(&got, rc)
					rc.Close()
					require.ErrorIs(t, err, commit.ErrChecksum, path)
					assert.Contains(t, err.Error(), want[path])
					assert.LessOrEqual(t, got.Len(), len(body), "%s: no byte beyond the manifest's size", path)
				}
			})
		})
	}
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
