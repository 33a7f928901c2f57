package gc_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// TestCollectsSuperseded: with Keep 1 and no grace, everything but the
// current generation and its parent goes; a second run finds nothing to
// do and does not touch the pointer.
func TestCollectsSuperseded(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := dataset(s)
		for i := range 5 {
			publish(t, d, false, files(3, fmt.Sprint("gen", i)))
		}
		want := referenced(t, d, 1)

		rep, err := gc.Run(ctx, s, strict())
		require.NoError(t, err)
		published, _, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		assert.EqualValues(t, 4, published.GCFloor, "the floor is published before seq 1-3 go")
		assert.Len(t, rep.Deleted, 3)
		assert.Empty(t, rep.Orphans)
		assert.Len(t, rep.Kept, 2)
		assert.Equal(t, 3*4, rep.ObjectsDeleted, "3 generations of 3 files and a manifest")
		assert.Equal(t, rep.Planned, rep.ObjectsDeleted)
		assert.Positive(t, rep.BytesDeleted)
		assert.Equal(t, []uint64{5, 4}, []uint64{rep.Kept[0].Seq, rep.Kept[1].Seq})
		assert.Equal(t, "current", rep.Kept[0].Reason)
		assert.Equal(t, want, keysUnder(t, s, generation.Dir))
		assert.EqualValues(t, 2, rep.Requests[store.OpDeleteMany], "the data, then the manifests")
		requireComplete(t, d)

		// The parent is still readable; history ends with ErrCollected.
		cur, err := d.Open(ctx)
		require.NoError(t, err)
		_, err = d.OpenAt(ctx, "4")
		require.NoError(t, err)
		_, err = d.OpenAt(ctx, "2")
		require.ErrorIs(t, err, commit.ErrCollected)
		n := 0
		for _, err := range d.History(ctx, cur) {
			if err != nil {
				require.ErrorIs(t, err, commit.ErrCollected)
				break
			}
			n++
		}
		assert.Equal(t, 2, n)

		// Idempotent: nothing left to do, and the pointer changes only by
		// the run's lease token (no orphans, so no horizon; the floor is
		// already published).
		rep, err = gc.Run(ctx, s, strict())
		require.NoError(t, err)
		assert.Zero(t, rep.ObjectsDeleted)
		assert.Empty(t, rep.Deleted)
		assert.Zero(t, rep.Requests[store.OpDeleteMany])
		registeredOnly(t, s, published)
	})
}

// TestSharedKeys: incremental commits reference objects under older
// generations; collecting those generations keeps the shared objects.
func TestSharedKeys(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := dataset(s)
		p1 := publish(t, d, false, map[string]string{"a": "a1", "b": "b1", "c": "c1", "dir/_manifest": "not a manifest"})
		publish(t, d, true, map[string]string{"a": "a2"})
		publish(t, d, true, map[string]string{"b": "b3"})
		p4 := publish(t, d, true, map[string]string{"a": "a4"})

		rep, err := gc.Run(ctx, s, strict())
		require.NoError(t, err)
		after1, _, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		assert.EqualValues(t, 3, after1.GCFloor, "the floor is published before generations 1 and 2 go")
		if !assert.Len(t, rep.Deleted, 2, "generations 1 and 2") {
			var b strings.Builder
			require.NoError(t, rep.WriteText(&b))
			t.Log(b.String())
		}
		assert.Equal(t, referenced(t, d, 1), keysUnder(t, s, generation.Dir))
		// c1 and the file named _manifest live on under generation 1.
		g1 := keysUnder(t, s, generation.Prefix(p1.Generation))
		assert.Equal(t, map[string]bool{
			generation.DataKey(p1.Generation, "c"):             true,
			generation.DataKey(p1.Generation, "dir/_manifest"): true,
		}, g1)
		requireComplete(t, d)
		snap, err := d.Open(ctx)
		require.NoError(t, err)
		assert.Equal(t, p4.Generation, snap.Generation())
		for path, want := range map[string]string{"a": "a4", "b": "b3", "c": "c1"} {
			got, err := snap.ReadFile(ctx, path)
			require.NoError(t, err)
			assert.Equal(t, want, string(got))
		}

		// Generation 1's remains are outside the chain now, and with no
		// orphan age they are old enough to be orphans, but every one of
		// them is shared: nothing to do, and no horizon to publish; only
		// the run's lease token is registered.
		rep, err = gc.Run(ctx, s, strict())
		require.NoError(t, err)
		assert.Zero(t, rep.ObjectsDeleted)
		assert.Empty(t, rep.Orphans)
		assert.Contains(t, genIDs(rep.Kept), p1.Generation)
		registeredOnly(t, s, after1)
	})
}

// TestPins: a pinned generation outlives the retention window; its expired
// pins are dropped; once unpinned it is collected, as an orphan since the
// chain to it was cut.
func TestPins(t *testing.T) {
	testenv.EachStoreAtOnce(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := dataset(s)
		p1 := publish(t, d, false, files(3, "one"))
		snap1, err := d.Open(ctx)
		require.NoError(t, err)
		long, err := snap1.Pin(ctx, time.Hour, "reader")
		require.NoError(t, err)
		_, err = snap1.Pin(ctx, time.Millisecond, "reader")
		require.NoError(t, err)
		p2 := publish(t, d, false, files(3, "two"))
		publish(t, d, false, files(3, "three"))
		publish(t, d, false, files(3, "four"))
		time.Sleep(waitOlder(time.Millisecond)) // the short pin expires

		rep, err := gc.Run(ctx, s, strict())
		require.NoError(t, err)
		assert.Equal(t, []string{p2.Generation}, genIDs(rep.Deleted))
		assert.Contains(t, genIDs(rep.Kept), p1.Generation)
		assert.Equal(t, 1, rep.PinsDropped)
		assert.Len(t, keysUnder(t, s, commit.PinDir), 1)
		require.NoError(t, readAll(ctx, snap1), "the pinned snapshot is intact")

		require.NoError(t, long.Release(ctx))
		rep, err = gc.Run(ctx, s, strict())
		require.NoError(t, err)
		assert.Equal(t, []string{p1.Generation}, genIDs(rep.Orphans))
		assert.Equal(t, referenced(t, d, 1), keysUnder(t, s, generation.Dir))
		p, _, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		assert.False(t, p.GCHorizon.IsZero(), "a horizon was published before the orphan went")
		requireComplete(t, d)
	})
}

// TestStalledWriter: a writer stages, stalls past the orphan age, the
// collector removes its objects and publishes a horizon, and the writer's
// commit is refused. A writer still staging is left alone and commits.
//
// The young writer stays young only if staging it and starting the
// collection take less than the orphan age, so that age is derived from
// how long staging the stalled one took: a loaded machine gets a longer one.
func TestStalledWriter(t *testing.T) {
	testenv.EachStoreAtOnce(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := dataset(s)
		publish(t, d, false, files(2, "base"))
		start := time.Now()
		stalled := stage(t, d, 3)
		orphanAge := max(2*time.Second, 8*time.Since(start)).Round(time.Second)
		time.Sleep(waitOlder(orphanAge))
		young := stage(t, d, 2)

		opts := strict()
		opts.OrphanAge = orphanAge
		rep, err := gc.Run(ctx, s, opts)
		require.NoError(t, err)
		assert.Equal(t, []string{stalled.Generation()}, genIDs(rep.Orphans))
		assert.Equal(t, 3, rep.Orphans[0].Objects)
		assert.Contains(t, genIDs(rep.Kept), young.Generation())
		assert.Len(t, rep.Kept, 2)
		assert.Empty(t, keysUnder(t, s, generation.Prefix(stalled.Generation())))
		p, _, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		assert.True(t, rep.Horizon.Equal(p.GCHorizon), "horizon %s, pointer %s", rep.Horizon, p.GCHorizon)

		_, err = stalled.Commit(ctx, commit.CommitOptions{})
		require.ErrorIs(t, err, commit.ErrStale)
		requireComplete(t, d)
		assert.Empty(t, keysUnder(t, s, generation.Prefix(stalled.Generation())), "the refused writer discarded its manifest")

		_, err = young.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err, "a writer that started after the horizon commits")
		requireComplete(t, d)
	})
}

// TestNoPointer: without a pointer there is nowhere to publish a horizon,
// so nothing is collected, not even an old orphan.
func TestNoPointer(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		tx := stage(t, dataset(s), 2)
		before := objects(t, s)
		rep, err := gc.Run(ctx, s, strict())
		require.NoError(t, err)
		assert.Equal(t, before, objects(t, s))
		assert.Zero(t, rep.ObjectsDeleted)
		require.Len(t, rep.Notes, 1)
		assert.Contains(t, rep.Notes[0], "no pointer")
		require.NoError(t, tx.Discard(ctx))
	})
}

// TestDryRun: a dry run sends no write, not even for a lease, and plans
// exactly what the real run then does.
func TestDryRun(t *testing.T) {
	testenv.EachStoreAtOnce(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := dataset(s)
		for i := range 4 {
			publish(t, d, i > 0, files(2, fmt.Sprint("gen", i)))
		}
		orphan := stage(t, d, 2)
		time.Sleep(waitOlder(0))
		before := objects(t, s)

		opts := strict()
		opts.DryRun = true
		dry, err := gc.Run(ctx, s, opts)
		require.NoError(t, err)
		assert.True(t, dry.DryRun)
		assert.Equal(t, before, objects(t, s), "a dry run changes nothing")
		assert.Len(t, dry.Deleted, 2)
		assert.Equal(t, []string{orphan.Generation()}, genIDs(dry.Orphans))
		assert.Positive(t, dry.ObjectsDeleted)
		for _, op := range []store.Op{store.OpPut, store.OpDelete, store.OpDeleteMany} {
			assert.Zero(t, dry.Requests[op], "a dry run sends no %s", op)
		}
		assert.Positive(t, dry.Requests[store.OpGet])

		real, err := gc.Run(ctx, s, strict())
		require.NoError(t, err)
		assert.Equal(t, genIDs(dry.Deleted), genIDs(real.Deleted))
		assert.Equal(t, genIDs(dry.Orphans), genIDs(real.Orphans))
		assert.Equal(t, dry.ObjectsDeleted, real.ObjectsDeleted)
		assert.Equal(t, dry.BytesDeleted, real.BytesDeleted)
		assert.Equal(t, referenced(t, d, 1), keysUnder(t, s, generation.Dir))
	})
}

// TestRetention covers the retention rules one by one on the in-memory
// store.
func TestRetention(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts gc.Options
		kept int // of 6 generations
	}{
		{"defaults keep everything young", gc.Options{}, 6},
		{"keep 2, no grace", gc.Options{Keep: 2, Grace: -1}, 3},
		{"keep 0, no grace", gc.Options{Keep: -1, Grace: -1}, 1},
		{"keep 0, long grace", gc.Options{Keep: -1, Grace: time.Hour}, 6},
		{"keep 10", gc.Options{Keep: 10, Grace: -1}, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := storeFor(t)
			d := dataset(s)
			for i := range 6 {
				publish(t, d, false, files(1, fmt.Sprint(i)))
			}
			rep, err := gc.Run(ctx, s, tc.opts)
			require.NoError(t, err)
			assert.Len(t, rep.Kept, tc.kept)
			assert.Len(t, rep.Deleted, 6-tc.kept)
			assert.Equal(t, referenced(t, d, tc.kept-1), keysUnder(t, s, generation.Dir))
		})
	}
}

// TestGraceBySuccessorAge: an ancestor stays while its successor's manifest
// is younger than the grace, judged by the store's clock.
func TestGraceBySuccessorAge(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	d := dataset(s)
	publish(t, d, false, files(1, "1"))
	clock.Advance(10 * time.Minute)
	publish(t, d, false, files(1, "2")) // gen 1 superseded at T+10m
	clock.Advance(10 * time.Minute)
	publish(t, d, false, files(1, "3")) // gen 2 superseded at T+20m
	clock.Advance(15 * time.Minute)     // now T+35m

	opts := gc.Options{Keep: -1, Grace: 20 * time.Minute}
	rep, err := gc.Run(ctx, s, opts)
	require.NoError(t, err)
	require.Len(t, rep.Kept, 2, "gen 2, superseded 15 min ago, is within the grace")
	assert.Contains(t, rep.Kept[1].Reason, "within the 20m0s grace")
	require.Len(t, rep.Deleted, 1, "gen 1, superseded 25 min ago, is not")
	assert.EqualValues(t, 1, rep.Deleted[0].Seq)

	clock.Advance(6 * time.Minute)
	rep, err = gc.Run(ctx, s, opts)
	require.NoError(t, err)
	assert.Len(t, rep.Kept, 1)
	assert.Len(t, rep.Deleted, 1)
}

// TestTwoCollectors: two collectors started together; exactly one works,
// the other reports who holds the lease and does nothing.
func TestTwoCollectors(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := dataset(s)
		for i := range 4 {
			publish(t, d, false, files(2, fmt.Sprint(i)))
		}
		// The winner waits at its registration in the pointer, under the
		// lease, until the loser is done, so the two runs overlap for sure.
		open := make(chan struct{})
		gates := map[string]*gate{}
		type result struct {
			owner string
			rep   *gc.Report
			err   error
		}
		results := make(chan result, 2)
		start := make(chan struct{})
		for _, owner := range []string{"collector-a", "collector-b"} {
			g := &gate{Store: s, open: open}
			gates[owner] = g
			go func() {
				<-start
				opts := strict()
				opts.Owner = owner
				rep, err := gc.Run(ctx, g, opts)
				results <- result{owner, rep, err}
			}()
		}
		close(start)
		first := <-results
		close(open)
		second := <-results

		require.ErrorIs(t, first.err, lease.ErrHeld)
		var held *lease.HeldError
		require.ErrorAs(t, first.err, &held)
		assert.Equal(t, second.owner, held.Owner, "the error names the holder")
		assert.Contains(t, first.err.Error(), second.owner)
		assert.Zero(t, first.rep.ObjectsDeleted)
		assert.Zero(t, first.rep.Requests[store.OpDeleteMany])
		assert.Zero(t, first.rep.Requests[store.OpList])
		assert.Zero(t, gates[first.owner].reached.Load(), "the loser wrote nothing to the pointer")

		require.NoError(t, second.err)
		assert.Len(t, second.rep.Deleted, 2)
		assert.Positive(t, gates[second.owner].reached.Load(), "the holder registered its token")
		assert.Equal(t, referenced(t, d, 1), keysUnder(t, s, generation.Dir))
	})
}

// gate blocks pointer writes until open is closed.
type gate struct {
	store.Store
	open    chan struct{}
	reached atomic.Int32
}

func (g *gate) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	if key == pointer.Key {
		g.reached.Add(1)
		select {
		case <-g.open:
		case <-time.After(20 * time.Second):
			return store.Attrs{}, errors.New("gate: never opened")
		}
	}
	return g.Store.Put(ctx, key, body, opts)
}

// seedBig commits a generation of n files, then two small ones on top: with
// Keep 1 the first is garbage of n+1 keys.
func seedBig(t *testing.T, s store.Store, n int) (d *commit.Dataset, big string) {
	t.Helper()
	d = dataset(s)
	p := publish(t, d, false, files(n, "big"))
	publish(t, d, false, files(1, "two"))
	publish(t, d, false, files(1, "three"))
	return d, p.Generation
}

// TestLeaseTakenOver: a collector whose lease is taken over between two
// delete requests stops before the second; the new holder finishes.
//
// The garbage is one generation of 999 data objects and its manifest:
// one request for the data, then one for the manifest, which is sent only
// once the data are gone. The collector stalls in its progress callback
// after the first request, as a paused process would, until the lease
// expires by the store's clock and another collector takes it over. On
// mem that clock is moved by hand. The other drivers wait out a TTL
// derived from how long a dry run of the same collection took, so that a
// loaded machine does not lose the lease before the first request. The
// manifest must survive: a collector that deleted it early, with its data
// or before them, fails here.
func TestLeaseTakenOver(t *testing.T) {
	thief := func(s store.Store) (*lease.Lease, error) {
		return lease.TryAcquire(context.Background(), s, gc.LeaseName, lease.Options{TTL: time.Minute, Owner: "thief"})
	}
	t.Run("mem", func(t *testing.T) {
		clock := newStoreClock()
		s := memStore(clock.Now)
		leaseTakenOver(t, s, time.Minute, func(ttl time.Duration) *lease.Lease {
			clock.Advance(ttl + 2*time.Second)
			l, err := thief(s)
			require.NoError(t, err)
			return l
		})
	})
	var wg sync.WaitGroup
	for _, f := range testenv.Stores() {
		if f.Name == "mem" {
			continue
		}
		wg.Go(func() {
			t.Run(f.Name, func(t *testing.T) {
				s := f.New(t)
				leaseTakenOver(t, s, 0, func(ttl time.Duration) *lease.Lease {
					for deadline := time.Now().Add(3*ttl + 10*time.Second); time.Now().Before(deadline); {
						l, err := thief(s)
						if err == nil {
							return l
						}
						require.ErrorIs(t, err, lease.ErrHeld)
						time.Sleep(200 * time.Millisecond)
					}
					t.Fatal("the lease never expired")
					return nil
				})
			})
		})
	}
	wg.Wait()
}

// leaseTakenOver seeds s and runs a collector with lease TTL ttl, or with
// one derived from a dry run of the same collection if ttl is 0. After
// its first delete request takeOver must return the lease of another
// collector. The collector must stop before its second request, and a run
// after the thief's finishes the collection.
func leaseTakenOver(t *testing.T, s store.Store, ttl time.Duration, takeOver func(ttl time.Duration) *lease.Lease) {
	ctx := context.Background()
	d, big := seedBig(t, s, 999)
	if ttl == 0 {
		dry := strict()
		dry.DryRun = true
		start := time.Now()
		_, err := gc.Run(ctx, s, dry)
		require.NoError(t, err)
		took := time.Since(start)
		ttl = max(3*time.Second, 8*took).Truncate(time.Millisecond)
		t.Logf("a dry run took %s: lease TTL %s", took, ttl)
	}
	var thief *lease.Lease
	calls := 0
	opts := strict()
	opts.LeaseTTL = ttl
	opts.Progress = func(deleted, total int) {
		if calls++; calls == 1 {
			thief = takeOver(ttl)
		}
	}
	rep, err := gc.Run(ctx, s, opts)
	require.NotNil(t, thief, "the first delete request was made")
	require.ErrorIs(t, err, lease.ErrLost)
	assert.Contains(t, err.Error(), "delete batch 2")
	assert.Equal(t, 999, rep.ObjectsDeleted)
	assert.Equal(t, 1000, rep.Planned)
	assert.EqualValues(t, 1, rep.Requests[store.OpDeleteMany])
	left := keysUnder(t, s, generation.Prefix(big))
	assert.Equal(t, map[string]bool{generation.ManifestKey(big): true}, left, "the manifest goes last")

	// While the thief holds the lease nobody collects.
	_, err = gc.Run(ctx, s, strict())
	require.ErrorIs(t, err, lease.ErrHeld)
	require.NoError(t, thief.Release(ctx))
	rep, err = gc.Run(ctx, s, strict())
	require.NoError(t, err)
	assert.Equal(t, 1, rep.ObjectsDeleted)
	assert.Equal(t, referenced(t, d, 1), keysUnder(t, s, generation.Dir))
	requireComplete(t, d)
}

// TestCrashBetweenBatches: a failure of a delete request leaves a state
// that the next run completes, ending where an uninterrupted run would:
// a data request fails (the manifest is then never sent), or the
// manifest's request fails after all the data are gone.
func TestCrashBetweenBatches(t *testing.T) {
	for _, tc := range []struct {
		name     string
		manifest bool // the manifest's request fails, not a data request
	}{{"data", false}, {"manifest", true}} {
		t.Run(tc.name, func(t *testing.T) {
			testenv.EachStoreAtOnce(t, func(t *testing.T, s store.Store) {
				ctx := context.Background()
				d, big := seedBig(t, s, 1001)
				fs := faults.NewStore(s)
				key := generation.Prefix(big) // the first request, a data one
				if tc.manifest {
					key = generation.ManifestKey(big)
				}
				fs.Add(faults.Rule{Op: store.OpDeleteMany, Key: key, Kind: faults.Refused, Times: 1})
				rep, err := gc.Run(ctx, fs, strict())
				require.ErrorIs(t, err, faults.ErrInjected)
				assert.Contains(t, err.Error(), "delete batch")
				assert.True(t, keysUnder(t, s, generation.Prefix(big))[generation.ManifestKey(big)], "the manifest goes last")
				if tc.manifest {
					assert.Equal(t, 1001, rep.ObjectsDeleted, "every data object went first")
				} else {
					assert.Less(t, rep.ObjectsDeleted, 1001)
				}
				requireComplete(t, d)

				rep, err = gc.Run(ctx, fs, strict())
				require.NoError(t, err)
				assert.Equal(t, []string{big}, genIDs(rep.Deleted), "the generation is found in the chain again")
				assert.Equal(t, referenced(t, d, 1), keysUnder(t, s, generation.Dir))

				rep, err = gc.Run(ctx, fs, strict())
				require.NoError(t, err)
				assert.Zero(t, rep.Planned, "converged")
			})
		})
	}
}

// TestHorizonFaults: the horizon write fails before it is sent, or lands
// but its response is lost. Either way nothing unsafe happens and the next
// run converges.
func TestHorizonFaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		kind    faults.Kind
		failRun bool
	}{
		{"write fails", faults.Refused, true},
		{"response lost", faults.Lost, false},
		{"retry refused", faults.Retried, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := storeFor(t)
			d := dataset(s)
			publish(t, d, false, files(2, "one"))
			orphan := stage(t, d, 2)
			fs := faults.NewStore(s)
			// The registration of the lease token passes (a Held rule
			// without Then); the horizon write that follows is hit.
			fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Held, Times: 1})
			fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: tc.kind, Times: 1})
			before := objectsButPointer(t, s)
			rep, err := gc.Run(ctx, fs, strict())
			if tc.failRun {
				require.ErrorIs(t, err, faults.ErrInjected)
				assert.Contains(t, err.Error(), "publish horizon")
				assert.Zero(t, rep.ObjectsDeleted)
				assert.Equal(t, before, objectsButPointer(t, s), "nothing deleted without a horizon")
				rep, err = gc.Run(ctx, fs, strict())
			}
			require.NoError(t, err)
			assert.Equal(t, []string{orphan.Generation()}, genIDs(rep.Orphans))
			assert.Equal(t, referenced(t, d, 1), keysUnder(t, s, generation.Dir))
			_, err = orphan.Commit(ctx, commit.CommitOptions{})
			require.ErrorIs(t, err, commit.ErrStale)
			requireComplete(t, d)
		})
	}
}

// TestReplanOnCommit: a commit that lands between the collector's pointer
// read and its horizon write makes the horizon CAS fail; the collector
// plans again and finds the committed generation in the chain.
func TestReplanOnCommit(t *testing.T) {
	ctx := context.Background()
	s := storeFor(t)
	d := dataset(s)
	publish(t, d, false, files(1, "one"))
	orphan := stage(t, d, 1)
	late := stage(t, d, 1) // staged before the run, committed during it
	hook := &hookStore{Store: s, beforeList: func(prefix string) {
		if prefix == generation.Dir {
			_, err := late.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
		}
	}}
	rep, err := gc.Run(ctx, hook, strict())
	require.NoError(t, err)
	assert.Equal(t, []string{orphan.Generation()}, genIDs(rep.Orphans))
	assert.Equal(t, late.Generation(), rep.Generation, "planned again from the new pointer")
	requireComplete(t, d)
	assert.Equal(t, referenced(t, d, 1), keysUnder(t, s, generation.Dir))
}

// hookStore calls beforeList once, before the first listing of a prefix.
type hookStore struct {
	store.Store
	once       sync.Once
	beforeList func(prefix string)
}

func (h *hookStore) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	if req.Prefix == generation.Dir {
		h.once.Do(func() { h.beforeList(req.Prefix) })
	}
	return h.Store.List(ctx, req)
}

// TestCorruptState: an unreadable or corrupt pointer or manifest stops the
// run with a clear error before anything is deleted.
func TestCorruptState(t *testing.T) {
	type setup struct {
		s    store.Store
		ptr  *pointer.Pointer
		etag string
		gens []string // oldest first
	}
	put := func(t *testing.T, s store.Store, key string, body []byte) {
		t.Helper()
		_, err := s.Put(context.Background(), key, bytes.NewReader(body), store.PutOptions{})
		require.NoError(t, err)
	}
	get := func(t *testing.T, s store.Store, key string) []byte {
		t.Helper()
		rc, _, err := s.Get(context.Background(), key)
		require.NoError(t, err)
		defer rc.Close()
		b, err := io.ReadAll(rc)
		require.NoError(t, err)
		return b
	}
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, x setup)
		is      error
		mention string
		// chain: the pointer and its manifest agree, and the corruption
		// is further down the chain, found once the run has registered
		// its lease token. Otherwise the run writes nothing at all.
		chain bool
	}{
		{"corrupt pointer", func(t *testing.T, x setup) {
			put(t, x.s, pointer.Key, []byte(`{"format":1,"seq":`))
		}, pointer.ErrCorrupt, pointer.Key, false},
		{"unknown pointer format", func(t *testing.T, x setup) {
			put(t, x.s, pointer.Key, []byte(`{"format":99}`))
		}, pointer.ErrCorrupt, "unknown format 99", false},
		{"pointer names a missing manifest", func(t *testing.T, x setup) {
			require.NoError(t, x.s.Delete(context.Background(), x.ptr.Manifest, store.DeleteOptions{}))
		}, store.ErrNotExist, "manifest is missing", false},
		{"truncated current manifest", func(t *testing.T, x setup) {
			b := get(t, x.s, x.ptr.Manifest)
			put(t, x.s, x.ptr.Manifest, b[:len(b)/2])
		}, generation.ErrCorrupt, "does not match the sha256", false},
		{"corrupt manifest in the chain", func(t *testing.T, x setup) {
			put(t, x.s, generation.ManifestKey(x.gens[1]), []byte("garbage"))
		}, generation.ErrCorrupt, "does not match the sha256", true},
		{"replaced manifest in the chain", func(t *testing.T, x setup) {
			// Valid, but not the manifest its child recorded.
			key := generation.ManifestKey(x.gens[2])
			b := get(t, x.s, key)
			put(t, x.s, key, bytes.Replace(b, []byte(`"seq":3`), []byte(`"seq":3 `), 1))
		}, generation.ErrCorrupt, "does not match the sha256", true},
		{"manifest with a path escaping the dataset", func(t *testing.T, x setup) {
			// A consistent pointer and manifest, but the manifest is hostile.
			b := get(t, x.s, x.ptr.Manifest)
			b = bytes.Replace(b, []byte(`"path":"f0000"`), []byte(`"path":"../x"`), 1)
			put(t, x.s, x.ptr.Manifest, b)
			sum := sha256.Sum256(b)
			p := *x.ptr
			p.ManifestSHA256 = hex.EncodeToString(sum[:])
			_, err := pointer.Write(context.Background(), x.s, &p, x.etag)
			require.NoError(t, err)
		}, generation.ErrCorrupt, "../x", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testenv.EachStore(t, func(t *testing.T, s store.Store) {
				ctx := context.Background()
				d := dataset(s)
				x := setup{s: s}
				for i := range 4 {
					x.gens = append(x.gens, publish(t, d, false, files(2, fmt.Sprint(i))).Generation)
				}
				var err error
				x.ptr, _, err = pointer.Read(ctx, s)
				require.NoError(t, err)
				_, attrs, err := pointer.Read(ctx, s)
				require.NoError(t, err)
				x.etag = attrs.ETag
				tc.corrupt(t, x)
				before, unchanged := objectsButPointer(t, s), stateOf(t, s)
				registered, _, perr := pointer.Read(ctx, s)

				rep, err := gc.Run(ctx, s, strict())
				require.ErrorIs(t, err, gc.ErrRefused)
				require.ErrorIs(t, err, tc.is)
				assert.Contains(t, err.Error(), tc.mention)
				t.Log(err)
				assert.Zero(t, rep.ObjectsDeleted)
				if tc.chain {
					require.NoError(t, perr)
					registeredOnly(t, s, registered)
					assert.Equal(t, before, objectsButPointer(t, s), "nothing but the pointer's lease token changed")
				} else {
					assert.Contains(t, err.Error(), fmt.Sprintf("pointer %q: ", pointer.Key))
					assert.Equal(t, unchanged, stateOf(t, s), "a pointer that does not pass its check is not rewritten, nor the lease written: nothing changed")
				}
				assert.Zero(t, rep.Requests[store.OpDeleteMany])
			})
		})
	}
}

// TestReportText checks the human summary.
func TestReportText(t *testing.T) {
	ctx := context.Background()
	s := storeFor(t)
	d := dataset(s)
	for i := range 4 {
		publish(t, d, false, files(2, fmt.Sprint(i)))
	}
	opts := strict()
	opts.DryRun = true
	rep, err := gc.Run(ctx, s, opts)
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b))
	out := b.String()
	t.Log("\n" + out)
	assert.Contains(t, out, "dry run at seq 4")
	assert.Contains(t, out, "kept: 2 generations, 6 objects")
	assert.Contains(t, out, "would delete (superseded): 2 generations, 6 objects")
	assert.Contains(t, out, "current")
	assert.Contains(t, out, "requests: ")

	rep, err = gc.Run(ctx, s, strict())
	require.NoError(t, err)
	b.Reset()
	require.NoError(t, rep.WriteText(&b))
	assert.Contains(t, b.String(), "collected at seq 4")
	assert.Contains(t, b.String(), "objects deleted: 6 of 6 planned")

	assert.Equal(t, "0 B", gc.FormatBytes(0))
	assert.Equal(t, "1023 B", gc.FormatBytes(1023))
	assert.Equal(t, "1.5 KiB", gc.FormatBytes(1536))
	assert.Equal(t, "2.0 MiB", gc.FormatBytes(2<<20))
}

// TestOldEpochsDropped: epochs of epoch locks that ended long ago are
// removed; the latest epoch stays, so epochs never repeat.
func TestOldEpochsDropped(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	publish(t, dataset(s), false, files(1, "one"))
	for range 3 {
		e, err := lease.TryAcquireEpoch(ctx, s, "writer", lease.Options{TTL: time.Minute})
		require.NoError(t, err)
		require.NoError(t, e.Release(ctx))
	}
	rep, err := gc.Run(ctx, s, strict())
	require.NoError(t, err)
	assert.Zero(t, rep.EpochsDropped, "young epochs stay")

	clock.Advance(2 * gc.MinEpochAge)
	rep, err = gc.Run(ctx, s, strict())
	require.NoError(t, err)
	assert.Equal(t, 2, rep.EpochsDropped)
	info, err := lease.StatusEpoch(ctx, s, "writer")
	require.NoError(t, err)
	assert.EqualValues(t, 3, info.Token, "the latest epoch is kept")
	e, err := lease.TryAcquireEpoch(ctx, s, "writer", lease.Options{TTL: time.Minute})
	require.NoError(t, err)
	assert.EqualValues(t, 4, e.Epoch())
}

// TestLeavesUnknownKeysAlone: keys the collector does not understand are
// never deleted, and the report says so.
func TestLeavesUnknownKeysAlone(t *testing.T) {
	ctx := context.Background()
	s := storeFor(t)
	d := dataset(s)
	publish(t, d, false, files(1, "one"))
	for _, key := range []string{"_gen/not-a-generation/x", "_pin/garbage", "_pin/" + "0190b0a0-0000-7000-8000-000000000000/soon"} {
		_, err := s.Put(ctx, key, strings.NewReader("?"), store.PutOptions{})
		require.NoError(t, err)
	}
	publish(t, d, false, files(1, "two"))
	publish(t, d, false, files(1, "three"))
	before := objects(t, s)
	rep, err := gc.Run(ctx, s, strict())
	require.NoError(t, err)
	assert.Len(t, rep.Deleted, 1)
	after := objects(t, s)
	for _, key := range []string{"_gen/not-a-generation/x", "_pin/garbage", "_pin/0190b0a0-0000-7000-8000-000000000000/soon"} {
		assert.Equal(t, before[key], after[key], key)
	}
	assert.Len(t, rep.Notes, 2)
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b))
	assert.Contains(t, b.String(), "note: 1 keys under _gen/ belong to no valid generation id")
	assert.Contains(t, b.String(), "note: 2 malformed keys under _pin/")
}

// TestDeadIntents: the collector drops the group-commit intents bound to
// pointer values that are gone, which no commit can carry, and keeps one
// bound to the value it leaves, which a commit may still carry. (Every
// run rewrites the pointer to register its lease token, so the test
// writes that intent whenever the collector writes the pointer.)
func TestDeadIntents(t *testing.T) {
	testenv.EachStoreAtOnce(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := dataset(s)
		publish(t, d, false, files(1, "one"))
		gone := "00000000-0000-4000-8000-000000000000" // an earlier value
		for _, k := range []string{commit.IntentDir + gone + "/a", commit.IntentDir + gone + "/b"} {
			_, err := s.Put(ctx, k, strings.NewReader("{}"), store.PutOptions{})
			require.NoError(t, err)
		}
		fs := faults.NewStore(s)
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Held, Then: func() {
			p, _, err := pointer.Read(ctx, s)
			require.NoError(t, err)
			_, err = s.Put(ctx, commit.IntentDir+p.WriteID+"/live", strings.NewReader("{}"), store.PutOptions{})
			require.NoError(t, err)
		}})
		rep, err := gc.Run(ctx, fs, strict())
		require.NoError(t, err)
		now, _, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, rep.IntentsDropped, 2)
		assert.Equal(t, map[string]bool{commit.IntentDir + now.WriteID + "/live": true}, keysUnder(t, s, commit.IntentDir))
	})
}
