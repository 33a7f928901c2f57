package commit_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// earlyProofSetup publishes three files through a fault injector on a
// mem store with a controlled clock, changes the first locally, and
// stages the directory again with AddDir: the two unchanged files are
// reused and proven while the changed one uploads (ReuseProof). It
// returns the Tx, past its proof, and the keys it reuses.
func earlyProofSetup(t *testing.T, rebase bool) (s store.Store, fs *faults.Store, direct *commit.Dataset, tx *commit.Tx, reused []string) {
	t.Helper()
	ctx := context.Background()
	clock := &advClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	s = mem.New(mem.WithClock(clock.Now))
	fs = faults.NewStore(s)
	d := commit.New(fs, commit.WithConcurrency(4))
	direct = commit.New(s)
	dir := writeFiles(t, 3, "1")
	_, base := putDir(t, d, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d", "0000"), []byte("changed"), 0o644))

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	if rebase {
		require.NoError(t, tx.EnableRebase(commit.Rebase{}))
	}
	require.NoError(t, tx.AddDir(ctx, dir))
	require.Equal(t, 2, tx.Reused(), "files reused")
	for _, e := range tx.Entries() {
		if !strings.HasPrefix(e.Key, generation.Prefix(tx.Generation())) {
			require.True(t, strings.HasPrefix(e.Key, generation.Prefix(base.Generation)), "reused key %s", e.Key)
			reused = append(reused, e.Key)
		}
	}
	require.Len(t, reused, 2)
	return s, fs, direct, tx, reused
}

// replaceReused commits, as another writer, new content for the two files
// tx reuses, and runs the collector keeping only the current generation:
// the base is superseded, and the objects tx proved are deleted.
func replaceReused(t *testing.T, s store.Store, direct *commit.Dataset, reused []string) {
	t.Helper()
	ctx := context.Background()
	other, err := direct.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, other.KeepAll(ctx))
	require.NoError(t, other.PutBytes(ctx, "d/0001", []byte("theirs 1")))
	require.NoError(t, other.PutBytes(ctx, "d/0002", []byte("theirs 2")))
	_, err = other.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	advCollect(t, s)
	for _, key := range reused {
		_, err := s.Head(ctx, key)
		require.ErrorIs(t, err, store.ErrNotExist, "the collector deleted the proven object %s", key)
	}
}

// TestEarlyProofThenCollectionBeforeCASDoesNotLand: the reused objects are
// proven while the changed file uploads; then, with the pointer write held
// (after the manifest PUT), another writer replaces the reused files and
// the collector, keeping nothing but the current generation, deletes the
// objects the proof found. The pointer write, conditioned on the base,
// must lose: the proof's result holds at the compare-and-swap only because
// the base is still the current generation there (X3, X4), not because
// of when the proof ran. The pointer keeps naming a complete generation
// (I1).
func TestEarlyProofThenCollectionBeforeCASDoesNotLand(t *testing.T) {
	ctx := context.Background()
	s, fs, direct, tx, reused := earlyProofSetup(t, false)
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		replaceReused(t, s, direct, reused)
	}})
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	var ce *commit.ConflictError
	require.ErrorAs(t, err, &ce, "the commit must lose, got pointer %+v", p)
	got := readPointer(t, s)
	require.NotEqual(t, tx.Generation(), got.Generation)
	checkComplete(t, direct)
}

// TestEarlyProofThenCollectionRebaseLosesOnOverlap: as above with a Tx
// that rebases, and the collection between the proof (in AddDir) and
// Commit. Commit trusts the early proof and does not prove again; the
// rebase finds the head changed the reused paths and loses (R2), so no
// manifest naming the deleted objects is ever pointed to.
func TestEarlyProofThenCollectionRebaseLosesOnOverlap(t *testing.T) {
	ctx := context.Background()
	s, _, direct, tx, reused := earlyProofSetup(t, true)
	replaceReused(t, s, direct, reused)
	_, err := tx.Commit(ctx, commit.CommitOptions{})
	var ce *commit.ConflictError
	require.ErrorAs(t, err, &ce)
	require.NotEmpty(t, ce.Overlap, "lost on the reused paths")
	require.NotEqual(t, tx.Generation(), readPointer(t, s).Generation)
	checkComplete(t, direct)
}

// TestEarlyProofThenCollectionRebaseKeepsSharedObjects: the other writer
// changes a path the Tx never read; the collector, keeping only the new
// head, keeps the objects the Tx proved, since the head references them
// too (X4). The rebase lands and the generation it names is complete.
func TestEarlyProofThenCollectionRebaseKeepsSharedObjects(t *testing.T) {
	ctx := context.Background()
	s, _, direct, tx, reused := earlyProofSetup(t, true)
	other, err := direct.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, other.KeepAll(ctx))
	require.NoError(t, other.PutBytes(ctx, "theirs", []byte("t")))
	_, err = other.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	advCollect(t, s)
	for _, key := range reused {
		_, err := s.Head(ctx, key)
		require.NoError(t, err, "the head references %s", key)
	}
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, tx.Rebased())
	snap := checkComplete(t, direct)
	b, err := snap.ReadFile(ctx, "theirs")
	require.NoError(t, err)
	require.Equal(t, "t", string(b), "the head's file is kept")
	_, err = snap.ReadFile(ctx, "d/0001")
	require.NoError(t, err, "the reused file is in the rebased generation")
}

// TestEarlyProofErrorReachesAddDir: a proof whose listing fails makes
// AddDir fail with it (it is not lost in the goroutine), even though every
// upload succeeded.
func TestEarlyProofErrorReachesAddDir(t *testing.T) {
	ctx := context.Background()
	fs := faults.NewStore(mem.New())
	d := commit.New(fs, commit.WithConcurrency(4), commit.WithRetry(commit.Retry{Base: time.Millisecond, Max: time.Millisecond}))
	dir := writeFiles(t, 3, "1")
	_, base := putDir(t, d, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d", "0000"), []byte("changed"), 0o644))
	denied := errors.New("listing denied")
	fs.Add(faults.Rule{Op: store.OpList, Key: generation.Prefix(base.Generation), Kind: faults.Refused, Err: denied})
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	err = tx.AddDir(ctx, dir)
	require.ErrorIs(t, err, denied)
	require.NoError(t, tx.Discard(ctx))
}

// TestEarlyProofDoneWhenAddDirFails: an upload of the batch fails after
// every file was decided, so the proof starts; AddDir returns only once
// the proof's requests are answered (no goroutine of the Tx outlives the
// call), with the upload's error.
func TestEarlyProofDoneWhenAddDirFails(t *testing.T) {
	ctx := context.Background()
	fs := faults.NewStore(mem.New())
	l := &orderLog{Store: fs, proofLatency: 200 * time.Millisecond}
	d := commit.New(l, commit.WithConcurrency(4), commit.WithRetry(commit.Retry{Base: time.Millisecond, Max: time.Millisecond}))
	dir := writeFiles(t, 3, "1")
	putDir(t, d, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d", "0000"), []byte("changed"), 0o644))
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	fs.Add(faults.Rule{Op: store.OpPut, Key: generation.Prefix(tx.Generation()), Kind: faults.Refused})
	l.reset()
	err = tx.AddDir(ctx, dir)
	require.ErrorIs(t, err, faults.ErrInjected)
	l.mu.Lock()
	open := 0
	proofs := 0
	for _, e := range l.events {
		if e.op == store.OpList || e.op == store.OpHead {
			if e.end {
				open--
			} else {
				open++
				proofs++
			}
		}
	}
	timeline := l.timeline()
	l.mu.Unlock()
	require.Positive(t, proofs, "the proof started\n%s", timeline)
	require.Zero(t, open, "proof requests still under way after AddDir returned\n%s", timeline)
	require.NoError(t, tx.Discard(ctx))
}

// TestEarlyProofRepairsWhileUploading: a reused object that is gone
// before the proof is uploaded again by the early proof itself, alongside
// the batch's other uploads; Commit proves nothing again, and the
// generation it commits is complete (I1).
func TestEarlyProofRepairsWhileUploading(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	l := &orderLog{Store: s}
	d := commit.New(l, commit.WithConcurrency(4))
	dir := writeFiles(t, 3, "1")
	_, base := putDir(t, d, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d", "0000"), []byte("changed"), 0o644))
	snap, err := d.OpenPointer(ctx, base)
	require.NoError(t, err)
	var lost string
	for _, e := range snap.Files() {
		if e.Path == "d/0001" {
			lost = e.Key
		}
	}
	require.NotEmpty(t, lost)
	require.NoError(t, s.Delete(ctx, lost, store.DeleteOptions{}))

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.AddDir(ctx, dir))
	require.Equal(t, 1, tx.Repaired(), "repaired by the proof in AddDir")
	require.Equal(t, 1, tx.Reused())
	l.reset()
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	l.mu.Lock()
	for _, e := range l.events {
		require.False(t, e.op == store.OpList || e.op == store.OpHead, "Commit proved again: %s %s\n%s", e.op, e.key, l.timeline())
	}
	l.mu.Unlock()
	checkComplete(t, d)
}

// TestEarlyProofNotForAReuseOnlyBatch: a batch that only reuses may turn
// out to change nothing (and a put then discards it), so AddDir does not
// prove it; Commit does, in one listing.
func TestEarlyProofNotForAReuseOnlyBatch(t *testing.T) {
	for _, ahead := range []bool{false, true} {
		name := "Begin"
		if ahead {
			name = "BeginAhead"
		}
		t.Run(name, func(t *testing.T) { testEarlyProofNotForAReuseOnlyBatch(t, ahead) })
	}
}

// On a Tx of BeginAhead the files match the expected manifest, and report
// it before the base is read: still no proof.
func testEarlyProofNotForAReuseOnlyBatch(t *testing.T, ahead bool) {
	ctx := context.Background()
	l := &orderLog{Store: mem.New()}
	cache := t.TempDir()
	d := commit.New(l, commit.WithConcurrency(4), commit.WithManifestCache(cache))
	dir := writeFiles(t, 3, "1")
	_, base := putDir(t, d, dir)
	var tx *commit.Tx
	var err error
	if ahead {
		tx, err = commit.New(l, commit.WithConcurrency(4), commit.WithManifestCache(cache)).BeginAhead(ctx, base.ManifestSHA256)
	} else {
		tx, err = d.Begin(ctx)
	}
	require.NoError(t, err)
	require.NoError(t, tx.WaitBase(ctx))
	l.reset()
	require.NoError(t, tx.AddDir(ctx, dir))
	require.Equal(t, 3, tx.Reused())
	proofs := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := 0
		for _, e := range l.events {
			if !e.end && (e.op == store.OpList || e.op == store.OpHead) {
				n++
			}
		}
		return n
	}
	require.Zero(t, proofs(), "AddDir proved a batch that only reuses\n%s", l.timeline())
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, proofs(), "Commit proves the reused files\n%s", l.timeline())
	checkComplete(t, d)
}

// TestReuseProofWaitAgainReturnsItsResult: a second Wait on a proof that
// ran returns the same result instead of blocking.
func TestReuseProofWaitAgainReturnsItsResult(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	_, err := publish(t, d, map[string]string{"a": "1", "b": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a"), []byte("1"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b"), []byte("changed"), 0o644))
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	proof := tx.NewReuseProof(ctx, 2)
	require.NoError(t, tx.PutFile(ctx, "a", filepath.Join(dir, "a"), proof.Option()))
	require.NoError(t, tx.PutFile(ctx, "b", filepath.Join(dir, "b"), proof.Option()))
	require.Equal(t, 1, tx.Reused())
	require.NoError(t, proof.Wait())
	again := make(chan error, 1)
	go func() { again <- proof.Wait() }()
	select {
	case err := <-again:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("a second Wait on a proof that ran blocks")
	}
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
}
