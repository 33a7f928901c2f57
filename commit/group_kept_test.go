package commit_test

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

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

// proofs records the requests that can prove a reference: every HEAD, and
// every LIST under _gen/.
type proofs struct {
	store.Store
	mu   sync.Mutex
	sent []string
}

func (p *proofs) Unwrap() store.Store { return p.Store }

func (p *proofs) Head(ctx context.Context, key string) (store.Attrs, error) {
	p.note("HEAD " + key)
	return p.Store.Head(ctx, key)
}

func (p *proofs) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	if strings.HasPrefix(req.Prefix, generation.Dir) {
		p.note("LIST " + req.Prefix + " after " + req.StartAfter)
	}
	return p.Store.List(ctx, req)
}

func (p *proofs) note(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent = append(p.sent, s)
}

func (p *proofs) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.sent...)
}

// TestGroupJoinerLeavesKeptFiles: a writer that joins a round on its base
// (its Dataset met contention) and is
// carried by the round's first writer never proves the files it keeps
// from its base: the carrier's manifest takes those paths from its head.
// The writer's request log shows no HEAD and no listing under _gen/, and
// the commit that carried it holds everything.
func TestGroupJoinerLeavesKeptFiles(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		fa := faults.NewStore(s)
		a := commit.New(fa)
		rec := &proofs{Store: s}
		fb := faults.NewStore(rec)
		b := commit.New(fb)
		commit.MarkGrouped(b)
		_, err := publish(t, a, map[string]string{"seed": "0"}, commit.CommitOptions{})
		require.NoError(t, err)
		txA := partition(t, a, "a/", map[string]string{"f": "a"})

		var (
			txB        *commit.Tx
			pB         *pointer.Pointer
			errB       error
			bDone      = make(chan struct{})
			bPublished = make(chan struct{})
			aLanded    = make(chan struct{})
		)
		// B's intent lands and B waits, before it polls, for A's commit:
		// A, the first writer of the round, then carries B.
		fb.Add(faults.Rule{Op: store.OpPut, Key: commit.IntentDir, Kind: faults.Held, Times: 1, Then: func() {
			close(bPublished)
			<-aLanded
		}})
		// A loses its first compare-and-swap to "theirs/", rebases, and
		// publishes its intent on the new head; B, begun on that head,
		// finds it and joins the round.
		fa.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			commitOpen(t, commit.New(s), "theirs/", map[string]string{"f": "theirs"})
			fa.Add(faults.Rule{Op: store.OpPut, Key: commit.IntentDir, Kind: faults.Held, Times: 1, Then: func() {
				txB = partition(t, b, "b/", map[string]string{"f": "b"})
				go func() {
					defer close(bDone)
					pB, errB = txB.Commit(ctx, commit.CommitOptions{})
				}()
				<-bPublished
			}})
			fa.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Held, Times: 1, Then: func() {
				close(aLanded)
			}})
		}})
		pA, err := txA.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		<-bDone
		require.NoError(t, errB)
		assert.Empty(t, txA.CarriedBy())
		assert.Equal(t, pA.Generation, txB.CarriedBy(), "B is carried by A's commit")
		assert.Equal(t, pA.Seq, pB.Seq)
		assert.Empty(t, rec.all(), "the carried writer proves none of the files it keeps")
		assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "theirs", "a/f": "a", "b/f": "b"}, contents(t, commit.New(s)))
		checkComplete(t, commit.New(s))
	})
}

// TestGroupWriterProvesKeptFiles: a writer that may join rounds, but
// writes a manifest of its own on its base, proves the files it keeps
// first. Alone, or taking a round over from a first writer that does not
// commit, a kept file whose object is gone fails the commit with
// ErrMissingObject, naming the key, and nothing is committed: the pointer
// never names the dangling reference.
func TestGroupWriterProvesKeptFiles(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d, gone := keptSetup(t, s)
		require.NoError(t, s.Delete(ctx, gone.Key, store.DeleteOptions{}))
		before := readPointer(t, s)

		t.Run("alone", func(t *testing.T) {
			tx := partition(t, d, "q/", map[string]string{"f": "q"})
			_, err := tx.Commit(ctx, commit.CommitOptions{})
			require.ErrorIs(t, err, commit.ErrMissingObject)
			assert.Contains(t, err.Error(), gone.Key)
			assert.Equal(t, before.Generation, readPointer(t, s).Generation)
			assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())), "nothing of the Tx is left")
		})

		t.Run("taking a round over", func(t *testing.T) {
			// An intent waits on the head, and no writer carries it: the
			// Tx joins the round as a follower, finds the pointer
			// unmoved, and carries the round itself.
			commit.MarkGrouped(d)
			joinRound(t, s)
			tx := partition(t, d, "q/", map[string]string{"f": "q"})
			_, err := tx.Commit(ctx, commit.CommitOptions{})
			require.ErrorIs(t, err, commit.ErrMissingObject)
			assert.Contains(t, err.Error(), gone.Key)
			after := readPointer(t, s)
			assert.Equal(t, before.Generation, after.Generation, "nothing committed")
			assert.NotEqual(t, before.WriteID, after.WriteID, "the Tx withdrew its intent before it gave up")
			assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())), "nothing of the Tx is left")
		})
	})
}

// gets counts the GETs of each key.
type gets struct {
	store.Store
	mu sync.Mutex
	n  map[string]int
}

func (g *gets) Unwrap() store.Store { return g.Store }

func (g *gets) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	g.mu.Lock()
	if g.n == nil {
		g.n = map[string]int{}
	}
	g.n[key]++
	g.mu.Unlock()
	return g.Store.Get(ctx, key)
}

func (g *gets) count(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n[key]
}

// TestGroupMissedRoundReadsHeadOnce: a writer that joined a round, but
// whose intent landed after the first writer's last LIST, follows that
// writer's intent, learns from the pointer that its own is dead, reads the manifest of the
// commit that replaced its value to settle it, and rebases on that commit
// without reading its manifest again; then it commits on its own.
func TestGroupMissedRoundReadsHeadOnce(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fl := faults.NewStore(s)
	l := commit.New(fl)
	counted := &gets{Store: s}
	fa := faults.NewStore(counted)
	a := commit.New(fa)
	commit.MarkGrouped(a) // A joins the round on its base
	_, err := publish(t, l, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	txL := partition(t, l, "l/", map[string]string{"f": "l"})

	var (
		txA   *commit.Tx
		pA    *pointer.Pointer
		errA  error
		aDone = make(chan struct{})
	)
	fl.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		// L loses its first compare-and-swap and leads a round alone on
		// the new head.
		commitOpen(t, commit.New(s), "theirs/", map[string]string{"f": "theirs"})
		seq := readPointer(t, s).Seq
		aPublishing := make(chan struct{})
		fa.Add(faults.Rule{Op: store.OpPut, Key: commit.IntentDir, Kind: faults.Latency, Times: 1, Then: func() {
			close(aPublishing)
			// A's intent lands only once L's commit did: too late.
			require.Eventually(t, func() bool { return readPointer(t, s).Seq > seq }, 30*time.Second, time.Millisecond)
		}})
		// L's delete of its intent fails (the collector's to sweep), so
		// A, listing after L's commit, follows L's intent.
		fl.Add(faults.Rule{Op: store.OpDeleteMany, Key: commit.IntentDir, Kind: faults.Refused, Times: 1})
		// L lists its round once A, which joins it, is publishing.
		holdRound(t, fl, s, func() {
			txA = partition(t, a, "a/", map[string]string{"f": "a"})
			go func() {
				defer close(aDone)
				pA, errA = txA.Commit(ctx, commit.CommitOptions{})
			}()
			<-aPublishing
		})
	}})
	pL, err := txL.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	<-aDone
	require.NoError(t, errA)
	assert.Empty(t, txA.CarriedBy(), "L listed its round before A joined")
	assert.Equal(t, 1, txA.Rebased())
	assert.Equal(t, pL.Seq+1, pA.Seq)
	assert.Equal(t, 1, counted.count(generation.ManifestKey(pL.Generation)), "A reads L's manifest once: to settle its intent, and the rebase builds on it")
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "theirs", "l/f": "l", "a/f": "a"}, contents(t, commit.New(s)))
	checkComplete(t, commit.New(s))
}
