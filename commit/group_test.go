package commit_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// groupRace sets up a group-commit round on every driver: the Tx
// "mine/" loses its first compare-and-swap to "theirs/", rebases, and
// publishes its intent; the write that closes its round is held while third,
// a fresh writer of another process (another Dataset) begun on the new
// head, commits. It returns the Tx's outcome and third's.
func groupRace(t *testing.T, s store.Store, opts commit.CommitOptions, third func(other *commit.Dataset) *commit.Tx) (tx *commit.Tx, p *pointer.Pointer, tx3 *commit.Tx, p3 *pointer.Pointer, err error) {
	t.Helper()
	return groupRaceVia(t, s, func(s store.Store) store.Store { return s }, opts, third)
}

// groupRaceVia is groupRace with the Tx's requests sent through via.
func groupRaceVia(t *testing.T, s store.Store, via func(store.Store) store.Store, opts commit.CommitOptions, third func(other *commit.Dataset) *commit.Tx) (tx *commit.Tx, p *pointer.Pointer, tx3 *commit.Tx, p3 *pointer.Pointer, err error) {
	t.Helper()
	ctx := context.Background()
	fs := faults.NewStore(s)
	d := commit.New(via(fs))
	other := commit.New(s)
	_, err = publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	tx = partition(t, d, "mine/", map[string]string{"f": "mine"})
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		commitOpen(t, other, "theirs/", map[string]string{"f": "theirs"})
		holdRound(t, fs, s, func() {
			require.Len(t, keysUnder(t, s, commit.IntentDir), 1, "the Tx's intent waits on the head")
			commit.MarkGrouped(other) // the third writer joins the round
			tx3 = third(other)
			var err error
			p3, err = tx3.Commit(ctx, commit.CommitOptions{Message: "third"})
			require.NoError(t, err)
		})
	}})
	p, err = tx.Commit(ctx, opts)
	return tx, p, tx3, p3, err
}

// holdRound holds, while then runs, the first LIST of the round on the
// current pointer value that the writer through fs sends: its intent is
// published there, and the round is open to others.
func holdRound(t *testing.T, fs *faults.Store, s store.Store, then func()) {
	t.Helper()
	fs.Add(faults.Rule{Op: store.OpList, Key: commit.IntentDir + readPointer(t, s).WriteID + "/", Kind: faults.Latency, Times: 1, Then: then})
}

// TestGroupCarried: a fresh writer that finds an intent waiting on its
// base joins the round and, the intent's writer being held, carries it:
// one commit holds both writers' changes, the carried Tx returns that
// commit, keeps its objects, and leaves no intent behind.
func TestGroupCarried(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		d := commit.New(s)
		tx, p, tx3, p3, err := groupRace(t, s, commit.CommitOptions{}, func(other *commit.Dataset) *commit.Tx {
			return partition(t, other, "third/", map[string]string{"f": "third"})
		})
		require.NoError(t, err)
		assert.Equal(t, 1, tx.Rebased())
		assert.Equal(t, p3.Generation, tx.CarriedBy(), "carried by third's commit")
		assert.Equal(t, p3.Generation, p.Generation)
		assert.Equal(t, p3.Seq, p.Seq)
		assert.Empty(t, tx3.CarriedBy())
		m := readManifest(t, s, p3.Generation)
		assert.Equal(t, generation.FormatCarried, m.Format)
		require.Len(t, m.Carried, 1)
		assert.Equal(t, tx.Generation(), m.Carried[0].Generation)
		assert.True(t, m.CarriedBy(tx.Generation()))
		assert.Equal(t, "third", m.Message, "the carrier's message")
		assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "theirs", "mine/f": "mine", "third/f": "third"}, contents(t, d))
		assert.Contains(t, keysUnder(t, s, generation.Prefix(tx.Generation())), generation.DataKey(tx.Generation(), "mine/f"), "the carried objects are kept")
		assert.Empty(t, keysUnder(t, s, commit.IntentDir), "no intent left behind")
	})
}

// TestGroupCarrierDeletesRound: the carrier whose commit lands deletes
// the intents of the round it carried with its own; the writer it carried
// leaves its intent to it (one DeleteMany for a round, not one per
// writer), and none is left behind.
func TestGroupCarrierDeletesRound(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		var w *putKeys
		tx, _, _, p3, err := groupRaceVia(t, s, func(fs store.Store) store.Store { w = &putKeys{Store: fs}; return w }, commit.CommitOptions{}, func(other *commit.Dataset) *commit.Tx {
			return partition(t, other, "third/", map[string]string{"f": "third"})
		})
		require.NoError(t, err)
		require.Equal(t, p3.Generation, tx.CarriedBy())
		var published []string
		for _, k := range w.list() {
			if strings.HasPrefix(k, commit.IntentDir) {
				published = append(published, k)
			}
		}
		require.Len(t, published, 1, "the Tx published one intent")
		assert.NotContains(t, w.deletes(), published[0], "the carried Tx leaves its intent to its carrier")
		assert.Empty(t, keysUnder(t, s, commit.IntentDir), "the carrier deleted it")
	})
}

// TestGroupCarriesFence: the commit that carries a writer holding a
// lease raises that lease's fence to the writer's token, as the writer's
// own commit would have: a former holder with a lower token is refused
// from then on.
func TestGroupCarriesFence(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		const lease = "mem://x/_lease/nightly"
		tx, _, _, p3, err := groupRace(t, s, commit.CommitOptions{Fence: 5, FenceLease: lease}, func(other *commit.Dataset) *commit.Tx {
			return partition(t, other, "third/", map[string]string{"f": "third"})
		})
		require.NoError(t, err)
		require.Equal(t, p3.Generation, tx.CarriedBy())
		assert.Equal(t, map[string]uint64{lease: 5}, readPointer(t, s).Fences)
		stale := partition(t, commit.New(s), "old/", map[string]string{"f": "old"})
		_, err = stale.Commit(context.Background(), commit.CommitOptions{Fence: 4, FenceLease: lease})
		require.ErrorIs(t, err, commit.ErrFenced)
	})
}

// TestGroupOverlapNotCarried: a writer that replaces the same subtree
// does not carry the intent; the intent's writer then loses as without
// group commit: a ConflictError naming the path, its objects and intent
// deleted.
func TestGroupOverlapNotCarried(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		d := commit.New(s)
		tx, _, tx3, p3, err := groupRace(t, s, commit.CommitOptions{}, func(other *commit.Dataset) *commit.Tx {
			return partition(t, other, "mine/", map[string]string{"g": "third"})
		})
		var ce *commit.ConflictError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, p3.Generation, ce.Winner)
		assert.Equal(t, p3.Seq, ce.Seq, "the seq it lost, the winner's")
		assert.Contains(t, ce.Overlap, "mine/g")
		assert.Empty(t, tx3.CarriedBy())
		assert.Empty(t, readManifest(t, s, p3.Generation).Carried)
		assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())), "the loser's objects are deleted")
		assert.Empty(t, keysUnder(t, s, commit.IntentDir))
		assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "theirs", "mine/g": "third"}, contents(t, d))
	})
}

// TestGroupCancelledWithdraws: a writer cancelled after publishing its
// intent, before its own compare-and-swap, rewrites the pointer value the
// intent is bound to (so no commit can carry it any more) before it
// deletes its objects; it reports the cancellation, not an unknown
// outcome.
func TestGroupCancelledWithdraws(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		fs := faults.NewStore(s)
		d := commit.New(fs)
		other := commit.New(s)
		_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
		require.NoError(t, err)
		tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
		var head *pointer.Pointer
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			head = commitOpen(t, other, "theirs/", map[string]string{"f": "theirs"})
		}})
		fs.Add(faults.Rule{Op: store.OpPut, Key: commit.IntentDir, Kind: faults.Held, Times: 1, Then: cancel})
		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.ErrorIs(t, err, context.Canceled)
		assert.False(t, errors.Is(err, commit.ErrCommitUnknown), "%v", err)
		now := readPointer(t, s)
		assert.Equal(t, head.Seq, now.Seq, "no commit")
		assert.Equal(t, head.Generation, now.Generation)
		assert.NotEqual(t, head.WriteID, now.WriteID, "the value the intent was bound to is gone")
		assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
		assert.Empty(t, keysUnder(t, s, commit.IntentDir))
	})
}

// TestGroupRebuiltAfterRewrite: a carrier whose compare-and-swap fails on
// a pointer value rewritten without a commit (a fence registered) does not
// send the group again on the new value: the intents it carried are bound
// to the old one, and their writers may already have seen it go and taken
// them for dead. It rounds again on the new value, where they are not.
func TestGroupRebuiltAfterRewrite(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		fs, fs3 := faults.NewStore(s), faults.NewStore(s)
		d, other, direct := commit.New(fs), commit.New(fs3), commit.New(s)
		_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
		require.NoError(t, err)
		tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
		var tx3 *commit.Tx
		var p3 *pointer.Pointer
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			commitOpen(t, direct, "theirs/", map[string]string{"f": "theirs"})
			fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
				fs3.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
					require.NoError(t, direct.RegisterFence(ctx, "mem://x/_lease/l", 1))
				}})
				tx3 = partition(t, other, "third/", map[string]string{"f": "third"})
				var err error
				p3, err = tx3.Commit(ctx, commit.CommitOptions{})
				require.NoError(t, err)
			}})
		}})
		p, err := tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		assert.Empty(t, readManifest(t, s, p3.Generation).Carried, "the group was not sent on the rewritten value")
		assert.Empty(t, tx.CarriedBy())
		assert.Equal(t, p.Parent, p3.Generation, "the Tx rebased on third's commit")
		assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "theirs", "mine/f": "mine", "third/f": "third"}, contents(t, d))
		assert.Empty(t, keysUnder(t, s, commit.IntentDir))
	})
}

// TestGroupFollowerSeesRewrite: a writer that joined a round finds, when
// it reads the pointer, the value its intent is bound to rewritten
// without a commit (a fence registered): the intent is dead, not unknown,
// and the writer rounds again on the new value and commits.
func TestGroupFollowerSeesRewrite(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		fs := faults.NewStore(s)
		d, direct := commit.New(fs), commit.New(s)
		_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
		require.NoError(t, err)
		tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
		var tx2 *commit.Tx
		var err2 error
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			commitOpen(t, direct, "theirs/", map[string]string{"f": "theirs"})
			// The Tx now rounds on theirs' commit; hold its rebased
			// manifest while a second writer joins that round.
			fs.Add(faults.Rule{Op: store.OpPut, Key: generation.Dir, Kind: faults.Latency, Times: 1, Then: func() {
				tx2 = partition(t, direct, "second/", map[string]string{"f": "second"})
				commit.MarkGrouped(direct) // tx2 joins the Tx's round on its base
				require.NoError(t, direct.RegisterFence(ctx, "mem://x/_lease/l", 1))
				_, err2 = tx2.Commit(ctx, commit.CommitOptions{})
			}})
		}})
		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		require.NoError(t, err2, "the joined intent is dead once its value is rewritten, not unknown")
		assert.Empty(t, tx2.CarriedBy())
		assert.Equal(t, 1, tx2.Rebased(), "it rounded again on the rewritten value")
		assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "theirs", "mine/f": "mine", "second/f": "second"}, contents(t, d))
		assert.Empty(t, keysUnder(t, s, commit.IntentDir))
	})
}

// TestGroupTogetherOneLeader: A and B, of a dataset that met contention,
// commit together on V: both publish before either lists the round. Then
// only the writer whose intent sorts first leads it. While the leader's
// LIST that carries the round is held, the other writer, woken, reads the
// pointer, as a follower does, instead of carrying the round itself on V
// (only one of two such commits could land). One commit holds both.
func TestGroupTogetherOneLeader(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		var watch *roundWatch
		togetherRound(t, s, func(fs store.Store) store.Store { watch = &roundWatch{Store: fs}; return watch }, func(wakeFollower func()) {
			ev := watch.arm()
			wakeFollower()
			assert.Equal(t, "pointer read", <-ev, "the other writer follows the round")
		})
	})
}

// togetherRound has A and B, of a Dataset that met contention, commit
// together on one value V (the Dataset's requests go through via): both
// publish before either lists the round. The rounds run on a stepped
// clock: once both writers wait, the leader (whose wait is the shorter)
// is woken, and the follower only when whileCarried says so or once the
// leader's commit returned. whileCarried, if not nil, runs while the LIST
// with which the leader carries the round is held. Both must land in one
// commit. It returns V.
func togetherRound(t *testing.T, s store.Store, via func(store.Store) store.Store, whileCarried func(wakeFollower func())) *pointer.Pointer {
	t.Helper()
	ctx := context.Background()
	fs, d, v := contended(t, s, via)
	clock := newStepClock()
	commit.SetRoundClock(d, clock)
	direct := commit.New(s)
	txA := partition(t, d, "a/", map[string]string{"f": "a"})
	txB := partition(t, d, "b/", map[string]string{"f": "b"})
	var arrived sync.WaitGroup
	arrived.Add(2)
	fs.Add(faults.Rule{Op: store.OpPut, Key: commit.IntentDir + v.WriteID + "/", Kind: faults.Held, Times: 2, Then: func() {
		arrived.Done()
		arrived.Wait() // both intents are there before either writer lists again
	}})
	var first *stepSleeper // the follower's first wait
	if whileCarried != nil {
		// A and B list the round once each; the third LIST is the one
		// with which the leader carries it.
		var lists atomic.Int32
		fs.Add(faults.Rule{Op: store.OpList, Key: commit.IntentDir + v.WriteID + "/", Kind: faults.Latency, Times: 3, Then: func() {
			if lists.Add(1) == 3 {
				whileCarried(func() { first.wake() })
			}
		}})
	}
	type result struct {
		p   *pointer.Pointer
		err error
	}
	results := make(chan result, 2)
	for _, tx := range []*commit.Tx{txA, txB} {
		go func() {
			p, err := tx.Commit(ctx, commit.CommitOptions{})
			results <- result{p, err}
		}()
	}
	leader, follower := <-clock.sleepers, <-clock.sleepers
	if follower.d < leader.d {
		leader, follower = follower, leader
	}
	require.Less(t, leader.d, follower.d, "the follower's first wait is longer than the leader's")
	first = follower
	leader.wake()
	// The follower sleeps until the leader's commit returned, unless
	// whileCarried wakes its first wait; then every wait ends at once.
	var got []result
	for len(got) < 2 {
		select {
		case r := <-results:
			got = append(got, r)
			follower.wake()
		case sl := <-clock.sleepers:
			follower = sl
			if len(got) > 0 {
				sl.wake()
			}
		}
	}
	for _, r := range got {
		require.NoError(t, r.err)
	}
	assert.Equal(t, got[0].p.Generation, got[1].p.Generation, "one commit holds both")
	assert.Equal(t, v.Seq+1, got[0].p.Seq)
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "z/f": "z", "a/f": "a", "b/f": "b"}, contents(t, direct))
	return v
}

// stepClock is a round clock that stands still and whose sleepers wait
// until the test wakes them: every round trip a writer measures on it is
// the 1 ms floor.
type stepClock struct{ sleepers chan *stepSleeper }

type stepSleeper struct {
	d    time.Duration
	done chan struct{}
	once sync.Once
}

func newStepClock() *stepClock { return &stepClock{sleepers: make(chan *stepSleeper)} }

func (c *stepClock) Now() time.Time { return time.Unix(0, 0) }

func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error {
	sl := &stepSleeper{d: d, done: make(chan struct{})}
	select {
	case c.sleepers <- sl:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-sl.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (sl *stepSleeper) wake() { sl.once.Do(func() { close(sl.done) }) }

// TestGroupRoundsOnlyOnOpenValues: a value is open to rounds when its
// commit met other writers (here, as the commit tests set it: rebased or
// carried once). A fresh writer on
// a group commit lists the intent directory once and, finding nobody at
// work, commits alone, publishing no intent; its value is closed, so the
// next fresh writer sends no request under the intent directory at all,
// and a writer that loses to a closed value rebases without a round.
func TestGroupRoundsOnlyOnOpenValues(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		_, _, _, p3, err := groupRace(t, s, commit.CommitOptions{}, func(other *commit.Dataset) *commit.Tx {
			return partition(t, other, "third/", map[string]string{"f": "third"})
		})
		require.NoError(t, err)
		require.NotEmpty(t, readManifest(t, s, p3.Generation).Carried, "the base is a group commit")

		w := &putKeys{Store: s}
		fresh := partition(t, commit.New(w), "fourth/", map[string]string{"f": "fourth"})
		p4, err := fresh.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		assert.Equal(t, p3.Seq+1, p4.Seq)
		assert.Equal(t, []string{commit.IntentDir}, underIntents(w.listed()), "one LIST of the intent directory on an open base")
		assert.False(t, intentPut(w.list(), p3.WriteID), "nobody at work: no intent: %v", w.list())
		m4 := readManifest(t, s, p4.Generation)
		require.Empty(t, m4.Carried)
		require.Zero(t, m4.Rebased, "the value is closed")

		w = &putKeys{Store: s}
		fs := faults.NewStore(w)
		lone := partition(t, commit.New(fs), "fifth/", map[string]string{"f": "fifth"})
		loseFirstCASClosed(t, fs, commit.New(s))
		p6, err := lone.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		assert.Equal(t, p4.Seq+2, p6.Seq)
		assert.Equal(t, 1, lone.Rebased())
		assert.Empty(t, underIntents(w.listed()), "no LIST of intents on a closed base or head")
		assert.False(t, slices.ContainsFunc(w.list(), func(k string) bool { return strings.HasPrefix(k, commit.IntentDir) }),
			"no intent on a closed value: %v", w.list())
		assert.Equal(t, 1, readManifest(t, s, p6.Generation).Rebased, "a commit that rebased opens its value")
		assert.Empty(t, keysUnder(t, s, commit.IntentDir), "no intent left behind")
	})
}

// underIntents returns those of prefixes under the intent directory.
func underIntents(prefixes []string) []string {
	return slices.DeleteFunc(prefixes, func(p string) bool { return !strings.HasPrefix(p, commit.IntentDir) })
}

// loseFirstCASClosed makes the next pointer write through fs lose to a
// commit of "sixth/" by direct that meets nobody: its value is closed.
func loseFirstCASClosed(t *testing.T, fs *faults.Store, direct *commit.Dataset) {
	t.Helper()
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		p := partition(t, direct, "sixth/", map[string]string{"f": "sixth"})
		_, err := p.Commit(context.Background(), commit.CommitOptions{})
		require.NoError(t, err)
	}})
}

// intentPut reports whether keys hold an intent published
// on the pointer value with write id head.
func intentPut(keys []string, head string) bool {
	return slices.ContainsFunc(keys, func(k string) bool {
		return strings.HasPrefix(k, commit.IntentDir+head+"/")
	})
}

// roundWatch reports, once armed, the first pointer read or LIST of a
// round sent through it (see TestGroupTogetherOneLeader).
type roundWatch struct {
	store.Store
	mu    sync.Mutex
	event chan string
}

func (w *roundWatch) arm() <-chan string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.event = make(chan string, 1)
	return w.event
}

func (w *roundWatch) note(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.event != nil {
		w.event <- what
		w.event = nil
	}
}

func (w *roundWatch) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	if key == pointer.Key {
		w.note("pointer read")
	}
	return w.Store.Get(ctx, key)
}

func (w *roundWatch) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	if strings.HasPrefix(req.Prefix, commit.IntentDir) {
		w.note("list")
	}
	return w.Store.List(ctx, req)
}

// contended returns a Dataset d, whose requests go through fs and then
// via, that met contention on s: s holds "seed", "theirs/f" and "z/f",
// written by a commit of d that lost its first compare-and-swap and
// rebased. v, the pointer value d's next writers begin on, is open, and
// they join a round on it at their first compare-and-swap.
func contended(t *testing.T, s store.Store, via func(store.Store) store.Store) (fs *faults.Store, d *commit.Dataset, v *pointer.Pointer) {
	t.Helper()
	fs = faults.NewStore(s)
	d = commit.New(via(fs))
	direct := commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	tx0 := partition(t, d, "z/", map[string]string{"f": "z"})
	loseFirstCAS(t, fs, direct, nil)
	_, err = tx0.Commit(context.Background(), commit.CommitOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, tx0.Rebased(), "d met contention")
	commit.MarkGrouped(d)
	return fs, d, readPointer(t, s)
}

// awaitIntents waits until n intents are bound to the value with write
// id head. It may run on a writer's goroutine (in a faults rule), so
// it reports a timeout with t.Errorf and returns.
func awaitIntents(t *testing.T, s store.Store, head string, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for len(keysUnder(t, s, commit.IntentDir+head+"/")) < n {
		if time.Now().After(deadline) {
			t.Errorf("timed out waiting for %d intents on %s", n, head)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// putKeys records the key of each PUT through it, and of each DeleteMany.
type putKeys struct {
	store.Store
	mu    sync.Mutex
	keys  []string
	dels  []string
	lists []string // the prefixes listed
}

func (s *putKeys) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	s.mu.Lock()
	s.lists = append(s.lists, req.Prefix)
	s.mu.Unlock()
	return s.Store.List(ctx, req)
}

func (s *putKeys) listed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lists)
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

// TestGroupLeaderWhoseIntentWasCarriedSettles: a leader whose second LIST
// of its round no longer shows its own intent reads the pointer before it
// carries: here another writer, C, carried the round and deleted its
// intents while that LIST was held. The leader settles as carried by C's
// commit, and writes neither a manifest nor a pointer of its own.
func TestGroupLeaderWhoseIntentWasCarriedSettles(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	var w *putKeys
	fs, d, v := contended(t, s, func(fs store.Store) store.Store { w = &putKeys{Store: fs}; return w })
	dC := commit.New(s)
	commit.MarkGrouped(dC)
	txL := partition(t, d, "l/", map[string]string{"f": "l"})
	txC := partition(t, dC, "c/", map[string]string{"f": "c"})
	w.reset()
	var pC *pointer.Pointer
	var errC error
	var lists atomic.Int32
	fs.Add(faults.Rule{Op: store.OpList, Key: commit.IntentDir + v.WriteID + "/", Kind: faults.Latency, Times: 2, Then: func() {
		if lists.Add(1) == 2 {
			// L leads (its intent is the first published); C follows,
			// finds the pointer unmoved, and carries the round itself.
			pC, errC = txC.Commit(ctx, commit.CommitOptions{})
		}
	}})
	pL, err := txL.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.NoError(t, errC)
	assert.Equal(t, pC.Generation, txL.CarriedBy(), "L is carried by C's commit")
	assert.Equal(t, pC.Seq, pL.Seq)
	for _, k := range w.list() {
		assert.NotEqual(t, pointer.Key, k, "L sends no pointer write")
		assert.NotEqual(t, generation.ManifestKey(txL.Generation()), k, "L writes no manifest")
	}
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "z/f": "z", "l/f": "l", "c/f": "c"}, contents(t, commit.New(s)))
	assert.Empty(t, keysUnder(t, s, commit.IntentDir))
}

// TestGroupOldIntentsElsewhereIgnored: an intent on another value written
// more than busyWindow before the base was committed (a crashed writer's,
// by the store's clock) is no sign of writers at work: a writer that
// finds only that commits alone.
func TestGroupOldIntentsElsewhereIgnored(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := mem.New(mem.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	direct := commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	gone := uuid.NewString() // the write id of a value replaced long ago
	_, err = s.Put(ctx, commit.IntentDir+gone+"/"+uuid.Must(uuid.NewV7()).String(), strings.NewReader("{}"), store.PutOptions{})
	require.NoError(t, err)
	mu.Lock()
	now = now.Add(11 * time.Second)
	mu.Unlock()
	commitOpen(t, direct, "racer/", map[string]string{"f": "r"})

	w := &putKeys{Store: s}
	lone := partition(t, commit.New(w), "lone/", map[string]string{"f": "l"})
	_, err = lone.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Contains(t, w.listed(), commit.IntentDir, "on an open base the writer lists the intent directory")
	assert.False(t, slices.ContainsFunc(w.list(), func(k string) bool { return strings.HasPrefix(k, commit.IntentDir) }),
		"a writer that finds only an old intent elsewhere commits alone: %v", w.list())
}

// TestGroupWriterSeesIntentsElsewhere: a writer that commits alone back to
// back would never see the writers it keeps beating: they publish on the
// value it has just replaced. A writer whose open base's round is empty,
// but that finds in its LIST of the intent directory a recent intent on
// another value, opens a round instead of going alone.
func TestGroupWriterSeesIntentsElsewhere(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		direct := commit.New(s)
		_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
		require.NoError(t, err)
		v := readPointer(t, s)
		commitOpen(t, direct, "racer/", map[string]string{"f": "r"})
		// A writer that lost to the racer, still bound to a value replaced.
		lost := commit.IntentDir + v.WriteID + "/" + uuid.Must(uuid.NewV7()).String()
		_, err = s.Put(ctx, lost, strings.NewReader("{}"), store.PutOptions{})
		require.NoError(t, err)
		base := readPointer(t, s)

		w := &putKeys{Store: s}
		fresh := partition(t, commit.New(w), "fresh/", map[string]string{"f": "f"})
		p, err := fresh.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		assert.Equal(t, base.Seq+1, p.Seq)
		assert.True(t, intentPut(w.list(), base.WriteID), "the writer publishes its intent on its base: %v", w.list())
		assert.Equal(t, []string{lost}, keysUnder(t, s, commit.IntentDir), "another writer's intent is its own to delete")
	})
}
