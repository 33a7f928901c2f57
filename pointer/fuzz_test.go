package pointer_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/pointer"
)

// addCorruptSeeds adds every fixture in dir (../testdata/corrupt/...) to
// the fuzz corpus.
func addCorruptSeeds(f *testing.F, dir string) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(f, err)
	require.NotEmpty(f, paths, "fixtures in %s", dir)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(b)
	}
}

// FuzzPointerDecode: Decode never panics; it refuses bad input with
// ErrCorrupt; and what it accepts survives an Encode/Decode round trip
// unchanged.
func FuzzPointerDecode(f *testing.F) {
	addCorruptSeeds(f, "../testdata/corrupt/pointer")
	f.Add([]byte(`{"format":1,"seq":7,"generation":"0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","parent":"0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5a",` +
		`"manifest":"_gen/0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/_manifest","manifest_sha256":"` +
		`aa00000000000000000000000000000000000000000000000000000000000000","write_id":"w","fence":3,` +
		`"gc_horizon":"2025-01-02T03:04:05.123+01:00","committed_at":"2025-01-02T03:04:06Z","writer":"h:1","message":"m","meta":{"k":"v"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := pointer.Decode(b)
		if err != nil {
			require.ErrorIs(t, err, pointer.ErrCorrupt, "every refusal is typed")
			return
		}
		enc, err := pointer.Encode(p)
		require.NoError(t, err, "Decode accepted a pointer that Encode refuses")
		p2, err := pointer.Decode(enc)
		require.NoError(t, err, "Decode refuses what Encode wrote:\n%s", enc)
		enc2, err := pointer.Encode(p2)
		require.NoError(t, err)
		require.Equal(t, string(enc), string(enc2), "the round trip changed the pointer")
		require.Equal(t, p.Seq, p2.Seq)
		require.Equal(t, p.Generation, p2.Generation)
		require.Equal(t, p.Parent, p2.Parent)
		require.Equal(t, p.ManifestSHA256, p2.ManifestSHA256)
		require.Equal(t, p.WriteID, p2.WriteID)
		require.Equal(t, p.Fence, p2.Fence)
		require.True(t, p.GCHorizon.Equal(p2.GCHorizon))
	})
}

// TestDecodeSizeCap: a body over MaxSize is refused before it is parsed.
func TestDecodeSizeCap(t *testing.T) {
	_, err := pointer.Decode(bytes.Repeat([]byte(" "), pointer.MaxSize+1))
	require.ErrorIs(t, err, pointer.ErrCorrupt)
	require.ErrorContains(t, err, "larger than")
}
