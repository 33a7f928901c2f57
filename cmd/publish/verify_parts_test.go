package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/store/mem"
)

// TestVerifyEntryChecksThePartChecksums: an object that matches its
// entry's sha256 but not its part checksums is a problem: readers of its
// ranges would fail.
func TestVerifyEntryChecksThePartChecksums(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New(), commit.WithPartSize(generation.MinPartSize))
	data := bytes.Repeat([]byte("0123456789abcdef"), generation.MinPartSize/16*3)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutBytes(ctx, "f", data))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	e, _ := snap.Manifest.Find("f")
	require.Equal(t, 3, e.NumParts())

	n, err := verifyEntry(ctx, snap, e)
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), n)

	wrong := e
	wrong.Parts = strings.Repeat("0", 64) + e.Parts[64:]
	_, err = verifyEntry(ctx, snap, wrong)
	require.ErrorIs(t, err, commit.ErrChecksum)
	require.ErrorContains(t, err, "part checksums")
}
