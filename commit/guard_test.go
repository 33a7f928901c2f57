package commit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// TestGuardFailsWhileWriteMayLand (I1): a rollback below the collector's
// floor commits under a pin, which its guard checks before every pointer
// write. Its first write is held in the network and the read-back finds
// the pointer unchanged; then the guard's check of the pin fails. The held
// write is conditioned on the pointer as it still is, so it may land: the
// commit must end unknown and keep its staged objects, not discard them.
func TestGuardFailsWhileWriteMayLand(t *testing.T) {
	ctx := context.Background()
	f := faults.NewStore(mem.New())
	d, pin, _ := pinnedChain(t, f, time.Hour)
	target, err := d.OpenAt(ctx, "2")
	require.NoError(t, err)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	tx.KeepFrom(target)
	tx.HoldPin(pin)
	f.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Late, Times: 1, Then: func() {
		f.Add(faults.Rule{Op: store.OpHead, Key: commit.PinDir, Kind: faults.Refused})
	}})
	_, err = tx.Commit(ctx, commit.CommitOptions{Message: "rollback"})
	require.ErrorIs(t, err, commit.ErrCommitUnknown, "a guard that fails while our write may still land")

	f.Clear()
	require.NoError(t, f.Release(), "the held write lands")
	p := checkComplete(t, d)
	assert.Equal(t, tx.Generation(), p.Generation(), "the held write made the rollback current")
}
