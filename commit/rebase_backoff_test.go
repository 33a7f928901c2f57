package commit_test

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
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

// inTheWait runs hook at the n-th pointer read that follows the second
// pointer write through it, before that read is sent: the first is the
// read-back that proves the second loss, the second the read after the
// backoff. A non-nil error from hook is returned instead of the read.
type inTheWait struct {
	store.Store
	n      int32
	hook   func() error
	writes atomic.Int32
	reads  atomic.Int32
	fired  atomic.Bool
}

func (s *inTheWait) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	if key == pointer.Key {
		s.writes.Add(1)
	}
	return s.Store.Put(ctx, key, body, opts)
}

func (s *inTheWait) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	if key == pointer.Key && s.writes.Load() == 2 && s.reads.Add(1) == s.n {
		s.fired.Store(true)
		if err := s.hook(); err != nil {
			return nil, store.Attrs{}, err
		}
	}
	return s.Store.Get(ctx, key)
}

// backoffRig is a seeded dataset on s and a Tx of "mine/" that rebases
// alone (NoGroup) and loses its first two compare-and-swaps to commits of
// before1/ and before2/; w's hook runs in its backoff after the second.
type backoffRig struct {
	s      *mem.Store
	direct *commit.Dataset
	w      *inTheWait
	tx     *commit.Tx
	lostTo []*pointer.Pointer // the values of the commits it lost to
}

func newBackoffRig(t *testing.T, n int32, hook func(r *backoffRig) error) *backoffRig {
	t.Helper()
	r := &backoffRig{s: mem.New()}
	r.direct = commit.New(r.s)
	_, err := publish(t, r.direct, map[string]string{"seed": "0", "mine/f": "base"}, commit.CommitOptions{})
	require.NoError(t, err)
	r.w = &inTheWait{Store: r.s, n: n, hook: func() error { return hook(r) }}
	fs := faults.NewStore(r.w)
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 2, Then: func() {
		r.lostTo = append(r.lostTo, r.land(t, fmt.Sprintf("before%d/", len(r.lostTo)+1), "f"))
	}})
	r.tx = partitionWith(t, commit.New(fs), "mine/", map[string]string{"f": "mine"}, commit.Rebase{NoGroup: true})
	return r
}

// land commits prefix+name directly and returns its pointer value.
func (r *backoffRig) land(t *testing.T, prefix, name string) *pointer.Pointer {
	t.Helper()
	tx, err := r.direct.Begin(context.Background())
	require.NoError(t, err)
	require.NoError(t, tx.KeepAll(context.Background()))
	require.NoError(t, tx.PutBytes(context.Background(), prefix+name, []byte(prefix)))
	p, err := tx.Commit(context.Background(), commit.CommitOptions{})
	require.NoError(t, err)
	return p
}

// TestRebaseAfterBackoffWhoseReadFailsBuildsOnTheReadBack: when the
// pointer read after the backoff fails, the rebase builds on the value
// read back after the lost compare-and-swap, and the commit lands once.
func TestRebaseAfterBackoffWhoseReadFailsBuildsOnTheReadBack(t *testing.T) {
	r := newBackoffRig(t, 2, func(*backoffRig) error { return store.Wrap("get", pointer.Key, nil, faults.ErrInjected) })
	p, err := r.tx.Commit(context.Background(), commit.CommitOptions{})
	require.NoError(t, err)
	require.True(t, r.w.fired.Load(), "the read after the backoff was sent")
	assert.Equal(t, 2, r.tx.Rebased())
	assert.Equal(t, int32(3), r.w.writes.Load(), "pointer writes: two lost, one landed")
	assert.Equal(t, r.lostTo[1].Seq+1, p.Seq)
	assert.Equal(t, r.lostTo[1].Generation, p.Parent, "built on the value read back")
	got := contents(t, r.direct)
	assert.Equal(t, "mine", got["mine/f"])
	assert.Equal(t, "before2/", got["before2/f"])
}

// TestRebaseAfterBackoffSendsOnTheVersionItRead: the rebase after the
// backoff builds on the value read then and conditions its pointer write
// on the version token read with it: a commit that landed during the wait
// costs no pointer write.
func TestRebaseAfterBackoffSendsOnTheVersionItRead(t *testing.T) {
	var during *pointer.Pointer
	r := newBackoffRig(t, 2, func(r *backoffRig) error {
		during = r.land(t, "during/", "f")
		return nil
	})
	p, err := r.tx.Commit(context.Background(), commit.CommitOptions{})
	require.NoError(t, err)
	require.NotNil(t, during)
	assert.Equal(t, 2, r.tx.Rebased())
	assert.Equal(t, int32(3), r.w.writes.Load(), "pointer writes: two lost, one landed")
	assert.Equal(t, during.Seq+1, p.Seq)
	assert.Equal(t, during.Generation, p.Parent)
	m := readManifest(t, r.s, p.Generation)
	assert.Equal(t, during.ManifestSHA256, m.ParentManifestSHA256)
	assert.Equal(t, 2, m.Rebased)
}

// TestRebaseAfterBackoffLosesToAnOverlapThatLandedDuringTheWait: a commit
// that landed during the backoff and changed a path the Tx read makes the
// Tx lose at once, with no further pointer write: its ConflictError names
// the path and the seq its last write wanted with that seq's winner, the
// other writer's file stays, and the Tx's staged objects are deleted.
func TestRebaseAfterBackoffLosesToAnOverlapThatLandedDuringTheWait(t *testing.T) {
	r := newBackoffRig(t, 2, func(r *backoffRig) error {
		r.land(t, "mine/", "g")
		return nil
	})
	_, err := r.tx.Commit(context.Background(), commit.CommitOptions{})
	var ce *commit.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.NotErrorIs(t, err, commit.ErrCommitUnknown)
	assert.Equal(t, []string{"mine/g"}, ce.Overlap)
	assert.Equal(t, r.lostTo[1].Seq, ce.Seq, "the seq the last write wanted")
	assert.Equal(t, r.lostTo[1].Generation, ce.Winner, "the generation that took it")
	assert.Equal(t, 1, r.tx.Rebased())
	assert.Equal(t, int32(2), r.w.writes.Load(), "no pointer write on a head the Tx conflicts with")
	got := contents(t, r.direct)
	assert.Equal(t, "base", got["mine/f"], "the Tx's change is not in the history")
	assert.Equal(t, "mine/", got["mine/g"], "the other writer's file stays")
	assert.Empty(t, keysUnder(t, r.s, generation.Prefix(r.tx.Generation())), "the staged objects are deleted")
}

// TestRebaseAfterBackoffOnAValueRewrittenByAFenceRegistration: when the
// head was rewritten during the backoff without a commit (a fence
// registration: same generation, new write id), the rebase builds on the
// rewritten value: it lands with one pointer write and keeps the fence.
func TestRebaseAfterBackoffOnAValueRewrittenByAFenceRegistration(t *testing.T) {
	const lease = "s3://b/_lease/x"
	r := newBackoffRig(t, 2, func(r *backoffRig) error {
		require.NoError(t, r.direct.RegisterFence(context.Background(), lease, 7))
		return nil
	})
	p, err := r.tx.Commit(context.Background(), commit.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(3), r.w.writes.Load(), "pointer writes: two lost, one landed")
	assert.Equal(t, r.lostTo[1].Seq+1, p.Seq)
	assert.Equal(t, r.lostTo[1].Generation, p.Parent)
	assert.Equal(t, uint64(7), readPointer(t, r.s).FenceOf(lease), "the fence registered during the wait is kept")
	assert.Equal(t, "mine", contents(t, r.direct)["mine/f"])
}

// TestRebaseCancelledInItsBackoffLosesCleanly: a commit whose context ends
// while it backs off between rebases has lost (every pointer write of it
// is proven dead): it reports the conflict, not an unknown outcome, and
// deletes what it staged.
func TestRebaseCancelledInItsBackoffLosesCleanly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := newBackoffRig(t, 1, func(*backoffRig) error {
		cancel()
		return nil
	})
	_, err := r.tx.Commit(ctx, commit.CommitOptions{})
	require.Error(t, err)
	require.True(t, r.w.fired.Load())
	assert.ErrorIs(t, err, commit.ErrConflict)
	assert.NotErrorIs(t, err, commit.ErrCommitUnknown)
	assert.ErrorContains(t, err, context.Canceled.Error(), "the cause is named")
	assert.Equal(t, int32(2), r.w.writes.Load())
	assert.Equal(t, r.lostTo[1].Seq, readPointer(t, r.s).Seq, "nothing landed after the loss")
	assert.Equal(t, "base", contents(t, r.direct)["mine/f"])
	assert.Empty(t, keysUnder(t, r.s, generation.Prefix(r.tx.Generation())), "the staged objects are deleted")
}

// TestRebaseAfterBackoffRefusesAHorizonRaisedDuringTheWait: when the
// collector raised its horizon past the Tx's staging start during the
// backoff, the Tx checks it against the value it read then: it loses as
// stale, sends no pointer write on that value, and deletes what it staged.
func TestRebaseAfterBackoffRefusesAHorizonRaisedDuringTheWait(t *testing.T) {
	r := newBackoffRig(t, 2, func(r *backoffRig) error {
		ctx := context.Background()
		p, attrs, err := pointer.Read(ctx, r.s)
		require.NoError(t, err)
		next := *p
		next.GCHorizon = time.Now().UTC()
		_, err = pointer.Write(ctx, r.s, &next, attrs.ETag)
		require.NoError(t, err)
		return nil
	})
	_, err := r.tx.Commit(context.Background(), commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrStale)
	assert.NotErrorIs(t, err, commit.ErrCommitUnknown)
	assert.Equal(t, int32(2), r.w.writes.Load(), "no pointer write on a value whose horizon passed the staging start")
	assert.Equal(t, r.lostTo[1].Generation, readPointer(t, r.s).Generation)
	assert.Equal(t, "base", contents(t, r.direct)["mine/f"])
	assert.Empty(t, keysUnder(t, r.s, generation.Prefix(r.tx.Generation())), "the staged objects are deleted")
}
