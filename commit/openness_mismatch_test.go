package commit_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// TestIntentOnAValueTheCommitterDeemsClosedDiesWithIt: writers may open
// values by different rules (two versions of the tool). A writes an intent
// on V, open by its rule; B, by whose rule V is closed, commits on V alone
// while the intent is live: it neither lists nor carries it. A's intent
// dies with V, and A rebases on B's commit and lands once: the mismatch
// costs A a compare-and-swap, nothing else.
func TestIntentOnAValueTheCommitterDeemsClosedDiesWithIt(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	_, err := publish(t, commit.New(s), map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	commit.SetOpenness(t, 1, 1)
	v := commitRebased(t, s, "v/", 1)
	require.False(t, commit.DefaultOpenness.Opens(readManifest(t, s, v.Generation)), "V is closed by the default rule")

	wA := &putKeys{Store: s}
	fsA := faults.NewStore(wA)
	dA := commit.New(fsA)
	commit.MarkGrouped(dA)
	txA := partition(t, dA, "a/", map[string]string{"f": "a"})

	wB := &putKeys{Store: s}
	dB := commit.New(wB)
	commit.MarkGrouped(dB)
	txB := partition(t, dB, "b/", map[string]string{"f": "b"})
	var pB *pointer.Pointer
	// B commits while A's LIST of its round is in flight, A's intent on V
	// written.
	fsA.Add(faults.Rule{Op: store.OpList, Key: commit.IntentDir + v.WriteID, Kind: faults.Latency, Times: 1, Then: func() {
		require.True(t, intentPut(keysUnder(t, s, commit.IntentDir), v.WriteID), "A's intent is on V")
		commit.SetOpenness(t, commit.DefaultOpenness.Rebased, commit.DefaultOpenness.Carried)
		var err error
		pB, err = txB.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		commit.SetOpenness(t, 1, 1)
	}})

	pA, err := txA.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.NotNil(t, pB)
	assert.Equal(t, v.Seq+1, pB.Seq)
	assert.Empty(t, txB.CarriedBy())
	assert.Empty(t, readManifest(t, s, pB.Generation).Carried, "B carried nobody")
	assert.Empty(t, underIntents(wB.listed()), "B listed no intents")
	assert.False(t, intentPut(wB.list(), v.WriteID), "B wrote no intent")

	assert.Empty(t, txA.CarriedBy(), "nobody carried A")
	assert.Equal(t, 1, txA.Rebased())
	assert.Equal(t, pB.Seq+1, pA.Seq)
	assert.Equal(t, pB.Generation, pA.Parent)
	assert.Equal(t, map[string]string{"seed": "0", "v/f": "v/", "between1-v/f": "between", "a/f": "a", "b/f": "b"}, contents(t, commit.New(s)))
	assert.Empty(t, keysUnder(t, s, commit.IntentDir), "no intent left behind")
}
