package commit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/faultstore"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// aheadSetup seeds a dataset on s and begins C, a partition writer of
// "c/" whose requests go through fsC (wrapped by wrap, when given);
// direct writes to s as another process.
func aheadSetup(t *testing.T, s store.Store, wrap func(store.Store) store.Store) (fsC *faultstore.Store, direct *commit.Dataset, txC *commit.Tx) {
	t.Helper()
	fsC = faultstore.New(s)
	var through store.Store = fsC
	if wrap != nil {
		through = wrap(fsC)
	}
	direct = commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	return fsC, direct, partition(t, commit.New(through), "c/", map[string]string{"f": "c"})
}

// closedRound sets up a closed round: C (through fsC) loses its first
// compare-and-swap to "theirs/", rebases on V, leads the round there and
// closes it, announcing W, the write id of its compare-and-swap on V.
// That compare-and-swap is held while then runs with V and W.
func closedRound(t *testing.T, s store.Store, fsC *faultstore.Store, direct *commit.Dataset, then func(v *pointer.Pointer, w string)) {
	t.Helper()
	loseFirstCAS(t, fsC, direct, func() {
		fsC.Add(faultstore.Rule{Op: store.OpPut, Key: pointer.Key, Mode: faultstore.HoldRequest, Times: 1, Then: func() {
			v := readPointer(t, s)
			var w string
			for _, k := range keysUnder(t, s, commit.IntentDir+v.WriteID+"/") {
				if id, ok := strings.CutPrefix(k, commit.IntentDir+v.WriteID+"/"+commit.IntentClose); ok {
					w = id
				}
			}
			require.NotEmpty(t, w, "C closed its round on V")
			then(v, w)
		}})
	})
}

// intentsOn returns the intents bound to the pointer value with write id
// head, markers left out.
func intentsOn(t *testing.T, s store.Store, head string) []string {
	t.Helper()
	var out []string
	for _, k := range keysUnder(t, s, commit.IntentDir+head+"/") {
		if !strings.HasPrefix(k, commit.IntentDir+head+"/"+commit.IntentClose) {
			out = append(out, k)
		}
	}
	return out
}

// awaitIntents waits until n intents are bound to the value with write
// id head.
func awaitIntents(t *testing.T, s store.Store, head string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for len(intentsOn(t, s, head)) < n {
		require.True(t, time.Now().Before(deadline), "timed out waiting for %d intents on %s", n, head)
		time.Sleep(time.Millisecond)
	}
}

// TestGroupAheadCarried: writers that find a round closed (its carrier's
// compare-and-swap on V announced and in flight) bind their intents to the
// value announced, W, before it exists; once W lands, the first of them
// carries the others in the commit after it. C's own write lands with
// the write id it announced.
func TestGroupAheadCarried(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		fsC, direct, txC := aheadSetup(t, s, nil)
		var txs [2]*commit.Tx
		var ps [2]*pointer.Pointer
		var errs [2]error
		done := make(chan struct{})
		var announced string
		closedRound(t, s, fsC, direct, func(v *pointer.Pointer, w string) {
			announced = w
			for i, prefix := range []string{"x/", "y/"} {
				txs[i] = partition(t, commit.New(s), prefix, map[string]string{"f": prefix})
			}
			go func() {
				defer close(done)
				finished := make(chan int)
				for i := range txs {
					go func() {
						ps[i], errs[i] = txs[i].Commit(ctx, commit.CommitOptions{})
						finished <- i
					}()
				}
				<-finished
				<-finished
			}()
			awaitIntents(t, s, w, 2)
			assert.Len(t, intentsOn(t, s, v.WriteID), 1, "nobody joined the closed round but C")
		})
		pC, err := txC.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		assert.Equal(t, announced, pC.WriteID, "C's write carries the id it announced")
		waitFor(t, done, "the writers bound ahead")
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		assert.Equal(t, pC.Seq+1, ps[0].Seq)
		assert.Equal(t, ps[0].Generation, ps[1].Generation, "one commit holds both")
		assert.Equal(t, pC.Generation, ps[0].Parent)
		assert.Len(t, readManifest(t, s, ps[0].Generation).Carried, 1)
		assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "c/f": "c", "x/f": "x/", "y/f": "y/"}, contents(t, direct))
		// C led its round open, and dropped its marker; the round on W was
		// led ahead, and the last of the burst: its marker is left to the
		// collector.
		assert.Equal(t, []string{commit.IntentDir + pC.WriteID + "/" + commit.IntentClose + readPointer(t, s).WriteID}, keysUnder(t, s, commit.IntentDir), "no intent left behind, and only the marker of the round led ahead")
	})
}

// aheadLeader runs a round led ahead: C carries the round on V,
// announcing W, while X binds its intent to W; once W lands, X leads the
// round on W, closes it and sends its compare-and-swap (with optsX), which is held
// while held runs with W (and the dataset of direct writes). It returns
// that dataset, C's commit and X's outcome.
func aheadLeader(t *testing.T, s store.Store, optsX commit.CommitOptions, held func(w string, direct *commit.Dataset)) (direct *commit.Dataset, pC, pX *pointer.Pointer, errX error) {
	t.Helper()
	ctx := context.Background()
	fsC, direct, txC := aheadSetup(t, s, nil)
	fsX := faultstore.New(s)
	done := make(chan struct{})
	closedRound(t, s, fsC, direct, func(v *pointer.Pointer, w string) {
		txX := partition(t, commit.New(fsX), "x/", map[string]string{"f": "x"})
		fsX.Add(faultstore.Rule{Op: store.OpPut, Key: pointer.Key, Mode: faultstore.HoldRequest, Times: 1, Then: func() {
			// W has landed, and X closed the round on it.
			require.Equal(t, w, readPointer(t, s).WriteID)
			held(w, direct)
		}})
		go func() {
			defer close(done)
			pX, errX = txX.Commit(ctx, optsX)
		}()
		awaitIntents(t, s, w, 1)
	})
	pC, err := txC.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	waitFor(t, done, "X, bound ahead")
	return direct, pC, pX, errX
}

// TestGroupFreshCarrierDeletesMarker: S follows the marker kept on W to
// W2 (X's commit) and binds its intent there, through that marker; it
// leaves the marker to its carrier with its intent. Its carrier is T, a
// fresh process begun on W2 that finds S's intent and carries the round
// while S's close is held: T was bound through no marker, but the LIST
// that found its round showed the marker announcing W2, and T deletes it
// with S's intent. Nothing is left under _intent/ (from the adversary
// review of this round).
func TestGroupFreshCarrierDeletesMarker(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		fsS := faultstore.New(s)
		var txS *commit.Tx
		direct, pC, pX, errX := aheadLeader(t, s, commit.CommitOptions{}, func(string, *commit.Dataset) {
			txS = partition(t, commit.New(fsS), "s/", map[string]string{"f": "s"})
		})
		require.NoError(t, errX)
		require.Equal(t, pC.Seq+1, pX.Seq)
		var pT *pointer.Pointer
		fsS.Add(faultstore.Rule{Op: store.OpPut, Key: commit.IntentDir + pX.WriteID + "/" + commit.IntentClose, Mode: faultstore.HoldRequest, Times: 1, Then: func() {
			txT := partition(t, commit.New(s), "t/", map[string]string{"f": "t"})
			var err error
			pT, err = txT.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
		}})
		pS, err := txS.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		require.NotNil(t, pT)
		assert.Equal(t, pT.Generation, txS.CarriedBy(), "S carried by T")
		assert.Equal(t, pT.Seq, pS.Seq)
		assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "c/f": "c", "x/f": "x", "s/f": "s", "t/f": "t"}, contents(t, direct))
		assert.Empty(t, keysUnder(t, s, commit.IntentDir), "nothing left under _intent/ (the marker S went through: %s)", commit.IntentDir+pC.WriteID+"/"+commit.IntentClose+pX.WriteID)
	})
}

// TestGroupStaleWriterFollowsKeptMarker: S begins on W, and commits after
// the round on W, which X led ahead, has landed W2. The marker that
// closed W's round is kept past X's commit: S finds it, binds its intent
// to W2 and carries the round there. It publishes nothing on W, which no
// commit can carry any more, and sends one compare-and-swap, on W2. The
// marker S went through is deleted with its intent; its own, the last
// of the burst, is left.
func TestGroupStaleWriterFollowsKeptMarker(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		putsS := &putKeys{Store: s}
		var txS *commit.Tx
		direct, pC, pX, errX := aheadLeader(t, s, commit.CommitOptions{}, func(string, *commit.Dataset) {
			txS = partition(t, commit.New(putsS), "s/", map[string]string{"f": "s"})
		})
		require.NoError(t, errX)
		require.NotNil(t, txS)
		require.Equal(t, pC.Seq+1, pX.Seq)
		putsS.reset()
		pS, err := txS.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		assert.Equal(t, pX.Seq+1, pS.Seq)
		var pointerPuts, onW, onW2 int
		for _, k := range putsS.list() {
			switch {
			case k == pointer.Key:
				pointerPuts++
			case strings.HasPrefix(k, commit.IntentDir+pC.WriteID+"/"):
				onW++
			case strings.HasPrefix(k, commit.IntentDir+pX.WriteID+"/") && !strings.Contains(k, "/"+commit.IntentClose):
				onW2++
			}
		}
		assert.Equal(t, 1, pointerPuts, "one compare-and-swap, on W2")
		assert.Zero(t, onW, "nothing published on W")
		assert.Equal(t, 1, onW2, "S's intent is bound to W2")
		assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "c/f": "c", "x/f": "x", "s/f": "s"}, contents(t, direct))
		assert.Equal(t, []string{commit.IntentDir + pX.WriteID + "/" + commit.IntentClose + pS.WriteID}, keysUnder(t, s, commit.IntentDir), "W's marker deleted by S, which went through it; S's own left")
	})
}

// TestGroupUnlandedMarkerDropped: X leads the round on W ahead and
// announces W2, but W is rewritten (a fence registration) before X's
// compare-and-swap: W2 can never land, and X lands with a fresh id. X
// deletes the marker announcing W2, which would only send later writers
// to a value that cannot come.
func TestGroupUnlandedMarkerDropped(t *testing.T) {
	s := mem.New()
	var announced string
	direct, _, pX, errX := aheadLeader(t, s, commit.CommitOptions{}, func(w string, direct *commit.Dataset) {
		for _, k := range keysUnder(t, s, commit.IntentDir+w+"/") {
			if id, ok := strings.CutPrefix(k, commit.IntentDir+w+"/"+commit.IntentClose); ok {
				announced = id
			}
		}
		require.NoError(t, direct.RegisterFence(context.Background(), "mem://x/_lease/other", 1))
	})
	require.NoError(t, errX)
	require.NotEmpty(t, announced, "X closed the round on W")
	assert.NotEqual(t, announced, pX.WriteID)
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "c/f": "c", "x/f": "x"}, contents(t, direct))
	assert.Empty(t, keysUnder(t, s, commit.IntentDir), "no intent or marker left behind")
}

// TestGroupStaleLoserLeavesHead (found by an adversary review): S begins
// on W and changes x/, as X's round on W did; it follows W's kept marker
// to W2, X's commit, finds its intent first there, and leads. Its rebase
// on W2 finds the overlap, and S loses. Its intent on W2 is dead already
// (no carrier on W2 takes an intent whose base W2 changed), so S must not
// rewrite W2, another writer's commit, to withdraw it: a round under way
// on W2 would fail its compare-and-swap for nothing.
func TestGroupStaleLoserLeavesHead(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	var txS *commit.Tx
	direct, _, pX, errX := aheadLeader(t, s, commit.CommitOptions{}, func(_ string, _ *commit.Dataset) {
		txS = partition(t, commit.New(s), "x/", map[string]string{"f": "s"})
	})
	require.NoError(t, errX)
	_, err := txS.Commit(ctx, commit.CommitOptions{})
	var ce *commit.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Overlap, "x/f")
	assert.Equal(t, pX.WriteID, readPointer(t, s).WriteID, "W2 left as it is")
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "c/f": "c", "x/f": "x"}, contents(t, direct))
}

// TestGroupStaleFencedLeavesHead (found by an adversary review): X's
// commit W2 registers token 2 of a lease; S, holding token 1 of it, began
// on W and follows W's kept marker to W2. Its guard refuses it there
// (fenced), and so would every carrier on W2: S must fail without writing
// the pointer, which a writer with a lower token may never change (I6).
func TestGroupStaleFencedLeavesHead(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	const lease = "mem://x/_lease/job"
	var txS *commit.Tx
	_, _, pX, errX := aheadLeader(t, s, commit.CommitOptions{Fence: 2, FenceLease: lease}, func(_ string, _ *commit.Dataset) {
		txS = partition(t, commit.New(s), "s/", map[string]string{"f": "s"})
	})
	require.NoError(t, errX)
	require.Equal(t, uint64(2), readPointer(t, s).FenceOf(lease))
	_, err := txS.Commit(ctx, commit.CommitOptions{Fence: 1, FenceLease: lease})
	require.ErrorIs(t, err, commit.ErrFenced)
	assert.Equal(t, pX.WriteID, readPointer(t, s).WriteID, "the pointer is not written with a lower token")
}

// putKeys records the key of each PUT through it, and of each DeleteMany.
type putKeys struct {
	store.Store
	mu   sync.Mutex
	keys []string
	dels []string
}

func (s *putKeys) DeleteMany(ctx context.Context, keys []string) error {
	s.mu.Lock()
	s.dels = append(s.dels, keys...)
	s.mu.Unlock()
	return s.Store.DeleteMany(ctx, keys)
}

func (s *putKeys) deletes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.dels)
}

func (s *putKeys) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	return s.Store.Put(ctx, key, body, opts)
}

func (s *putKeys) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = nil
}

func (s *putKeys) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.keys)
}

// TestGroupAnnouncedWriteIDOnce: the write id a carrier announced names
// its first compare-and-swap, on the value its round is bound to, and no
// other write. C's first write fails on V rewritten (a fence
// registration): C sends again on the new value, with a fresh id. Were
// the announced id sent again, the value announced would exist after
// all, built on another value, after the writers bound to it saw that
// value and settled their intents as dead.
func TestGroupAnnouncedWriteIDOnce(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fsC, direct, txC := aheadSetup(t, s, nil)
	var announced string
	closedRound(t, s, fsC, direct, func(_ *pointer.Pointer, w string) {
		announced = w
		require.NoError(t, direct.RegisterFence(ctx, "mem://x/_lease/other", 1))
	})
	pC, err := txC.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, announced, pC.WriteID)
	assert.NotEqual(t, announced, readPointer(t, s).WriteID)
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "c/f": "c"}, contents(t, direct))
}

// TestGroupAheadWithdrawn: a writer whose intent is bound ahead to W, the
// value C announced, is cancelled while C's compare-and-swap on V is in
// flight. It must withdraw the intent by rewriting V, on which C's write
// is conditioned, before it deletes anything: then W is never written and
// nothing can carry the intent, even though its deletes fail and the
// intent stays. Were it taken as dead while V is current, C's write would
// land as W, and the next writer, finding the intent on W, would carry a
// change whose writer was told it failed (I2).
func TestGroupAheadWithdrawn(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fsC, direct, txC := aheadSetup(t, s, nil)
	fsX := faultstore.New(s)
	dX := commit.New(fsX)
	fsX.Add(faultstore.Rule{Op: store.OpDeleteMany, Mode: faultstore.Before})
	fsX.Add(faultstore.Rule{Op: store.OpDelete, Mode: faultstore.Before})
	var txX *commit.Tx
	var errX error
	closedRound(t, s, fsC, direct, func(v *pointer.Pointer, w string) {
		txX = partition(t, dX, "x/", map[string]string{"f": "x"})
		xctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, errX = txX.Commit(xctx, commit.CommitOptions{})
		}()
		awaitIntents(t, s, w, 1)
		cancel()
		waitFor(t, done, "the cancelled writer")
		assert.Equal(t, v.Seq, readPointer(t, s).Seq)
		assert.NotEqual(t, v.WriteID, readPointer(t, s).WriteID, "V rewritten")
	})
	_, err := txC.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.ErrorIs(t, errX, context.Canceled)
	require.NotErrorIs(t, errX, commit.ErrCommitUnknown)
	// A fresh writer on the head carries whatever waits there.
	_, err = partition(t, commit.New(s), "y/", map[string]string{"f": "y"}).Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Empty(t, applications(chainOf(t, direct), txX.Generation()), "X never applied")
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "c/f": "c", "y/f": "y"}, contents(t, direct))
}

// TestGroupAheadCarrierPaused: the carrier of a closed round is paused
// before its compare-and-swap and does not come back. A writer bound
// ahead to the value it announced waits a bounded time, then withdraws
// its intent (rewriting V) and commits on its own; C, back, rebases and
// commits after it.
func TestGroupAheadCarrierPaused(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fsC, direct, txC := aheadSetup(t, s, nil)
	var pX *pointer.Pointer
	closedRound(t, s, fsC, direct, func(v *pointer.Pointer, w string) {
		txX := partition(t, commit.New(s), "x/", map[string]string{"f": "x"})
		done := make(chan struct{})
		var errX error
		go func() {
			defer close(done)
			pX, errX = txX.Commit(ctx, commit.CommitOptions{})
		}()
		if waitFor(t, done, "the writer bound ahead") {
			require.NoError(t, errX)
			assert.Equal(t, v.Seq+1, pX.Seq, "X committed on its own after the withdrawal")
		}
	})
	pC, err := txC.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.NotNil(t, pX)
	assert.Equal(t, pX.Seq+1, pC.Seq, "C rebased on X")
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "c/f": "c", "x/f": "x"}, contents(t, direct))
}

// sniffPointer calls hook with the write id of the next pointer write
// through it, before that write is sent.
type sniffPointer struct {
	store.Store
	mu   sync.Mutex
	hook func(writeID string)
}

func (s *sniffPointer) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	s.mu.Lock()
	hook := s.hook
	if key == pointer.Key {
		s.hook = nil
	}
	s.mu.Unlock()
	if key != pointer.Key || hook == nil {
		return s.Store.Put(ctx, key, body, opts)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return store.Attrs{}, err
	}
	var p struct {
		WriteID string `json:"write_id"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return store.Attrs{}, err
	}
	hook(p.WriteID)
	return s.Store.Put(ctx, key, bytes.NewReader(b), opts)
}

// pointerReads signals read each time the pointer is read through it,
// once armed.
type pointerReads struct {
	store.Store
	mu   sync.Mutex
	read chan struct{}
}

func (r *pointerReads) arm() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.read = make(chan struct{})
	return r.read
}

func (r *pointerReads) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	rc, attrs, err := r.Store.Get(ctx, key)
	r.mu.Lock()
	if key == pointer.Key && r.read != nil {
		close(r.read)
		r.read = nil
	}
	r.mu.Unlock()
	return rc, attrs, err
}

// TestGroupAheadForgedMarker (found by an adversary review): X begins on
// U, which a fence registration then rewrites into V (same seq). C carries
// the round on V, announcing W, but its marker is lost; a marker forged
// under U names W. X binds ahead to W from U, and then finds V, before W
// lands. W is
// conditioned on V, not U, so X's intent is not dead: X must keep waiting
// (and withdraw by rewriting the value at that seq), not take it for dead
// and round again. Taken for dead, the intent stayed, W landed, a fresh
// writer on W carried it, and X, reporting a lost race, deleted objects
// that commit references (I1, I2).
func TestGroupAheadForgedMarker(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	var sniff *sniffPointer
	fsC, direct, txC := aheadSetup(t, s, func(fs store.Store) store.Store {
		sniff = &sniffPointer{Store: fs}
		return sniff
	})
	fsX := faultstore.New(s)
	reads := &pointerReads{Store: fsX}
	dX := commit.New(reads)
	var txX *commit.Tx
	var errX error
	doneX, releaseX := make(chan struct{}), make(chan struct{})
	loseFirstCAS(t, fsC, direct, func() {
		u := readPointer(t, s)
		txX = partition(t, dX, "x/", map[string]string{"f": "x"})
		require.NoError(t, direct.RegisterFence(ctx, "mem://x/_lease/other", 1))
		v := readPointer(t, s)
		// An intent of X's on V (it rounds there once it takes its
		// intent for dead) waits until the end.
		fsX.Add(faultstore.Rule{Op: store.OpPut, Key: commit.IntentDir + v.WriteID + "/", Mode: faultstore.HoldRequest, Times: 1, Then: func() { <-releaseX }})
		fsC.Add(faultstore.Rule{Op: store.OpPut, Key: commit.IntentDir + v.WriteID + "/" + commit.IntentClose, Mode: faultstore.Before})
		sniff.mu.Lock()
		sniff.hook = func(w string) {
			// C's compare-and-swap on V, as W, is about to be sent.
			_, err := s.Put(ctx, commit.IntentDir+u.WriteID+"/"+commit.IntentClose+w, strings.NewReader(""), store.PutOptions{IfNoneMatch: true})
			require.NoError(t, err)
			go func() {
				defer close(doneX)
				_, errX = txX.Commit(ctx, commit.CommitOptions{})
			}()
			awaitIntents(t, s, w, 1)
			waitFor(t, reads.arm(), "X reading the pointer, V, after it bound ahead")
		}
		sniff.mu.Unlock()
	})
	_, err := txC.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	// A fresh writer on the head carries whatever waits there.
	_, err = partition(t, commit.New(s), "z/", map[string]string{"f": "z"}).Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	close(releaseX)
	waitFor(t, doneX, "X")
	if errX == nil || errors.Is(errX, commit.ErrCommitUnknown) {
		assert.LessOrEqual(t, len(applications(chainOf(t, direct), txX.Generation())), 1)
	} else {
		assert.Empty(t, applications(chainOf(t, direct), txX.Generation()), "X failed (%v): never applied", errX)
	}
	checkComplete(t, direct) // I1
}
