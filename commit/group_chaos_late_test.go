package commit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// lag delays protocol writes in the "network": with probability p a
// pointer, intent or manifest PUT or a LIST is sent after a random delay,
// and a caller whose context ends first gets its error while the request
// still lands later. It also fails requests at random as chaos does.
type lag struct {
	store.Store
	mu      sync.Mutex
	rng     *rand.Rand
	p, fail float64
	on      bool
	wg      *sync.WaitGroup
}

func (l *lag) roll() (delay time.Duration, fault int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.on {
		return 0, 0
	}
	if l.rng.Float64() < l.p {
		delay = time.Duration(l.rng.IntN(3000)) * time.Microsecond
	}
	if l.rng.Float64() < l.fail {
		fault = 1 + l.rng.IntN(2)
	}
	return
}

func (l *lag) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	if key != pointer.Key && !strings.HasPrefix(key, commit.IntentDir) && !strings.HasSuffix(key, "/"+generation.ManifestName) {
		return l.Store.Put(ctx, key, body, opts)
	}
	delay, fault := l.roll()
	if fault == 1 {
		return store.Attrs{}, store.Wrap("put", key, nil, errChaos)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return store.Attrs{}, err
	}
	type res struct {
		a   store.Attrs
		err error
	}
	ch := make(chan res, 1)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		time.Sleep(delay)
		a, err := l.Store.Put(context.Background(), key, strings.NewReader(string(b)), opts)
		ch <- res{a, err}
	}()
	select {
	case r := <-ch:
		if fault == 2 && r.err == nil {
			return store.Attrs{}, store.Wrap("put", key, nil, errChaos)
		}
		return r.a, r.err
	case <-ctx.Done():
		return store.Attrs{}, store.Wrap("put", key, nil, ctx.Err())
	}
}

func (l *lag) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	if key == pointer.Key {
		if _, fault := l.roll(); fault != 0 {
			return nil, store.Attrs{}, store.Wrap("get", key, nil, errChaos)
		}
	}
	return l.Store.Get(ctx, key)
}

func (l *lag) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	delay, fault := l.roll()
	if fault != 0 {
		return store.ListPage{}, store.Wrap("list", req.Prefix, nil, errChaos)
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return store.ListPage{}, ctx.Err()
		}
	}
	return l.Store.List(ctx, req)
}

func (l *lag) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on = false
}

// TestGroupChaosLateWritesAndCancellations: writers with rebase on
// overlapping partitions, their pointer, intent and manifest writes and
// their LISTs delayed and failed at random, commits cancelled at random
// times while their writes in flight still land. Every file of every
// generation reads (I1); a success is in the history once, at its seq,
// carried exactly when it says so, with its objects (I2, I7); an unknown
// outcome at most once; any other failure nowhere, its objects deleted.
// COMMITPTR_LATE_SEEDS sets the number of seeds (default 6).
func TestGroupChaosLateWritesAndCancellations(t *testing.T) {
	n := 6
	if v := os.Getenv("COMMITPTR_LATE_SEEDS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	total := map[string]int{}
	for seed := range uint64(n) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			for k, v := range lagRun(t, seed, 6, 3, 5) {
				total[k] += v
			}
		})
	}
	t.Logf("total %v", total)
}

// lagRun runs one seed of TestGroupChaosLateWritesAndCancellations and
// returns the outcomes by kind.
func lagRun(t *testing.T, seed uint64, writers, partitions, commits int) map[string]int {
	ctx := context.Background()
	s := mem.New()
	direct := commit.New(s)
	_, err := publish(t, direct, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	type rec struct {
		gen, prefix, content string
		base                 uint64
		p                    *pointer.Pointer
		carriedBy            string
		err                  error
	}
	var mu sync.Mutex
	var recs []*rec
	var lags []*lag
	var inflight sync.WaitGroup
	var wg sync.WaitGroup
	for w := range writers {
		l := &lag{Store: s, rng: rand.New(rand.NewPCG(seed, uint64(w))), p: 0.3, fail: 0.08, on: true, wg: &inflight}
		lags = append(lags, l)
		crng := rand.New(rand.NewPCG(seed+1000, uint64(w)))
		d := commit.New(l, commit.WithRetry(commit.Retry{Attempts: 3, Base: time.Millisecond, Max: 5 * time.Millisecond}))
		wg.Go(func() {
			prefix := fmt.Sprintf("p%d/", w%partitions)
			for n := range commits {
				var tx *commit.Tx
				for tx == nil {
					tx, _ = d.Begin(ctx)
				}
				if !assert.NoError(t, tx.KeepAll(ctx)) {
					return
				}
				for _, e := range tx.Entries() {
					if strings.HasPrefix(e.Path, prefix) {
						tx.Remove(e.Path)
					}
				}
				r := &rec{gen: tx.Generation(), prefix: prefix, content: fmt.Sprintf("w%d-%d", w, n), base: tx.Base().Seq}
				if !assert.NoError(t, tx.PutBytes(ctx, prefix+"f", []byte(r.content))) || !assert.NoError(t, tx.EnableRebase(commit.Rebase{Scope: prefix})) {
					return
				}
				cctx, cancel := context.WithCancel(ctx)
				if crng.IntN(3) == 0 {
					d := time.Duration(crng.IntN(8000)) * time.Microsecond
					time.AfterFunc(d, cancel)
				}
				r.p, r.err = tx.Commit(cctx, commit.CommitOptions{Message: r.content})
				cancel()
				r.carriedBy = tx.CarriedBy()
				mu.Lock()
				recs = append(recs, r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, l := range lags {
		l.stop()
	}
	inflight.Wait()

	chain := chainOf(t, direct)
	bySeq := map[uint64]*generation.Manifest{}
	for _, m := range chain {
		bySeq[m.Seq] = m
		snap, err := direct.OpenAt(ctx, m.Generation)
		require.NoError(t, err)
		for _, e := range snap.Files() {
			_, err := snap.ReadFile(ctx, e.Path)
			assert.NoError(t, err, "I1: %q of seq %d", e.Path, m.Seq)
		}
	}
	counts := map[string]int{}
	for _, r := range recs {
		apps := applications(chain, r.gen)
		obj := generation.DataKey(r.gen, r.prefix+"f")
		_, herr := s.Head(ctx, obj)
		switch {
		case r.err == nil && r.carriedBy != "":
			counts["carried"]++
		case r.err == nil:
			counts["own"]++
		case errors.Is(r.err, commit.ErrCommitUnknown):
			counts["unknown"]++
		default:
			counts["failed"]++
		}
		switch {
		case r.err == nil:
			assert.Equal(t, []uint64{r.p.Seq}, apps, "I2: %s applied once at its seq", r.content)
			if m := bySeq[r.p.Seq]; assert.NotNil(t, m) {
				assert.Equal(t, r.p.Generation, m.Generation)
				assert.Equal(t, r.carriedBy != "", m.CarriedBy(r.gen), "%s carried as it says", r.content)
			}
			assert.NoError(t, herr, "I7: objects of %s kept", r.content)
		case errors.Is(r.err, commit.ErrCommitUnknown):
			assert.LessOrEqual(t, len(apps), 1, "%s at most once", r.content)
		default:
			assert.Empty(t, apps, "%s failed (%v) but is in the history", r.content, r.err)
			assert.ErrorIs(t, herr, store.ErrNotExist, "I7: objects of failed %s deleted (%v)", r.content, r.err)
		}
	}
	t.Logf("outcomes %v over %d commits", counts, len(chain))
	return counts
}
