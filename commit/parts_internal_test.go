package commit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/generation"
)

// TestLocalPartsOnlyForTheEntrysContent: part checksums read from a local
// file are returned only if it has the entry's sha256, and the file is
// left at its start.
func TestLocalPartsOnlyForTheEntrysContent(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), generation.MinPartSize/8)
	name := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(name, data, 0o644))
	f, err := os.Open(name)
	require.NoError(t, err)
	defer f.Close()
	sum := sha256.Sum256(data)

	ps, parts, err := localParts(f, int64(len(data)), generation.MinPartSize, hex.EncodeToString(sum[:]))
	require.NoError(t, err)
	require.Equal(t, int64(generation.MinPartSize), ps)
	require.Len(t, parts, 2*64)
	first, err := io.ReadAll(io.LimitReader(f, 4))
	require.NoError(t, err)
	require.Equal(t, "0123", string(first), "left at its start")
	_, err = f.Seek(0, io.SeekStart)
	require.NoError(t, err)

	ps, parts, err = localParts(f, int64(len(data)), generation.MinPartSize, hex.EncodeToString(make([]byte, 32)))
	require.NoError(t, err)
	require.Zero(t, ps)
	require.Empty(t, parts, "another content: no parts")
}

// TestWithPartSizeHoldsItWithinTheBounds: a part size outside the bounds a
// manifest may hold is held at the nearest, and 0 records none.
func TestWithPartSizeHoldsItWithinTheBounds(t *testing.T) {
	for in, want := range map[int64]int64{0: 0, 1: generation.MinPartSize, 1 << 20: 1 << 20, 1 << 40: generation.MaxPartSize} {
		require.Equal(t, want, New(nil, WithPartSize(in)).partSize, "WithPartSize(%d)", in)
	}
}
