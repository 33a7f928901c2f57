package commit_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// TestGroupDatasetListsUnlessItsLastCommitWasInARound: a Dataset whose
// last commit was in a round, carried or carrying others, joins a round
// on an open base at its next commit without listing the intent
// directory first; one whose last commit carried nobody and was not
// carried lists it once first, and, finding nobody at work, commits alone.
func TestGroupDatasetListsUnlessItsLastCommitWasInARound(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	direct := commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	openHead(t, direct)

	// L, whose Dataset was in a round, carries F, of a fresh Dataset.
	dL, dF, wL, wF, pL := carriedRound(t, s)

	// F's Dataset was carried: its next commit, on L's (open) commit,
	// joins a round without listing first, and carries nobody.
	clearListed(wF)
	txF2 := partition(t, dF, "f2/", map[string]string{"f": "f2"})
	_, err = txF2.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.NotContains(t, wF.listed(), commit.IntentDir, "a carried Dataset joins its next round without listing")
	assert.Contains(t, wF.listed(), commit.IntentDir+pL.WriteID+"/", "it joined a round on its base")

	// L's Dataset carried F: its next commit on an open base joins a round
	// without listing first.
	openHead(t, direct)
	clearListed(wL)
	txL2 := partition(t, dL, "l2/", map[string]string{"f": "l2"})
	_, err = txL2.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.NotContains(t, wL.listed(), commit.IntentDir, "a carrier's Dataset joins its next round without listing")

	// F's last commit carried nobody and was not carried: on an open base
	// its next commit lists the intent directory once, and goes alone.
	openHead(t, direct)
	clearListed(wF)
	txF3 := partition(t, dF, "f3/", map[string]string{"f": "f3"})
	_, err = txF3.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{commit.IntentDir}, underIntents(wF.listed()), "a Dataset whose last commit was in no round lists first")
	assert.Empty(t, keysUnder(t, s, commit.IntentDir), "no intent left behind")
}

// carriedRound has L, whose Dataset was in a round, lead one on the
// current (open) value of s; F, of a fresh Dataset, finds L's intent,
// publishes its own, and is carried: its LIST of the round is held until
// L's commit has landed. wL and wF record their Datasets' requests; pL is
// the commit that carried F.
func carriedRound(t *testing.T, s store.Store) (dL, dF *commit.Dataset, wL, wF *putKeys, pL *pointer.Pointer) {
	t.Helper()
	ctx := context.Background()
	v := readPointer(t, s)
	wL, wF = &putKeys{Store: s}, &putKeys{Store: s}
	fsL, fsF := faults.NewStore(wL), faults.NewStore(wF)
	dL, dF = commit.New(fsL), commit.New(fsF)
	commit.MarkGrouped(dL)
	txL := partition(t, dL, "l/", map[string]string{"f": "l"})
	txF := partition(t, dF, "f/", map[string]string{"f": "f"})
	landed := make(chan struct{})
	fsF.Add(faults.Rule{Op: store.OpList, Key: commit.IntentDir + v.WriteID + "/", Kind: faults.Latency, Times: 1, Then: func() { <-landed }})
	var pF *pointer.Pointer
	var errF error
	var wg sync.WaitGroup
	fsL.Add(faults.Rule{Op: store.OpList, Key: commit.IntentDir + v.WriteID + "/", Kind: faults.Latency, Times: 1, Then: func() {
		wg.Go(func() { pF, errF = txF.Commit(ctx, commit.CommitOptions{}) })
		awaitIntents(t, s, v.WriteID, 2)
	}})
	pL, err := txL.Commit(ctx, commit.CommitOptions{})
	close(landed)
	wg.Wait()
	require.NoError(t, err)
	require.NoError(t, errF)
	require.Equal(t, pL.Generation, txF.CarriedBy(), "L carried F")
	require.Equal(t, pL.Generation, pF.Generation)
	assert.Equal(t, []string{commit.IntentDir}, underIntents(wF.listed())[:1], "F, of a fresh Dataset, listed the intent directory first")
	return dL, dF, wL, wF, pL
}

// clearListed forgets the prefixes w listed so far.
func clearListed(w *putKeys) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lists = nil
}

// TestGroupIntentOnReplacedValueThenClosedHeadRebasesAlone: a writer that
// lost its first compare-and-swap to an open value V publishes its intent
// on V, but V is replaced meanwhile by a commit that met nobody (closed).
// The writer's round carries nobody, its write on V loses, and it rebases
// alone on the closed head: no intent there, in the history once, with
// every change of the others, and no intent left behind.
func TestGroupIntentOnReplacedValueThenClosedHeadRebasesAlone(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	direct := commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	w := &putKeys{Store: s}
	fs := faults.NewStore(w)
	tx := partition(t, commit.New(fs), "mine/", map[string]string{"f": "mine"})
	var v, closed *pointer.Pointer
	loseFirstCAS(t, fs, direct, func() {
		v = readPointer(t, s)
		// The intent's PUT is held while a fresh writer on V, which finds
		// nobody at work, commits alone.
		fs.Add(faults.Rule{Op: store.OpPut, Key: commit.IntentDir, Kind: faults.Latency, Times: 1, Then: func() {
			var err error
			closed, err = partition(t, commit.New(s), "x/", map[string]string{"f": "x"}).Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
		}})
	})
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.NotNil(t, closed)
	mc := readManifest(t, s, closed.Generation)
	require.True(t, mc.Rebased == 0 && len(mc.Carried) == 0, "the value that replaced V is closed")
	assert.Equal(t, closed.Seq+1, p.Seq)
	assert.Equal(t, 2, tx.Rebased())
	assert.Empty(t, tx.CarriedBy())
	var intents []string
	for _, k := range w.list() {
		if strings.HasPrefix(k, commit.IntentDir) {
			intents = append(intents, k)
		}
	}
	require.Len(t, intents, 1, "one intent, on V: none on the closed head")
	assert.True(t, strings.HasPrefix(intents[0], commit.IntentDir+v.WriteID+"/"))
	assert.False(t, slices.Contains(w.listed(), commit.IntentDir+closed.WriteID+"/"), "no round on the closed head")
	m := readManifest(t, s, p.Generation)
	assert.Equal(t, 2, m.Rebased)
	assert.Empty(t, m.Carried)
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "x/f": "x", "mine/f": "mine"}, contents(t, direct))
	assert.Empty(t, keysUnder(t, s, commit.IntentDir), "no intent left behind")
}

// TestGroupCarriedDatasetOnClosedBaseCommitsAlone: a Dataset whose last
// commit was carried, whose next commit begins on a closed value (a
// writer that met nobody committed after the round), sends nothing under
// the intent directory: it commits alone; and since that commit was in no
// round, its next one on an open base lists the intent directory first.
func TestGroupCarriedDatasetOnClosedBaseCommitsAlone(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	direct := commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	openHead(t, direct)
	_, dF, _, wF, pL := carriedRound(t, s)

	closed, err := partition(t, commit.New(s), "x/", map[string]string{"f": "x"}).Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.Equal(t, pL.Seq+1, closed.Seq)
	mc := readManifest(t, s, closed.Generation)
	require.True(t, mc.Rebased == 0 && len(mc.Carried) == 0, "the value is closed")

	clearListed(wF)
	wF.reset()
	txF2 := partition(t, dF, "f2/", map[string]string{"f": "f2"})
	p2, err := txF2.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, closed.Seq+1, p2.Seq)
	assert.Empty(t, underIntents(wF.listed()), "no LIST of intents on a closed base")
	assert.False(t, slices.ContainsFunc(wF.list(), func(k string) bool { return strings.HasPrefix(k, commit.IntentDir) }),
		"no intent on a closed base: %v", wF.list())

	openHead(t, direct)
	clearListed(wF)
	txF3 := partition(t, dF, "f3/", map[string]string{"f": "f3"})
	_, err = txF3.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{commit.IntentDir}, underIntents(wF.listed()), "its last commit was in no round: it lists first")
	assert.Equal(t, map[string]string{"seed": "0", "l/f": "l", "f/f": "f", "x/f": "x", "f2/f": "f2", "f3/f": "f3"}, contents(t, direct))
	assert.Empty(t, keysUnder(t, s, commit.IntentDir), "no intent left behind")
}
