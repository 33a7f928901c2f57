package commit_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
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

// Tests of the guards of group commit, each named by the behaviour it
// keeps: every one fails when its guard is removed (scripts/mutants/
// group.list).

// TestGroupCarrierNeverCarriesLowerTokenOfOwnLease: C holds token 9 of a
// lease whose former holder O, with token 5, waits in a round on V (the
// new holder has not registered its token). C carries the round: it must
// not take O in, though V's fence admits token 5, for then the commit of
// the holder of 9 would land the change of the holder it superseded (I6).
// O then loses with ErrFenced on C's commit, and its objects are deleted.
func TestGroupCarrierNeverCarriesLowerTokenOfOwnLease(t *testing.T) {
	ctx := context.Background()
	const lease = "mem://x/_lease/nightly"
	s := mem.New()
	fsO := faults.NewStore(s)
	dO, dC, direct := commit.New(fsO), commit.New(s), commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	txO := partition(t, dO, "o/", map[string]string{"f": "o"})
	var txC *commit.Tx
	var pC *pointer.Pointer
	var errC error
	groupHeld(t, s, fsO, direct, func() {
		txC = partition(t, dC, "c/", map[string]string{"f": "c"})
		pC, errC = txC.Commit(ctx, commit.CommitOptions{Fence: 9, FenceLease: lease})
	})
	_, errO := txO.Commit(ctx, commit.CommitOptions{Fence: 5, FenceLease: lease})
	require.NoError(t, errC)
	require.ErrorIs(t, errO, commit.ErrFenced)
	assert.Empty(t, txO.CarriedBy())
	assert.Empty(t, readManifest(t, s, pC.Generation).Carried, "the holder of token 9 carries no token of its lease but its own")
	assert.Equal(t, uint64(9), readPointer(t, s).Fences[lease])
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "c/f": "c"}, contents(t, direct))
	assert.Empty(t, applications(chainOf(t, direct), txO.Generation()))
	assert.Empty(t, keysUnder(t, s, generation.Prefix(txO.Generation())))
}

// rebasedRound is what rebasedCarrier returns: O's commit and C's.
type rebasedRound struct {
	txO, txC   *commit.Tx
	pO, pC     *pointer.Pointer
	errO, errC error
}

// rebasedCarrier sets up a round carried by a writer that reached it by
// rebasing: O and C both begin on the seed; O loses its first
// compare-and-swap to "theirs/" (V), rebases, publishes its intent on V
// and leads the round there, and the write that closes it is held while C
// commits. C's first compare-and-swap, on the seed, loses to V (in a round
// of its own on the seed, or alone); C rebases on V, joins O's round and,
// O being held, carries it. atGroup runs when C's group write on V is
// about to be sent, with V.
func rebasedCarrier(t *testing.T, s store.Store, atGroup func(v *pointer.Pointer)) rebasedRound {
	t.Helper()
	ctx := context.Background()
	fsO, fsC := faults.NewStore(s), faults.NewStore(s)
	dO, dC, direct := commit.New(fsO), commit.New(fsC), commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	var r rebasedRound
	r.txO = partition(t, dO, "o/", map[string]string{"f": "o"})
	r.txC = partition(t, dC, "c/", map[string]string{"f": "c"})
	groupHeld(t, s, fsO, direct, func() {
		v := readPointer(t, s)
		writes := 0
		fsC.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Then: func() {
			if writes++; writes != 2 {
				return
			}
			require.Equal(t, v.WriteID, readPointer(t, s).WriteID)
			require.Len(t, carriers(t, s, r.txO.Generation()), 1, "C's group on V carries O")
			atGroup(v)
		}})
		r.pC, r.errC = r.txC.Commit(ctx, commit.CommitOptions{})
	})
	r.pO, r.errO = r.txO.Commit(ctx, commit.CommitOptions{})
	return r
}

// TestGroupRebasedCarrierNamesCarried: a writer that reached its round by
// rebasing carries it in its rebased manifest, which names the writers it
// carried: O settles as carried by C's commit, keeps its objects (C's
// commit references them) and does not commit again.
func TestGroupRebasedCarrierNamesCarried(t *testing.T) {
	s := mem.New()
	r := rebasedCarrier(t, s, func(*pointer.Pointer) {})
	require.NoError(t, r.errC)
	require.NoError(t, r.errO)
	assert.GreaterOrEqual(t, r.txC.Rebased(), 1, "C rebased")
	assert.Equal(t, r.pC.Generation, r.txO.CarriedBy())
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "o/f": "o", "c/f": "c"}, contents(t, commit.New(s)))
	assert.Equal(t, []uint64{r.pC.Seq}, applications(chainOf(t, commit.New(s)), r.txO.Generation()))
}

// TestGroupRebasedCarrierNeverResendsOnRewrite: C reached its round on V
// by rebasing, and its group write on V is held while a fence
// registration rewrites V. O's intent is bound to V, gone now: no commit
// may carry it. C must round again on the rewritten value, where O has no
// intent, and land carrying nobody; O then loses to C and commits on its
// own.
func TestGroupRebasedCarrierNeverResendsOnRewrite(t *testing.T) {
	const lease = "mem://x/_lease/other"
	s := mem.New()
	r := rebasedCarrier(t, s, func(*pointer.Pointer) {
		require.NoError(t, commit.New(s).RegisterFence(context.Background(), lease, 5))
	})
	require.NoError(t, r.errC)
	require.NoError(t, r.errO)
	assert.Equal(t, uint64(5), readPointer(t, s).Fences[lease], "the fence was registered on V")
	assert.Empty(t, readManifest(t, s, r.pC.Generation).Carried, "C's commit, on the rewritten value, carries no intent bound to V")
	assert.Empty(t, r.txO.CarriedBy(), "O is not told it was carried by a commit on another value than its intent's")
	assert.Equal(t, r.pC.Seq+1, r.pO.Seq, "O committed on its own, after C")
	direct := commit.New(s)
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "o/f": "o", "c/f": "c"}, contents(t, direct))
	chain := chainOf(t, direct)
	assert.Equal(t, []uint64{r.pO.Seq}, applications(chain, r.txO.Generation()))
	assert.Equal(t, []uint64{r.pC.Seq}, applications(chain, r.txC.Generation()))
}

// TestGroupWithdrawsWhenValueManifestUnreadable: O publishes its intent on
// V; C, of another process, carries it and is paused just before its
// compare-and-swap on V. O is then cancelled, and cannot read V's
// manifest while it settles: it cannot tell whether a carrier on V admits
// its intent, so it must take the intent for live and withdraw it
// (rewrite V) before it deletes anything. C's compare-and-swap, sent
// afterwards, then fails, and C rounds again without O. Were O to take
// its intent for dead, C's write would land naming O, whose objects are
// gone (I1), and O would report a failure for a change in the history.
func TestGroupWithdrawsWhenValueManifestUnreadable(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fsO, fsC := faults.NewStore(s), faults.NewStore(s)
	dO := commit.New(fsO, commit.WithRetry(commit.Retry{Attempts: 1, Base: time.Millisecond, Max: time.Millisecond}))
	dC, direct := commit.New(fsC), commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	openHead(t, direct)
	commit.MarkGrouped(dC) // it joins rounds from its first compare-and-swap
	octx, cancelO := context.WithCancel(ctx)
	defer cancelO()
	txO := partition(t, dO, "o/", map[string]string{"f": "o"})
	loseFirstCAS(t, fsO, direct, nil)
	selected, releaseC, doneC := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var txC *commit.Tx
	var pC *pointer.Pointer
	var errC error
	fsO.Add(faults.Rule{Op: store.OpPut, Key: commit.IntentDir, Kind: faults.Held, Times: 1, Then: func() {
		v := readPointer(t, s)
		txC = partition(t, dC, "c/", map[string]string{"f": "c"})
		fsC.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			close(selected)
			<-releaseC
		}})
		go func() {
			defer close(doneC)
			pC, errC = txC.Commit(ctx, commit.CommitOptions{})
		}()
		if !waitFor(t, selected, "the carrier's compare-and-swap") {
			return
		}
		require.True(t, readManifest(t, s, txC.Generation()).CarriedBy(txO.Generation()), "the carrier selected O")
		// O's rebase read V's manifest, which its Dataset still holds;
		// another Tx of the Dataset may have replaced it since.
		commit.ForgetHeldManifest(dO)
		fsO.Add(faults.Rule{Op: store.OpGet, Key: generation.ManifestKey(v.Generation), Kind: faults.Refused})
		cancelO()
	}})
	_, errO := txO.Commit(octx, commit.CommitOptions{})
	close(releaseC)
	waitFor(t, doneC, "the carrier's commit")
	fsO.Clear()
	require.NoError(t, errC)
	require.ErrorIs(t, errO, context.Canceled)
	assert.False(t, errors.Is(errO, commit.ErrCommitUnknown), "%v", errO)
	assert.Empty(t, keysUnder(t, s, generation.Prefix(txO.Generation())), "O's objects are deleted once its intent is dead")
	assert.Empty(t, readManifest(t, s, pC.Generation).Carried, "C's write on V failed: O withdrew its intent")
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "c/f": "c"}, contents(t, direct)) // I1 too
	assert.Empty(t, applications(chainOf(t, direct), txO.Generation()))
}

// TestGroupCarriedKeepsUntouchedFilesInScope: O owns the subtree "p/"
// (Rebase.Scope): it adds "p/new" and keeps "p/keep" as its base has it,
// untouched. C carries O: the commit must hold both, as O's own commit
// would have. (O names "p/keep" in its intent with the head's entry as
// what it sets there; a carrier that took it for a removal would delete
// it.)
func TestGroupCarriedKeepsUntouchedFilesInScope(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fsO := faults.NewStore(s)
	dO, dC, direct := commit.New(fsO), commit.New(s), commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0", "p/keep": "k"}, commit.CommitOptions{})
	require.NoError(t, err)
	openHead(t, direct)
	commit.MarkGrouped(dC) // it joins rounds from its first compare-and-swap
	txO, err := dO.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, txO.KeepAll(ctx))
	require.NoError(t, txO.PutBytes(ctx, "p/new", []byte("n")))
	require.NoError(t, txO.EnableRebase(commit.Rebase{Scope: "p/"}))
	var pC *pointer.Pointer
	var errC error
	groupHeld(t, s, fsO, direct, func() {
		txC := partition(t, dC, "c/", map[string]string{"f": "c"})
		pC, errC = txC.Commit(ctx, commit.CommitOptions{})
	})
	pO, errO := txO.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, errC)
	require.NoError(t, errO)
	assert.Equal(t, pC.Generation, txO.CarriedBy())
	assert.Equal(t, pC.Generation, pO.Generation)
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "c/f": "c", "p/keep": "k", "p/new": "n"}, contents(t, direct))
}

// carriers returns the generations whose manifests, written so far,
// name gen as carried.
func carriers(t *testing.T, s store.Store, gen string) []string {
	t.Helper()
	var out []string
	for _, k := range keysUnder(t, s, generation.Dir) {
		if g := generation.FromKey(k); k == generation.ManifestKey(g) && readManifest(t, s, g).CarriedBy(gen) {
			out = append(out, g)
		}
	}
	return out
}

// forgedRead is a read of an intent with every field of its entries (a
// forged intent needs them all).
type forgedRead struct {
	Path string            `json:"path"`
	Base *generation.Entry `json:"base,omitempty"`
	Set  *generation.Entry `json:"set,omitempty"`
}

// TestGroupCarriedClaimMissingScopedFile: a forged intent names W's Tx,
// sets W's one changed file as W has it, and removes "w/keep", a file W
// keeps untouched under its scope "w/". A carrier takes it. W finds its
// Tx named as carried by a manifest that lacks a file its generation has
// under its scope: that is not W's change, and W must not report
// success (I2); nor delete its objects, which the manifest references
// (I1). It reports an unknown outcome.
func TestGroupCarriedClaimMissingScopedFile(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	_, err := publish(t, d, map[string]string{"seed": "0", "w/keep": "k"}, commit.CommitOptions{})
	require.NoError(t, err)
	openHead(t, d)
	commit.MarkGrouped(d) // it joins rounds from its first compare-and-swap
	w, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, w.KeepAll(ctx))
	require.NoError(t, w.PutBytes(ctx, "w/f", []byte("w")))
	require.NoError(t, w.EnableRebase(commit.Rebase{Scope: "w/"}))
	byPath := map[string]generation.Entry{}
	for _, e := range w.Entries() {
		byPath[e.Path] = e
	}
	set, keep := byPath["w/f"], byPath["w/keep"]
	cur := readPointer(t, s)
	b, err := json.Marshal(map[string]any{"format": 1, "generation": w.Generation(), "head": cur.WriteID, "seq": cur.Seq + 1,
		"staging_start": time.Now().UTC(), "scope": "w/",
		"reads": []forgedRead{{Path: "w/f", Set: &set}, {Path: "w/keep", Base: &keep}}})
	require.NoError(t, err)
	putIntentBody(t, s, cur.WriteID, "00000000-0000-7000-8000-000000000001", b)
	tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.True(t, readManifest(t, s, p.Generation).CarriedBy(w.Generation()), "the carrier took the forged intent")
	_, err = w.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrCommitUnknown, "named as carried without a file of its scope: not a success")
	assert.Empty(t, w.CarriedBy())
	assert.Contains(t, keysUnder(t, s, generation.Prefix(w.Generation())), generation.DataKey(w.Generation(), "w/f"), "nothing deleted")
	checkComplete(t, d) // I1
}

// TestGroupBaseSnapshotReadersNeverMerged: A and B each read the base
// snapshot (BaseSnapshot) and write one file derived from it; both lose
// their first compare-and-swap to a commit that changed no file, so both
// rebase on it. Neither may take part in a group commit: carried
// together, each would land a change derived from a snapshot without the
// other's, a lost update. One commits, the other loses with a
// ConflictError. (Each round's close, were there one, is held until both
// have published, so that grouping, if it happened, would be seen.)
func TestGroupBaseSnapshotReadersNeverMerged(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	direct := commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	var txs [2]*commit.Tx
	var fss [2]*faults.Store
	for i, path := range []string{"a", "b"} {
		fss[i] = faults.NewStore(s)
		tx, err := commit.New(fss[i]).Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.KeepAll(ctx))
		snap, err := tx.BaseSnapshot(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.PutBytes(ctx, path, []byte(snap.Generation())))
		require.NoError(t, tx.EnableRebase(commit.Rebase{}))
		txs[i] = tx
	}
	openHead(t, direct) // a commit that changed no file, and rebased
	n := readPointer(t, s)
	for _, fs := range fss {
		fs.Add(faults.Rule{Op: store.OpList, Key: commit.IntentDir + n.WriteID + "/", Kind: faults.Latency, Times: 1, Then: func() {
			awaitIntents(t, s, n.WriteID, 2)
		}})
	}
	var errs [2]error
	var wg sync.WaitGroup
	for i := range txs {
		wg.Go(func() { _, errs[i] = txs[i].Commit(ctx, commit.CommitOptions{}) })
	}
	wg.Wait()
	var ce *commit.ConflictError
	won := 0
	for i, err := range errs {
		if err == nil {
			won++
			assert.Empty(t, txs[i].CarriedBy())
		} else {
			assert.ErrorAs(t, err, &ce)
		}
	}
	assert.Equal(t, 1, won, "one commits, the other loses: %v", errs)
	got := contents(t, direct)
	_, hasA := got["a"]
	_, hasB := got["b"]
	assert.True(t, hasA != hasB, "exactly one of the two derived files: %v", got)
	for _, m := range chainOf(t, direct) {
		assert.Empty(t, m.Carried, "generation %s carries nobody", m.Generation)
	}
}

// intentPuts records the keys a writer writes under commit.IntentDir.
type intentPuts struct {
	store.Store
	mu   sync.Mutex
	keys []string
}

func (s *intentPuts) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	if strings.HasPrefix(key, commit.IntentDir) {
		s.mu.Lock()
		s.keys = append(s.keys, key)
		s.mu.Unlock()
	}
	return s.Store.Put(ctx, key, body, opts)
}

func (s *intentPuts) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.keys)
}

// roundOutcome is what roundWaiting returns: X's and O's commits, and the
// keys X wrote under commit.IntentDir.
type roundOutcome struct {
	txX, txO   *commit.Tx
	pX, pO     *pointer.Pointer
	errX, errO error
	published  []string
}

// roundWaiting sets up a round with an intent waiting on V: O, a
// partition writer of "o/", loses its first compare-and-swap to
// "theirs/", rebases on V, publishes its intent and leads the round
// there; the write that closes the round is held while X, which begin
// began on the base before V (through d), commits: X loses its first
// compare-and-swap to V and rebases there, where O's intent waits.
func roundWaiting(t *testing.T, s store.Store, begin func(d *commit.Dataset) *commit.Tx) roundOutcome {
	t.Helper()
	ctx := context.Background()
	fsO := faults.NewStore(s)
	dO, direct := commit.New(fsO), commit.New(s)
	via := &intentPuts{Store: s}
	var r roundOutcome
	r.txO = partition(t, dO, "o/", map[string]string{"f": "o"})
	r.txX = begin(commit.New(via))
	groupHeld(t, s, fsO, direct, func() {
		r.pX, r.errX = r.txX.Commit(ctx, commit.CommitOptions{})
	})
	r.pO, r.errO = r.txO.Commit(ctx, commit.CommitOptions{})
	r.published = via.list()
	return r
}

// TestGroupNoGroupWriterCommitsAlone: a writer with Rebase.NoGroup that
// loses its compare-and-swap and rebases where another writer's intent
// waits neither publishes an intent nor carries the waiting one: it
// commits its own change alone, and the other writer after it.
func TestGroupNoGroupWriterCommitsAlone(t *testing.T) {
	s := mem.New()
	_, err := publish(t, commit.New(s), map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	r := roundWaiting(t, s, func(d *commit.Dataset) *commit.Tx {
		return partitionWith(t, d, "x/", map[string]string{"f": "x"}, commit.Rebase{NoGroup: true})
	})
	require.NoError(t, r.errX)
	require.NoError(t, r.errO)
	assert.Empty(t, r.published, "no intent, no marker")
	assert.Equal(t, 1, r.txX.Rebased())
	assert.Empty(t, readManifest(t, s, r.pX.Generation).Carried, "X carries nobody")
	assert.Empty(t, r.txX.CarriedBy())
	assert.Empty(t, r.txO.CarriedBy())
	assert.Equal(t, r.pX.Seq+1, r.pO.Seq, "O committed on its own, after X")
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "o/f": "o", "x/f": "x"}, contents(t, commit.New(s)))
}

// TestGroupRollbackWriterCommitsAlone: a writer that keeps the files of
// an older snapshot (KeepFrom, a rollback, under a pin of that snapshot)
// takes no part in group commit: the guards of its commit, the
// collector's floor against that snapshot and the pin that holds it, are
// checked against the value it writes and after its write, which no
// carrier does. Having lost its compare-and-swap, it rebases where
// another writer's intent waits, and commits alone: no intent, no one
// carried.
func TestGroupRollbackWriterCommitsAlone(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	target, err := d.OpenAt(ctx, "1")
	require.NoError(t, err)
	pin, err := target.Pin(ctx, time.Hour, "rollback")
	require.NoError(t, err)
	defer pin.Release(ctx) //nolint:errcheck // the test checks the commits
	// A commit that keeps the seed's object: the rollback references it
	// as the head does.
	add, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, add.KeepAll(ctx))
	require.NoError(t, add.PutBytes(ctx, "added", []byte("a")))
	_, err = add.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	r := roundWaiting(t, s, func(d *commit.Dataset) *commit.Tx {
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		tx.KeepFrom(target)
		tx.HoldPin(pin)
		require.NoError(t, tx.EnableRebase(commit.Rebase{}))
		return tx
	})
	require.NoError(t, r.errX)
	require.NoError(t, r.errO)
	assert.Empty(t, r.published, "no intent, no marker")
	assert.Equal(t, 1, r.txX.Rebased())
	assert.Empty(t, readManifest(t, s, r.pX.Generation).Carried, "X carries nobody")
	assert.Empty(t, r.txX.CarriedBy())
	assert.Empty(t, r.txO.CarriedBy())
	assert.Equal(t, r.pX.Seq+1, r.pO.Seq, "O committed on its own, after X")
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "o/f": "o"}, contents(t, d))
}

// followerRound sets up a round on V, the seed commit, in which W follows
// and learns its outcome by reading the pointer. Before W and C, both
// begun on V, commit, waiting writes an intent on V that sorts first, so
// both follow. C, after waiting, closes the round (its close is held
// until W's intent is there too) and carries it. W's intent PUT lands,
// but W hears back only once C's commit has landed: W then follows a
// round already carried, reads the pointer and settles its intent
// against C's commit.
func followerRound(t *testing.T, waiting func(s store.Store, v *pointer.Pointer, w *commit.Tx)) followed {
	t.Helper()
	ctx := context.Background()
	s := mem.New()
	fsC, fsW := faults.NewStore(s), faults.NewStore(s)
	_, err := publish(t, commit.New(s), map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	openHead(t, commit.New(s))
	v := readPointer(t, s)
	dC, dW := commit.New(fsC), commit.New(fsW)
	commit.MarkGrouped(dC) // both join the round on V at their first compare-and-swap
	commit.MarkGrouped(dW)
	txC := partition(t, dC, "c/", map[string]string{"f": "c"})
	txW := partition(t, dW, "w/", map[string]string{"f": "w"})
	waiting(s, v, txW)
	fsC.Add(faults.Rule{Op: store.OpList, Key: commit.IntentDir + v.WriteID + "/", Kind: faults.Latency, Times: 1, Then: func() {
		awaitIntents(t, s, v.WriteID, 3)
	}})
	fsW.Add(faults.Rule{Op: store.OpPut, Key: commit.IntentDir + v.WriteID + "/", Kind: faults.Held, Times: 1, Then: func() {
		deadline := time.Now().Add(time.Minute)
		for readPointer(t, s).WriteID == v.WriteID {
			require.True(t, time.Now().Before(deadline), "timed out waiting for C's commit")
			time.Sleep(time.Millisecond)
		}
	}})
	var pC *pointer.Pointer
	var errC error
	done := make(chan struct{})
	go func() {
		defer close(done)
		pC, errC = txC.Commit(ctx, commit.CommitOptions{})
	}()
	pW, errW := txW.Commit(ctx, commit.CommitOptions{})
	<-done
	require.NoError(t, errC)
	return followed{s: s, txW: txW, pW: pW, errW: errW, pC: pC}
}

// followed is what followerRound returns: the store, W's commit and C's.
type followed struct {
	s      store.Store
	txW    *commit.Tx
	pW, pC *pointer.Pointer
	errW   error
}

// TestGroupFollowerSettlesAsCarried: a writer that follows a round and
// finds, reading the pointer, that the commit after the value its intent
// is bound to carried it, committed: it returns that commit, names it in
// CarriedBy, and keeps its objects, which that commit references; it
// does not take the commit for a winner and lose to it.
func TestGroupFollowerSettlesAsCarried(t *testing.T) {
	r := followerRound(t, func(s store.Store, v *pointer.Pointer, _ *commit.Tx) {
		staleIntent(t, s, v.WriteID)
	})
	require.NoError(t, r.errW)
	assert.Equal(t, r.pC.Generation, r.txW.CarriedBy())
	assert.Equal(t, r.pC.Generation, r.pW.Generation)
	assert.Equal(t, []uint64{r.pC.Seq}, applications(chainOf(t, commit.New(r.s)), r.txW.Generation()))
	assert.Equal(t, map[string]string{"seed": "0", "c/f": "c", "w/f": "w"}, contents(t, commit.New(r.s)))
}

// TestGroupFollowerRefusesForgedCarriedClaim: a forged intent on V names
// W's Tx with another change than W's, and sorts before W's own: the
// carrier takes it (one intent per Tx). W, following the round, finds its
// Tx named as carried by a manifest without its change: it must not
// report success (I2), nor delete its objects (I1): its outcome is
// unknown.
func TestGroupFollowerRefusesForgedCarriedClaim(t *testing.T) {
	r := followerRound(t, func(s store.Store, v *pointer.Pointer, w *commit.Tx) {
		sum := sha256.Sum256([]byte("w"))
		e := &advEntry{Path: "elsewhere", Key: generation.DataKey(w.Generation(), "w/f"), Size: 1, SHA256: hex.EncodeToString(sum[:])} // W's object, at another path
		putIntent(t, s, staleIntentID, &advIntent{Format: 1, Generation: w.Generation(), Head: v.WriteID, Seq: v.Seq + 1,
			StagingStart: time.Now().UTC(), Reads: []advRead{{Path: "elsewhere", Set: e}}})
	})
	require.True(t, readManifest(t, r.s, r.pC.Generation).CarriedBy(r.txW.Generation()), "the carrier took the forged intent")
	require.ErrorIs(t, r.errW, commit.ErrCommitUnknown, "named as carried without its change: not a success")
	assert.Empty(t, r.txW.CarriedBy())
	assert.Contains(t, keysUnder(t, r.s, generation.Prefix(r.txW.Generation())), generation.DataKey(r.txW.Generation(), "w/f"), "nothing deleted")
	checkComplete(t, commit.New(r.s)) // I1
}

// intentLists counts the LISTs of commit.IntentDir a writer sends.
type intentLists struct {
	store.Store
	mu sync.Mutex
	n  int
}

func (s *intentLists) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	if strings.HasPrefix(req.Prefix, commit.IntentDir) {
		s.mu.Lock()
		s.n++
		s.mu.Unlock()
	}
	return s.Store.List(ctx, req)
}

// TestGroupWriterThatCannotJoinListsNoIntents: a writer with rebase that
// cannot take part in a round (Rebase.NoGroup, BaseSnapshot read, files
// kept from another snapshot) does not look for one before its
// compare-and-swap: the LIST of the intents would cost it a request for
// a round it may not join.
func TestGroupWriterThatCannotJoinListsNoIntents(t *testing.T) {
	ctx := context.Background()
	for name, prepare := range map[string]func(tx *commit.Tx, d *commit.Dataset) commit.Rebase{
		"no group": func(*commit.Tx, *commit.Dataset) commit.Rebase { return commit.Rebase{NoGroup: true} },
		"base snapshot": func(tx *commit.Tx, _ *commit.Dataset) commit.Rebase {
			_, err := tx.BaseSnapshot(ctx)
			require.NoError(t, err)
			return commit.Rebase{}
		},
		"kept from another snapshot": func(tx *commit.Tx, d *commit.Dataset) commit.Rebase {
			old, err := d.OpenAt(ctx, "1")
			require.NoError(t, err)
			tx.KeepFrom(old)
			return commit.Rebase{}
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := mem.New()
			d := commit.New(s)
			_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
			require.NoError(t, err)
			_, err = publish(t, d, map[string]string{"seed": "1"}, commit.CommitOptions{})
			require.NoError(t, err)
			openHead(t, d)
			staleIntent(t, s, readPointer(t, s).WriteID) // a round waits
			lists := &intentLists{Store: s}
			tx, err := commit.New(lists).Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.KeepAll(ctx))
			r := prepare(tx, commit.New(s))
			require.NoError(t, tx.PutBytes(ctx, "x", []byte("x")))
			require.NoError(t, tx.EnableRebase(r))
			_, err = tx.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
			assert.Zero(t, lists.n)
		})
	}
}

// TestGroupCarrierRefusesIntentOfNoGeneration: a forged intent that names
// no valid generation and only removes a file it claims to have read
// would make the carrier's manifest invalid (its carried list names a
// generation that is none): the carrier leaves it out and commits.
func TestGroupCarrierRefusesIntentOfNoGeneration(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	_, err := publish(t, d, map[string]string{"seed": "0", "gone": "g"}, commit.CommitOptions{})
	require.NoError(t, err)
	openHead(t, d)
	cur := readPointer(t, s)
	putIntent(t, s, staleIntentID, &advIntent{Format: 1, Generation: "not-a-generation", Head: cur.WriteID, Seq: cur.Seq + 1,
		StagingStart: time.Now().UTC(), Reads: []advRead{{Path: "gone", Base: headEntry(t, s, "gone")}}})
	tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Empty(t, readManifest(t, s, p.Generation).Carried)
	assert.Equal(t, map[string]string{"seed": "0", "gone": "g", "mine/f": "mine"}, contents(t, d))
}

// TestGroupWithdrawalKeepsCommitTime: a writer that withdraws its intent
// rewrites the pointer value unchanged, as a fence registration does, and
// keeps the time its generation was committed: the collector counts the
// grace of the generation it supersedes from that time, not from the
// rewrite.
func TestGroupWithdrawalKeepsCommitTime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := &advClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := mem.New(mem.WithClock(clock.Now))
	fs := faults.NewStore(s)
	d, direct := commit.New(fs), commit.New(s)
	_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
	var committedAt time.Time
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		commitOpen(t, direct, "theirs/", map[string]string{"f": "theirs"})
		_, attrs, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		committedAt = attrs.LastModified
	}})
	fs.Add(faults.Rule{Op: store.OpPut, Key: commit.IntentDir, Kind: faults.Held, Times: 1, Then: func() {
		clock.Advance(time.Hour)
		cancel()
	}})
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, context.Canceled)
	p, attrs, err := pointer.Read(context.Background(), s)
	require.NoError(t, err)
	require.True(t, attrs.LastModified.After(committedAt), "the value was rewritten an hour later")
	assert.True(t, p.CommittedAtServer(attrs.LastModified).Equal(committedAt), "committed at %s, not %s", committedAt, p.CommittedAtServer(attrs.LastModified))
}

// TestGroupCarriedOnDamagedChainIsUnknown: C carries O on V, and then the
// pointer is damaged: it names C's generation with a seq that C's
// manifest contradicts. O, settling its intent, walks the chain from that
// pointer back to V's seq + 1: a chain whose seqs disagree proves
// nothing, so O's outcome is unknown and it keeps its objects, which C's
// commit references. (Counting the walk's steps alone, O would take V's
// manifest for the commit after V, find itself not carried there, and
// delete its objects.)
func TestGroupCarriedOnDamagedChainIsUnknown(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fsO := faults.NewStore(s)
	dO, dC, direct := commit.New(fsO), commit.New(s), commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	openHead(t, direct)
	commit.MarkGrouped(dC) // it joins rounds from its first compare-and-swap
	txO := partition(t, dO, "o/", map[string]string{"f": "o"})
	var pC *pointer.Pointer
	groupHeld(t, s, fsO, direct, func() {
		txC := partition(t, dC, "c/", map[string]string{"f": "c"})
		var err error
		pC, err = txC.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		require.True(t, readManifest(t, s, pC.Generation).CarriedBy(txO.Generation()), "C carried O")
		p, attrs, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		p.Seq++
		_, err = pointer.Write(ctx, s, p, attrs.ETag)
		require.NoError(t, err)
	})
	_, errO := txO.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, errO, commit.ErrCommitUnknown)
	assert.Contains(t, errO.Error(), "its child expected")
	assert.Contains(t, keysUnder(t, s, generation.Prefix(txO.Generation())), generation.DataKey(txO.Generation(), "o/f"), "nothing deleted")
}

// TestGroupFencedWriterPublishesNoIntent: a writer whose lease's fence in
// its base is above its token, and which finds a round waiting there,
// fails with ErrFenced without publishing an intent: no carrier would
// take it, and a writer that cannot commit has nothing to ask others to
// commit.
func TestGroupFencedWriterPublishesNoIntent(t *testing.T) {
	ctx := context.Background()
	const lease = "mem://x/_lease/nightly"
	s := mem.New()
	direct := commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	openHead(t, direct)
	require.NoError(t, direct.RegisterFence(ctx, lease, 6))
	staleIntent(t, s, readPointer(t, s).WriteID) // a round waits
	via := &intentPuts{Store: s}
	tx := partition(t, commit.New(via), "x/", map[string]string{"f": "x"})
	_, err = tx.Commit(ctx, commit.CommitOptions{Fence: 5, FenceLease: lease})
	require.ErrorIs(t, err, commit.ErrFenced)
	assert.Empty(t, via.list(), "no intent, no marker")
	assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
}

// TestGroupCarriesAtMostMaxWriters: a commit carries at most 64 writers
// besides its own (docs/PROTOCOL.md, "Group commit"), those published
// first: with 66 valid intents waiting, the rest wait for the next round.
func TestGroupCarriesAtMostMaxWriters(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	openHead(t, d)
	commit.MarkGrouped(d) // it joins rounds from its first compare-and-swap
	cur := readPointer(t, s)
	var first []string
	for i := range 66 {
		g := newGen(t)
		path := fmt.Sprintf("w%02d/f", i)
		e := stageObject(t, s, g, path, path)
		putIntent(t, s, fmt.Sprintf("00000000-0000-7000-8000-%012d", i+1), &advIntent{Format: 1, Generation: g, Head: cur.WriteID, Seq: cur.Seq + 1,
			StagingStart: time.Now().UTC(), Reads: []advRead{{Path: path, Set: e}}})
		if i < 64 {
			first = append(first, g)
		}
	}
	tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	var carried []string
	for _, c := range readManifest(t, s, p.Generation).Carried {
		carried = append(carried, c.Generation)
	}
	assert.ElementsMatch(t, first, carried, "the 64 published first")
}
