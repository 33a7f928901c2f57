package commit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faultstore"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// The leader of a round reads the intents it listed while it waits for the
// others to publish (TestGroupLeaderReadsWhileWaiting). These tests attack
// that: the copy it read early, of an intent whose writer withdrew, and a
// context that ends while those reads are held.

// TestGroupEarlyReadWithdrawn: the leader A of a round reads B's intent
// while it waits; B then withdraws (its context ends: it rewrites V and
// deletes what it staged) before A closes the round. When A's LIST after
// the close fails, A carries the copy it read early, in a write that
// cannot land: its compare-and-swap is on V, rewritten, and A does not
// send the group again on the new value. No commit references B's deleted
// objects (I1), and B is in none.
func TestGroupEarlyReadWithdrawn(t *testing.T) {
	for _, failList := range []bool{false, true} {
		t.Run(fmt.Sprintf("failList=%v", failList), func(t *testing.T) {
			s := mem.New()
			ctx := context.Background()
			r := earlySetup(t, s)
			fs, hA, hB, txA, txB, v := r.fs, r.hA, r.hB, r.txA, r.txB, r.v
			bctx, cancelB := context.WithCancel(ctx)
			defer cancelB()
			var errB error
			bDone, bGate := make(chan struct{}), make(chan struct{})
			var aReadB sync.WaitGroup
			aReadB.Add(1)
			// A's intent is there; B joins as a follower (it finds A's
			// intent) and publishes before A lists again.
			fs.Add(faultstore.Rule{Op: store.OpPut, Key: commit.IntentDir + v.WriteID + "/", Mode: faultstore.HoldResponse, Times: 1, Then: func() {
				gatePointerRead(hB, bGate)
				hA.on(store.OpGet, commit.IntentDir+v.WriteID+"/", func(context.Context, string) error { aReadB.Done(); return nil })
				go func() {
					defer close(bDone)
					_, errB = txB.Commit(bctx, commit.CommitOptions{})
				}()
				awaitIntents(t, s, v.WriteID, 2)
			}})
			fs.Add(faultstore.Rule{Op: store.OpPut, Key: commit.IntentDir + v.WriteID + "/" + commit.IntentClose, Mode: faultstore.HoldRequest, Times: 1, Then: func() {
				aReadB.Wait() // A read B's intent before it closed the round
				cancelB()
				close(bGate) // B settles on a fresh context
				<-bDone
				require.Error(t, errB)
				require.NotErrorIs(t, errB, commit.ErrCommitUnknown)
				assert.NotEqual(t, v.WriteID, readPointer(t, s).WriteID, "B withdrew: V rewritten")
				assert.Empty(t, keysUnder(t, s, generation.Prefix(txB.Generation())), "B deleted what it staged")
				if failList {
					hA.on(store.OpList, commit.IntentDir+v.WriteID+"/", func(context.Context, string) error {
						return errors.New("injected: list failed")
					})
				}
			}})
			pA, errA := txA.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, errA)
			assert.Empty(t, txA.CarriedBy())
			assert.Equal(t, pA.Generation, readPointer(t, s).Generation)
			assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "z/f": "z", "a/f": "a"}, contents(t, commit.New(s)))
			checkChain(t, s, txB.Generation())
			if failList {
				assert.Equal(t, 1, hA.carrying(txB.Generation()), "A carried its early copy of B in a write that could not land")
			}
		})
	}
}

// TestGroupLeaderCancelledWhileReading: the leader's context ends while
// its read of the other writer's intent is held by a store that ignores
// cancellation. The leader returns at once, the outcome known (nothing
// committed: it withdraws its intent and deletes what it staged), without
// waiting for that read; the follower then commits alone.
func TestGroupLeaderCancelledWhileReading(t *testing.T) {
	s := mem.New()
	ctx := context.Background()
	r := earlySetup(t, s)
	fs, hA, hB, txA, txB, v := r.fs, r.hA, r.hB, r.txA, r.txB, r.v
	actx, cancelA := context.WithCancel(ctx)
	defer cancelA()
	var pB *pointer.Pointer
	var errB error
	bDone, bGate := make(chan struct{}), make(chan struct{})
	reading, release := make(chan struct{}), make(chan struct{})
	fs.Add(faultstore.Rule{Op: store.OpPut, Key: commit.IntentDir + v.WriteID + "/", Mode: faultstore.HoldResponse, Times: 1, Then: func() {
		gatePointerRead(hB, bGate)
		hA.on(store.OpGet, commit.IntentDir+v.WriteID+"/", func(context.Context, string) error {
			close(reading)
			<-release // ignores the context
			return nil
		})
		go func() {
			defer close(bDone)
			pB, errB = txB.Commit(ctx, commit.CommitOptions{})
		}()
		awaitIntents(t, s, v.WriteID, 2)
	}})
	aDone := make(chan struct{})
	var errA error
	go func() {
		defer close(aDone)
		_, errA = txA.Commit(actx, commit.CommitOptions{})
	}()
	<-reading
	cancelA()
	select {
	case <-aDone:
	case <-time.After(time.Minute):
		t.Error("the leader waits for a read that ignores its cancelled context")
	}
	close(release)
	<-aDone
	require.ErrorIs(t, errA, context.Canceled)
	require.NotErrorIs(t, errA, commit.ErrCommitUnknown)
	assert.Empty(t, keysUnder(t, s, generation.Prefix(txA.Generation())), "A deleted what it staged")
	close(bGate)
	<-bDone
	require.NoError(t, errB)
	assert.Equal(t, pB.Generation, readPointer(t, s).Generation)
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "z/f": "z", "b/f": "b"}, contents(t, commit.New(s)))
	checkChain(t, s, txA.Generation())
}

// earlyRound is two writers, A and B, of separate Datasets, each about to
// commit its own partition on V, the value they begin on. A's Dataset
// met contention (see contended), so A opens a round at once; its
// requests go through fs and then hA, B's through hB.
type earlyRound struct {
	fs       *faultstore.Store
	hA, hB   *hookStore
	txA, txB *commit.Tx
	v        *pointer.Pointer
}

// earlySetup sets up an earlyRound on s.
func earlySetup(t *testing.T, s store.Store) earlyRound {
	t.Helper()
	var r earlyRound
	var dA *commit.Dataset
	r.fs, dA, r.v = contended(t, s, func(fs store.Store) store.Store { r.hA = &hookStore{Store: fs}; return r.hA })
	r.hB = &hookStore{Store: s}
	r.txA = partition(t, dA, "a/", map[string]string{"f": "a"})
	r.txB = partition(t, commit.New(r.hB), "b/", map[string]string{"f": "b"})
	return r
}

// gatePointerRead holds, through h, the next pointer read (a follower's,
// waiting in its round) until open is closed or its context ends.
func gatePointerRead(h *hookStore, open <-chan struct{}) {
	h.on(store.OpGet, pointer.Key, func(ctx context.Context, _ string) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-open:
			return nil
		}
	})
}

// checkChain asserts I1 over the pointer's whole chain (every object a
// manifest references is there), that no commit carries a writer twice,
// and that the generations absent are in no commit.
func checkChain(t *testing.T, s store.Store, absent ...string) {
	t.Helper()
	chain := chainOf(t, commit.New(s))
	for _, m := range chain {
		seen := map[string]bool{}
		for _, c := range m.Carried {
			assert.False(t, seen[c.Generation], "seq %d carries %s twice", m.Seq, c.Generation)
			seen[c.Generation] = true
		}
		for _, e := range m.Entries {
			_, err := s.Head(context.Background(), e.Key)
			assert.NoError(t, err, "I1: seq %d references %s", m.Seq, e.Key)
		}
	}
	for _, g := range absent {
		assert.Empty(t, applications(chain, g), "generation %s is in no commit", g)
	}
}

// hookStore runs the next hook armed for an op and a key prefix before it
// sends a Get or a List; the hook may hold or fail the request. It keeps
// the manifests written through it.
type hookStore struct {
	store.Store
	mu        sync.Mutex
	hooks     []*storeHook
	manifests []*generation.Manifest
}

type storeHook struct {
	op     store.Op
	prefix string
	used   bool
	fn     func(ctx context.Context, key string) error
}

// on arms fn for the next request of op on a key under prefix.
func (h *hookStore) on(op store.Op, prefix string, fn func(ctx context.Context, key string) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hooks = append(h.hooks, &storeHook{op: op, prefix: prefix, fn: fn})
}

func (h *hookStore) fire(ctx context.Context, op store.Op, key string) error {
	h.mu.Lock()
	var fn func(context.Context, string) error
	for _, k := range h.hooks {
		if !k.used && k.op == op && strings.HasPrefix(key, k.prefix) {
			k.used, fn = true, k.fn
			break
		}
	}
	h.mu.Unlock()
	if fn == nil {
		return nil
	}
	return fn(ctx, key)
}

// carrying returns how many manifests written through h carry gen.
func (h *hookStore) carrying(gen string) (n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.manifests {
		if m.CarriedBy(gen) {
			n++
		}
	}
	return n
}

func (h *hookStore) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	if err := h.fire(ctx, store.OpGet, key); err != nil {
		return nil, store.Attrs{}, err
	}
	return h.Store.Get(ctx, key)
}

func (h *hookStore) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	if err := h.fire(ctx, store.OpList, req.Prefix); err != nil {
		return store.ListPage{}, err
	}
	return h.Store.List(ctx, req)
}

func (h *hookStore) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	if strings.HasSuffix(key, generation.ManifestName) {
		b, err := io.ReadAll(body)
		if err != nil {
			return store.Attrs{}, err
		}
		if m, err := generation.Decode(b); err == nil {
			h.mu.Lock()
			h.manifests = append(h.manifests, m)
			h.mu.Unlock()
		}
		body = bytes.NewReader(b)
	}
	return h.Store.Put(ctx, key, body, opts)
}
