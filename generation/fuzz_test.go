package generation_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/generation"
)

const fuzzGen = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"

// validManifest is a small manifest that Decode accepts.
func validManifest(tb testing.TB) []byte {
	tb.Helper()
	m := &generation.Manifest{
		Format: generation.Format, Generation: fuzzGen, Seq: 2, StagingStart: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		Parent: "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5a", ParentManifestSHA256: strings.Repeat("ab", 32),
		Entries: []generation.Entry{
			{Path: "a.txt", Key: generation.DataKey(fuzzGen, "a.txt"), Size: 3, SHA256: strings.Repeat("01", 32)},
			{Path: "dir/b.csv", Key: generation.DataKey("0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5a", "dir/b.csv"), Size: 0, SHA256: strings.Repeat("02", 32), Encoding: generation.EncodingZstd},
		},
	}
	b, err := generation.Encode(m)
	require.NoError(tb, err)
	return b
}

// safeUnder reports whether joining the slash path p below dest stays
// strictly below dest.
func safeUnder(dest, p string) bool {
	joined := filepath.Join(dest, filepath.FromSlash(p))
	rel, err := filepath.Rel(dest, joined)
	return err == nil && rel != "." && filepath.IsLocal(rel) && strings.HasPrefix(joined, dest+string(filepath.Separator))
}

// FuzzManifestDecode: Decode never panics and refuses bad input with
// ErrCorrupt. Every entry of an accepted manifest has a path that passes
// CheckPath and stays below any destination, and a key inside a
// generation; the manifest survives an Encode/Decode round trip.
func FuzzManifestDecode(f *testing.F) {
	paths, err := filepath.Glob("../testdata/corrupt/manifest/*")
	require.NoError(f, err)
	require.NotEmpty(f, paths)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(b)
	}
	valid := validManifest(f)
	f.Add(valid)
	enc, err := zstd.NewWriter(nil)
	require.NoError(f, err)
	f.Add(enc.EncodeAll(valid, nil)) // a compressed manifest
	enc.Close()

	dest := filepath.Join(os.TempDir(), "commitptr-fuzz-dest")
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := generation.Decode(b)
		if err != nil {
			require.ErrorIs(t, err, generation.ErrCorrupt, "every refusal is typed")
			return
		}
		for _, e := range m.Entries {
			require.NoError(t, generation.CheckPath(e.Path))
			require.True(t, safeUnder(dest, e.Path), "entry path %q escapes the destination", e.Path)
			gen := generation.FromKey(e.Key)
			require.NotEmpty(t, gen, "entry key %q is not inside a generation", e.Key)
			require.True(t, safeUnder(dest, strings.TrimPrefix(e.Key, generation.Prefix(gen))), "entry key %q", e.Key)
		}
		out, err := generation.Encode(m)
		require.NoError(t, err, "Decode accepted a manifest that Encode refuses")
		m2, err := generation.Decode(out)
		require.NoError(t, err, "Decode refuses what Encode wrote")
		out2, err := generation.Encode(m2)
		require.NoError(t, err)
		require.True(t, bytes.Equal(out, out2), "the round trip changed the manifest")
		require.Equal(t, m.Entries, m2.Entries)
	})
}

// FuzzCheckPath: every path CheckPath accepts is relative, clean, free of
// backslashes, NULs and drive letters, and stays below any destination.
func FuzzCheckPath(f *testing.F) {
	for _, p := range []string{"a.txt", "dir/sub/f.csv", "..foo/bar..", "../x", "a/../b", "/abs", `a\b`, "C:x",
		"a\x00b", "a//b", "./a", "_manifest", "dir/_manifest", "ü/é", "...", "a/.", "CON", ".a/..b"} {
		f.Add(p)
	}
	dest := filepath.Join(os.TempDir(), "commitptr-fuzz-dest")
	f.Fuzz(func(t *testing.T, p string) {
		if generation.CheckPath(p) != nil {
			return
		}
		require.True(t, filepath.IsLocal(filepath.FromSlash(p)), "%q is not local", p)
		require.True(t, safeUnder(dest, p), "%q escapes the destination", p)
		require.NotContains(t, p, `\`)
		require.NotContains(t, p, "\x00")
		require.False(t, len(p) >= 2 && p[1] == ':', "%q has a drive letter", p)
		for _, seg := range strings.Split(p, "/") {
			require.NotContains(t, []string{"", ".", ".."}, seg, "%q", p)
		}
		require.LessOrEqual(t, len(p), 1024)
	})
}

// TestManifestSizeCaps: the caps on stored and decoded manifests exist and
// are enforced before parsing.
func TestManifestSizeCaps(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates MaxStored bytes")
	}
	big := make([]byte, generation.MaxStored+1)
	_, err := generation.Decode(big)
	require.ErrorIs(t, err, generation.ErrCorrupt)
	require.ErrorContains(t, err, "allowed")
}
