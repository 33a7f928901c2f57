package commit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/store/mem"
)

// A staging-only Tx never commits: its objects are published only by a
// Tx that adopts them.
func TestStageOnlyTxRefusesToCommit(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	tx, err := d.Stage()
	require.NoError(t, err)
	require.NoError(t, tx.PutBytes(ctx, "x", []byte("1")))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrStageOnly)
	require.Len(t, tx.Entries(), 1, "nothing was discarded")
}

// Adopt takes only data keys of other generations: never a manifest, a
// key of the adopting Tx itself, or a key outside _gen/.
func TestAdoptRefusesKeysThatAreNotAnotherGenerationsData(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	other, err := generation.New()
	require.NoError(t, err)
	entry := func(path, key string) []generation.Entry {
		return []generation.Entry{{Path: path, Key: key, Size: 1, SHA256: "0000000000000000000000000000000000000000000000000000000000000000"}}
	}
	now := time.Now()
	require.Error(t, tx.Adopt(now, entry("x", generation.ManifestKey(other))), "a manifest")
	require.Error(t, tx.Adopt(now, entry("x", generation.DataKey(tx.Generation(), "x"))), "the Tx's own key")
	require.Error(t, tx.Adopt(now, entry("x", "_pointer")), "outside _gen/")
	require.Error(t, tx.Adopt(now, entry("../x", generation.DataKey(other, "x"))), "a bad path")
	require.Error(t, tx.Adopt(time.Time{}, entry("x", generation.DataKey(other, "x"))), "no staging start")
	require.NoError(t, tx.Adopt(now, entry("x", generation.DataKey(other, "x"))))
	require.Len(t, tx.Entries(), 1)
	require.NoError(t, tx.Discard(ctx))
}
