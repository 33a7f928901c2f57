package commit_test

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

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

// TestDefaultOpennessNeedsTwoOtherWriters: by default a value is open to
// rounds exactly when its commit rebased at least three times or carried
// at least two writers. Two writers, each of whom meets only the other,
// rebase alone.
func TestDefaultOpennessNeedsTwoOtherWriters(t *testing.T) {
	for rebased := range 6 {
		for carried := range 5 {
			m := &generation.Manifest{Rebased: rebased, Carried: make([]generation.Carried, carried)}
			assert.Equal(t, rebased >= 3 || carried >= 2, commit.DefaultOpenness.Opens(m), "rebased %d, carried %d", rebased, carried)
		}
	}
}

// TestRoundsOnlyOnValuesThatRebasedThrice: with the default rule, a writer
// that loses its compare-and-swap to a value whose commit rebased twice
// rebases alone, with no intent and no LIST of the intent directory; one
// that loses to a value whose commit rebased three times publishes its
// intent on it.
func TestRoundsOnlyOnValuesThatRebasedThrice(t *testing.T) {
	commit.SetOpenness(t, commit.DefaultOpenness.Rebased, commit.DefaultOpenness.Carried)
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		_, err := publish(t, commit.New(s), map[string]string{"seed": "0"}, commit.CommitOptions{})
		require.NoError(t, err)
		for _, rebased := range []int{2, 3} {
			w := &putKeys{Store: s}
			fs := faults.NewStore(w)
			d := commit.New(fs)
			commit.MarkGrouped(d)
			tx := partition(t, d, fmt.Sprintf("mine%d/", rebased), map[string]string{"f": "mine"})
			var lostTo *pointer.Pointer
			fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
				lostTo = commitRebased(t, s, fmt.Sprintf("theirs%d/", rebased), rebased)
			}})
			_, err := tx.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
			require.Equal(t, rebased, readManifest(t, s, lostTo.Generation).Rebased)
			assert.Equal(t, 1, tx.Rebased())
			if rebased < 3 {
				assert.False(t, intentPut(w.list(), lostTo.WriteID), "an intent on a value that rebased %d times: %v", rebased, w.list())
				assert.Empty(t, underIntents(w.listed()), "a LIST of intents on a closed value")
			} else {
				assert.True(t, intentPut(w.list(), lostTo.WriteID), "no intent on a value that rebased %d times: %v", rebased, w.list())
			}
		}
	})
}

// commitRebased commits prefix/f to s with a Tx whose first n
// compare-and-swaps each lose to a commit of another writer, and returns
// the value it landed.
func commitRebased(t *testing.T, s store.Store, prefix string, n int) *pointer.Pointer {
	t.Helper()
	fs := faults.NewStore(s)
	direct := commit.New(s)
	tx := partition(t, commit.New(fs), prefix, map[string]string{"f": prefix})
	i := 0
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: n, Then: func() {
		i++
		between := partition(t, direct, fmt.Sprintf("between%d-%s", i, prefix), map[string]string{"f": "between"})
		_, err := between.Commit(context.Background(), commit.CommitOptions{})
		require.NoError(t, err)
	}})
	p, err := tx.Commit(context.Background(), commit.CommitOptions{})
	require.NoError(t, err)
	require.Equal(t, n, tx.Rebased())
	return p
}

// TestRebaseAfterBackoffReadsThePointerAgain: a writer that rebases alone
// and loses again backs off, and then rebases on the pointer as it is
// after the wait: a commit that landed during the wait costs it no further
// compare-and-swap.
func TestRebaseAfterBackoffReadsThePointerAgain(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	direct := commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	landDirect := func(name string) {
		tx := partition(t, direct, name+"/", map[string]string{"f": name})
		_, err := tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
	}
	late := &afterSecondLoss{Store: s, then: func() { landDirect("during-the-wait") }}
	fs := faults.NewStore(late)
	i := 0
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 2, Then: func() {
		i++
		landDirect(fmt.Sprintf("before%d", i))
	}})
	tx := partitionWith(t, commit.New(fs), "mine/", map[string]string{"f": "mine"}, commit.Rebase{NoGroup: true})
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.True(t, late.fired.Load(), "a commit landed after the second loss was read back")
	assert.Equal(t, 2, tx.Rebased(), "the rebase after the wait built on the head read before it")
}

// afterSecondLoss runs then once, right after the first pointer read that
// follows the second pointer write through it has returned, before its
// caller hears back: a commit that lands while the caller backs off.
type afterSecondLoss struct {
	store.Store
	then   func()
	writes atomic.Int32
	fired  atomic.Bool
}

func (s *afterSecondLoss) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	if key == pointer.Key {
		s.writes.Add(1)
	}
	return s.Store.Put(ctx, key, body, opts)
}

func (s *afterSecondLoss) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	rc, attrs, err := s.Store.Get(ctx, key)
	if key == pointer.Key && s.writes.Load() == 2 && s.fired.CompareAndSwap(false, true) {
		s.then()
	}
	return rc, attrs, err
}
