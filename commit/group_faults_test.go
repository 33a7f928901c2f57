package commit_test

// Group commit under held, lost and failed requests.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// TestGroupIntentLandingAfterWithdrawalIsNeverCarried: W's intent PUT on
// V is held in the network; W's context ends while it lists its round, so
// W withdraws (rewrites V) and discards its objects. The held PUT then
// lands, bound to V, which is gone. C, begun on V, joins a round on V's
// rewrite and lands alone: W is in no commit.
func TestGroupIntentLandingAfterWithdrawalIsNeverCarried(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fsW, fsC := faults.NewStore(s), faults.NewStore(s)
	dW, dC, direct := commit.New(fsW), commit.New(fsC), commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	openHead(t, direct)
	commit.MarkGrouped(dW)
	commit.MarkGrouped(dC)
	v := readPointer(t, s)
	txC := partition(t, dC, "c/", map[string]string{"f": "c"})
	txW := partition(t, dW, "w/", map[string]string{"f": "w"})
	wctx, cancel := context.WithCancel(ctx)
	fsW.Add(faults.Rule{Op: store.OpPut, Key: commit.IntentDir, Kind: faults.Late, Times: 1})
	fsW.Add(faults.Rule{Op: store.OpList, Key: commit.IntentDir + v.WriteID + "/", Kind: faults.Latency, Times: 1, Then: cancel})
	_, errW := txW.Commit(wctx, commit.CommitOptions{})
	require.Error(t, errW)
	assert.Empty(t, keysUnder(t, s, generation.Prefix(txW.Generation())), "W discarded")
	require.NoError(t, fsW.Release())
	require.Len(t, keysUnder(t, s, commit.IntentDir+v.WriteID+"/"), 1, "W's intent landed late on V")
	pC, errC := txC.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, errC)
	assert.Empty(t, applications(chainOf(t, direct), txW.Generation()))
	assert.Equal(t, map[string]string{"seed": "0", "c/f": "c"}, contents(t, direct))
	m := readManifest(t, s, pC.Generation)
	assert.Empty(t, m.Carried)
}

// TestGroupLeaderCarriesFirstListingWhenSecondFails: L leads a round on V
// (its intent first) and C joins it; L's second LIST fails, and L carries
// what its first LIST showed. Each writer is applied exactly once.
func TestGroupLeaderCarriesFirstListingWhenSecondFails(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fsL, fsC := faults.NewStore(s), faults.NewStore(s)
	dL, dC, direct := commit.New(fsL), commit.New(fsC), commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	openHead(t, direct)
	commit.MarkGrouped(dL)
	commit.MarkGrouped(dC)
	v := readPointer(t, s)
	txL := partition(t, dL, "l/", map[string]string{"f": "l"})
	txC := partition(t, dC, "c/", map[string]string{"f": "c"})
	var errC error
	done := make(chan struct{})
	fsL.Add(faults.Rule{Op: store.OpList, Key: commit.IntentDir + v.WriteID + "/", Kind: faults.Latency, Times: 1, Then: func() {
		// L's intent is published; C publishes too, after it, and follows.
		fsL.Add(faults.Rule{Op: store.OpList, Key: commit.IntentDir + v.WriteID + "/", Kind: faults.Refused, Times: 1})
		go func() {
			_, errC = txC.Commit(ctx, commit.CommitOptions{})
			close(done)
		}()
		awaitIntents(t, s, v.WriteID, 2)
	}})
	pL, errL := txL.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, errL)
	<-done
	require.NoError(t, errC)
	assert.Equal(t, pL.Generation, txC.CarriedBy(), "C is carried by L's commit")
	chain := chainOf(t, direct)
	assert.Len(t, applications(chain, txL.Generation()), 1)
	assert.Len(t, applications(chain, txC.Generation()), 1)
	assert.Equal(t, map[string]string{"seed": "0", "c/f": "c", "l/f": "l"}, contents(t, direct))
}

// TestGroupFollowerCarriedWhileCarrierOutcomeUnknown: C leads a round on V
// and carries O; C's compare-and-swap lands, but its response is lost and
// C cannot read the pointer back. C reports an unknown outcome (never a
// loss) and keeps its objects; O settles as carried by C's commit.
func TestGroupFollowerCarriedWhileCarrierOutcomeUnknown(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fsO, fsC := faults.NewStore(s), faults.NewStore(s)
	dO, dC, direct := commit.New(fsO), commit.New(fsC), commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	openHead(t, direct)
	commit.MarkGrouped(dO)
	commit.MarkGrouped(dC)
	v := readPointer(t, s)
	txO := partition(t, dO, "o/", map[string]string{"f": "o"})
	txC := partition(t, dC, "c/", map[string]string{"f": "c"})
	var errO error
	done := make(chan struct{})
	fsC.Add(faults.Rule{Op: store.OpList, Key: commit.IntentDir + v.WriteID + "/", Kind: faults.Latency, Times: 1, Then: func() {
		go func() {
			_, errO = txO.Commit(ctx, commit.CommitOptions{})
			close(done)
		}()
		awaitIntents(t, s, v.WriteID, 2)
	}})
	fsC.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Lost, Times: 1, Then: func() {
		fsC.Add(faults.Rule{Op: store.OpGet, Key: pointer.Key, Kind: faults.Refused})
	}})
	_, errC := txC.Commit(ctx, commit.CommitOptions{})
	<-done
	require.ErrorIs(t, errC, commit.ErrCommitUnknown)
	require.NoError(t, errO)
	chain := chainOf(t, direct)
	assert.Len(t, applications(chain, txO.Generation()), 1)
	assert.Len(t, applications(chain, txC.Generation()), 1)
	assert.Equal(t, txC.Generation(), txO.CarriedBy())
	assert.Contains(t, keysUnder(t, s, generation.Prefix(txC.Generation())), generation.DataKey(txC.Generation(), "c/f"))
	assert.Contains(t, keysUnder(t, s, generation.Prefix(txO.Generation())), generation.DataKey(txO.Generation(), "o/f"))
}
