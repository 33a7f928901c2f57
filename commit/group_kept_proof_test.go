package commit_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// Tests of the deferred proof of kept files: a writer with
// rebase (group commit possible) proves the files it keeps from its base
// untouched (KeepAll) only when it writes a manifest that takes them from
// its base (docs/PROTOCOL.md, "Group commit").

const staleIntentID = "00000000-0000-7000-8000-000000000000"

// staleIntent writes, under the pointer value whose write id is head, an
// intent no carrier takes (a writer that crashed, or whose intent PUT
// landed late): a Tx begun on that value joins the round as a follower.
func staleIntent(t *testing.T, s store.Store, head string) {
	t.Helper()
	putIntentBody(t, s, head, staleIntentID, []byte(`{"format":1}`))
}

// keptSetup gives s a seed commit and a commit of "p/f" (the file other
// writers keep), then opens the head to rounds, and returns a Dataset on
// s and the entry of "p/f".
func keptSetup(t *testing.T, s store.Store) (*commit.Dataset, generation.Entry) {
	t.Helper()
	ctx := context.Background()
	d := commit.New(s)
	_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	w := partition(t, d, "p/", map[string]string{"f": "p"})
	_, err = w.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	openHead(t, d)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	e, ok := snap.Manifest.Find("p/f")
	require.True(t, ok)
	return d, e
}

// damagedRound gives s the commits of keptSetup, deletes the object of
// "p/f" out of band (the head names a missing object), and leaves a round
// waiting on the head (a stale intent). It returns the head.
func damagedRound(t *testing.T, s store.Store) *pointer.Pointer {
	t.Helper()
	_, gone := keptSetup(t, s)
	require.NoError(t, s.Delete(context.Background(), gone.Key, store.DeleteOptions{}))
	head := readPointer(t, s)
	staleIntent(t, s, head.WriteID)
	return head
}

// collectNow runs the collector keeping only the current generation, with
// a one-hour orphan age (the Tx's fresh objects are never orphans).
func collectNow(t *testing.T, s store.Store) *gc.Report {
	t.Helper()
	rep, err := gc.Run(context.Background(), s, gc.Options{Keep: -1, Grace: -1, OrphanAge: time.Hour})
	require.NoError(t, err)
	return rep
}

// notNamed asserts that no generation of the current chain names an entry
// whose key lies under the Tx's generation, i.e. the Tx did not commit.
func notNamed(t *testing.T, d *commit.Dataset, tx *commit.Tx) {
	t.Helper()
	snap := checkComplete(t, d)
	for _, e := range snap.Files() {
		assert.NotEqual(t, generation.FromKey(e.Key), tx.Generation(), "the failed Tx's object %s is named", e.Key)
	}
}

// TestKeptFileCollectedUnderLoneWriterIsRefused: a KeepAll writer with rebase begins on B;
// another writer replaces "p/f" (C), and the collector removes the object
// of "p/f" that only B referenced. The writer commits alone (no round
// waits): its kept "p/f" is proven (late, now) and found gone. It must not
// commit B's dangling "p/f".
func TestKeptFileCollectedUnderLoneWriterIsRefused(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d, gone := keptSetup(t, s)
	tx := partition(t, d, "q/", map[string]string{"f": "q"})
	other := partition(t, commit.New(s), "p/", map[string]string{"f": "p2"})
	_, err := other.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	collectNow(t, s)
	_, err = s.Head(ctx, gone.Key)
	require.ErrorIs(t, err, store.ErrNotExist, "the collector removed B's p/f")

	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrMissingObject)
	require.ErrorAs(t, err, new(*commit.ConflictError), "the pointer moved past the base: lost")
	notNamed(t, d, tx)
	assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())), "nothing of the Tx is left")
}

// TestKeptFileCollectedUnderJoinerNeverCommitted: as above, but a round waits on B (an
// intent whose PUT landed late, after the collector's run): the writer
// joins as a follower without proving its kept "p/f", finds the pointer
// moved, and rebases. With one commit since B (C, readable) it rebases on
// C and takes C's "p/f"; with two (C, D) and C's manifest collected, it
// cannot tell whether C carried it. Either way the pointer stays complete
// and never names the object the collector removed. (Had it proven "p/f"
// up front, both would have failed there, as lost, resp. stale.)
func TestKeptFileCollectedUnderJoinerNeverCommitted(t *testing.T) {
	for _, commits := range []int{1, 2} {
		t.Run(map[int]string{1: "one commit since base", 2: "two commits since base"}[commits], func(t *testing.T) {
			ctx := context.Background()
			s := mem.New()
			d, gone := keptSetup(t, s)
			commit.MarkGrouped(d) // it joins the round on its base
			tx := partition(t, d, "q/", map[string]string{"f": "q"})
			base := tx.Base()
			for i := range commits {
				other := partition(t, commit.New(s), "p/", map[string]string{"f": "p" + string(rune('2'+i))})
				_, err := other.Commit(ctx, commit.CommitOptions{})
				require.NoError(t, err)
			}
			collectNow(t, s)
			_, err := s.Head(ctx, gone.Key)
			require.ErrorIs(t, err, store.ErrNotExist)
			staleIntent(t, s, base.WriteID)

			p, err := tx.Commit(ctx, commit.CommitOptions{})
			if commits == 1 {
				require.NoError(t, err)
				assert.Equal(t, readPointer(t, s).Generation, p.Generation)
				got := contents(t, d) // checkComplete: I1
				assert.Equal(t, "q", got["q/f"])
				assert.Equal(t, "p2", got["p/f"], "C's p/f, not B's")
				return
			}
			require.ErrorIs(t, err, commit.ErrCommitUnknown, "the manifest that would settle the intent is gone")
			notNamed(t, d, tx)
		})
	}
}

// TestKeptFileJoinerUnknownObjectsCollected: the joiner of the test above that ends
// with an unknown outcome leaves its objects; after the orphan age and one
// collector run they are gone (I7), and the pointer stays complete.
func TestKeptFileJoinerUnknownObjectsCollected(t *testing.T) {
	ctx := context.Background()
	clock := &advClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := mem.New(mem.WithClock(clock.Now))
	d, _ := keptSetup(t, s)
	commit.MarkGrouped(d) // it joins the round on its base
	tx := partition(t, d, "q/", map[string]string{"f": "q"})
	base := tx.Base()
	for i := range 2 {
		other := partition(t, commit.New(s), "p/", map[string]string{"f": "p" + string(rune('2'+i))})
		_, err := other.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
	}
	collectNow(t, s)
	staleIntent(t, s, base.WriteID)
	_, err := tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrCommitUnknown)
	notNamed(t, d, tx)
	clock.Advance(2 * time.Hour)
	collectNow(t, s)
	assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())), "I7: the Tx's objects are gone after the orphan age and one run")
	assert.Empty(t, keysUnder(t, s, commit.IntentDir), "I7: its intents too")
	checkComplete(t, d)
}

// rewriteDuringIntent makes the Tx's intent PUT (it joins a round) hold its
// response while rewrite changes the pointer without a commit (same
// generation, new write id): the Tx's first poll finds its intent dead and
// it rebases on the same generation.
func rewriteDuringIntent(fs *faults.Store, rewrite func()) {
	fs.Add(faults.Rule{Op: store.OpPut, Key: commit.IntentDir, Kind: faults.Held, Times: 1, Then: rewrite})
}

// TestKeptFileMissingAfterRewriteFailsMissingObject: the head names a kept file whose
// object is missing (damage the writers did not cause: the situation of
// TestGroupWriterProvesKeptFiles, which asserts that no writer then
// commits the dangling reference). A KeepAll writer with rebase joins a
// round (an intent waits on the head). While its intent PUT is in flight
// the pointer is rewritten without a commit, by an honest actor: a lease
// holder registering its fence, or the collector publishing its floor.
// The writer's intent is dead; it rebases on the same generation, whose
// keys a rebase does not prove again, and so never proves "p/f". It must
// fail with ErrMissingObject and leave the pointer on its generation, as
// when it commits alone or takes the round over, and not as lost: nobody
// won. (It committed the missing object before the rebase on a rewritten
// base proved the kept files.)
func TestKeptFileMissingAfterRewriteFailsMissingObject(t *testing.T) {
	rewrites := map[string]func(t *testing.T, s store.Store){
		"fence registration": func(t *testing.T, s store.Store) {
			require.NoError(t, commit.New(s).RegisterFence(context.Background(), "mem://x/_lease/l", 1))
		},
		"collector floor": func(t *testing.T, s store.Store) {
			rep := collectNow(t, s)
			require.NotEmpty(t, rep.Deleted, "the collector rewrote the pointer to publish its floor")
		},
	}
	for _, name := range []string{"fence registration", "collector floor"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := mem.New()
			before := damagedRound(t, s)
			fs := faults.NewStore(s)
			d := commit.New(fs)
			commit.MarkGrouped(d) // it joins the round on its base
			tx := partition(t, d, "q/", map[string]string{"f": "q"})
			rewrote := false
			rewriteDuringIntent(fs, func() { rewrites[name](t, s); rewrote = true })

			_, err := tx.Commit(ctx, commit.CommitOptions{})
			after := readPointer(t, s)
			require.True(t, rewrote, "the Tx joined the round and the pointer was rewritten meanwhile")
			require.ErrorIs(t, err, commit.ErrMissingObject, "a KeepAll writer committed over a missing kept object")
			assert.NotErrorIs(t, err, commit.ErrConflict, "nobody won")
			assert.Equal(t, before.Generation, after.Generation, "nothing committed")
		})
	}
}

// TestKeptFileJoinerRebasesOnCollectorRewrite: the same round, with nothing
// damaged: while the joiner's intent PUT is in flight, the collector runs
// (removing the superseded generations and an orphan, publishing its
// horizon and floor). The joiner rebases on the rewritten pointer and
// commits; the pointer is complete (I1), and nothing the collector
// removed is named.
func TestKeptFileJoinerRebasesOnCollectorRewrite(t *testing.T) {
	ctx := context.Background()
	clock := &advClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := mem.New(mem.WithClock(clock.Now))
	d, _ := keptSetup(t, s)
	orphan := newGen(t)
	stageObject(t, s, orphan, "x", "orphan")
	clock.Advance(2 * time.Hour)
	staleIntent(t, s, readPointer(t, s).WriteID)
	fs := faults.NewStore(s)
	dq := commit.New(fs)
	commit.MarkGrouped(dq) // it joins the round on its base
	tx := partition(t, dq, "q/", map[string]string{"f": "q"})
	var rep *gc.Report
	rewriteDuringIntent(fs, func() { rep = collectNow(t, s) })
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.NotNil(t, rep)
	assert.NotEmpty(t, rep.Deleted)
	assert.NotEmpty(t, rep.Orphans)
	assert.Equal(t, 1, tx.Rebased(), "the joiner's intent died with the rewrite; it rebased")
	assert.Equal(t, p.Generation, readPointer(t, s).Generation)
	assert.Equal(t, map[string]string{"seed": "0", "p/f": "p", "q/f": "q"}, contents(t, d))
	// One more run keeps it complete.
	collectNow(t, s)
	checkComplete(t, d)
}

// TestKeptFileMissingLeaderWithdraws: the head is damaged as above. A leader
// (it takes a round over) carries a joiner, then proves its kept files:
// "p/f" is gone, so it withdraws, and the joiner must not end up
// committing the dangling "p/f" either (it rebases on the withdrawn
// value). Neither commit may land over the missing object.
func TestKeptFileMissingLeaderWithdraws(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	before := damagedRound(t, s)
	fl := faults.NewStore(s)
	fj := faults.NewStore(s)
	leader := partition(t, commit.New(fl), "a/", map[string]string{"f": "a"})
	joiner := partition(t, commit.New(fj), "b/", map[string]string{"f": "b"})
	var (
		errJ    error
		jDone   = make(chan struct{})
		jPosted = make(chan struct{})
	)
	// The joiner publishes its intent first and then waits (its intent
	// PUT's response held) until the leader has finished: the leader, a
	// follower too, takes the round over and carries the joiner.
	lDone := make(chan struct{})
	fj.Add(faults.Rule{Op: store.OpPut, Key: commit.IntentDir, Kind: faults.Held, Times: 1, Then: func() {
		close(jPosted)
		<-lDone
	}})
	go func() {
		defer close(jDone)
		_, errJ = joiner.Commit(ctx, commit.CommitOptions{})
	}()
	select {
	case <-jPosted:
	case <-jDone: // the joiner stopped before publishing an intent
	}
	_, errL := leader.Commit(ctx, commit.CommitOptions{})
	close(lDone)
	<-jDone
	after := readPointer(t, s)
	assert.ErrorIs(t, errL, commit.ErrMissingObject)
	assert.ErrorIs(t, errJ, commit.ErrMissingObject, "the joiner committed over the missing kept object")
	assert.NotErrorIs(t, errJ, commit.ErrConflict, "nobody won")
	assert.Equal(t, before.Generation, after.Generation, "nothing committed")
}

// TestKeptFileTouchedProvenBeforeRound: files the Tx does not keep untouched from its
// base are still proven before anything is published, even when a round
// waits: a PutFile-reused file whose object is gone is uploaded again
// before the Tx joins, and a Tx that kept files from a snapshot
// (KeepFrom) or read its base (BaseSnapshot) fails with ErrMissingObject
// without publishing an intent or changing the pointer.
func TestKeptFileTouchedProvenBeforeRound(t *testing.T) {
	ctx := context.Background()
	t.Run("PutFile reuse", func(t *testing.T) {
		s := mem.New()
		d, gone := keptSetup(t, s)
		require.NoError(t, s.Delete(ctx, gone.Key, store.DeleteOptions{}))
		staleIntent(t, s, readPointer(t, s).WriteID)
		local := filepath.Join(t.TempDir(), "f")
		require.NoError(t, os.WriteFile(local, []byte("p"), 0o644))
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.KeepAll(ctx))
		require.NoError(t, tx.PutFile(ctx, "p/f", local))
		require.True(t, tx.Reuses("p/f"))
		require.NoError(t, tx.PutBytes(ctx, "q/f", []byte("q")))
		require.NoError(t, tx.EnableRebase(commit.Rebase{}))
		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		assert.Equal(t, 1, tx.Repaired())
		assert.Equal(t, "p", contents(t, d)["p/f"])
	})
	t.Run("KeepFrom", func(t *testing.T) {
		s := mem.New()
		d, gone := keptSetup(t, s)
		snap, err := d.Open(ctx)
		require.NoError(t, err)
		require.NoError(t, s.Delete(ctx, gone.Key, store.DeleteOptions{}))
		before := readPointer(t, s)
		staleIntent(t, s, before.WriteID)
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.KeepAll(ctx))
		tx.KeepFrom(snap)
		require.NoError(t, tx.PutBytes(ctx, "q/f", []byte("q")))
		require.NoError(t, tx.EnableRebase(commit.Rebase{}))
		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.ErrorIs(t, err, commit.ErrMissingObject)
		assert.Equal(t, before.WriteID, readPointer(t, s).WriteID, "nothing written to the pointer")
		assert.Equal(t, []string{commit.IntentDir + before.WriteID + "/" + staleIntentID}, keysUnder(t, s, commit.IntentDir), "no intent published")
	})
	t.Run("BaseSnapshot", func(t *testing.T) {
		s := mem.New()
		d, gone := keptSetup(t, s)
		require.NoError(t, s.Delete(ctx, gone.Key, store.DeleteOptions{}))
		before := readPointer(t, s)
		staleIntent(t, s, before.WriteID)
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.KeepAll(ctx))
		_, err = tx.BaseSnapshot(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.PutBytes(ctx, "q/f", []byte("q")))
		require.NoError(t, tx.EnableRebase(commit.Rebase{}))
		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.ErrorIs(t, err, commit.ErrMissingObject)
		assert.Equal(t, before.WriteID, readPointer(t, s).WriteID, "nothing written to the pointer")
		assert.Equal(t, []string{commit.IntentDir + before.WriteID + "/" + staleIntentID}, keysUnder(t, s, commit.IntentDir), "no intent published")
	})
}
