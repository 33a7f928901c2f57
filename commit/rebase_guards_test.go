package commit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// TestRebaseBoundedInTime: Rebase.MaxTime bounds the time from the first
// rebase to the last. With a bound already past at the second rebase, a
// Tx that loses twice rebases once and then loses with a ConflictError
// that says so, its objects deleted.
func TestRebaseBoundedInTime(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fs := faults.NewStore(s)
	d, direct := commit.New(fs), commit.New(s)
	_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	tx := partitionWith(t, d, "mine/", map[string]string{"f": "mine"}, commit.Rebase{MaxTime: time.Nanosecond, NoGroup: true})
	n := 0
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 2, Then: func() {
		n++
		_, err := publish(t, direct, map[string]string{"seed": fmt.Sprint(n)}, commit.CommitOptions{})
		require.NoError(t, err)
	}})
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	var ce *commit.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "longer than the 1ns allowed")
	assert.Equal(t, 1, tx.Rebased())
	assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
	assert.Equal(t, map[string]string{"seed": "2"}, contents(t, d))
}

// TestRebaseRefusesHeadWithOtherSeq: the Tx loses its compare-and-swap to
// a pointer value whose seq is not its manifest's (a damaged or forged
// pointer). It must not build on it: a generation there would give the
// chain a seq its parent's manifest contradicts. The commit fails with
// ErrCorrupt and the pointer is left as it is.
func TestRebaseRefusesHeadWithOtherSeq(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fs := faults.NewStore(s)
	d := commit.New(fs)
	_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
	var bad *pointer.Pointer
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		p, attrs, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		p.Seq++ // its manifest still says the seq before
		_, err = pointer.Write(ctx, s, p, attrs.ETag)
		require.NoError(t, err)
		bad = readPointer(t, s)
	}})
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, generation.ErrCorrupt)
	assert.False(t, errors.Is(err, commit.ErrCommitUnknown), "%v", err)
	assert.Equal(t, bad, readPointer(t, s), "nothing built on it")
	assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
}
