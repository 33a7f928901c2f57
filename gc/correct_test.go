package gc_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// TestCommitDuringHorizonCAS: commits land while the collector's
// horizon/floor CAS is held in flight, so the CAS fails. The collector
// corrects its plan by the generations committed meanwhile and sends the
// CAS again at once. Nothing those generations need may be deleted: A was
// staged before the run and looked like an orphan to the plan; C keeps
// the files of seq 1, which the plan was to delete. O, a crashed writer,
// is collected. In "two
// windows" the CAS sent after the first correction is held too, and C
// lands then: the plan is corrected twice.
func TestCommitDuringHorizonCAS(t *testing.T) {
	for _, tc := range []struct {
		name string
		held int // CASes held in flight
	}{{"one window", 1}, {"two windows", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			testenv.EachStoreAtOnce(t, func(t *testing.T, s store.Store) {
				ctx := context.Background()
				d := dataset(s)
				for i := range 3 {
					publish(t, d, false, files(2, fmt.Sprint("seq", i+1)))
				}
				first, err := d.OpenAt(ctx, "1")
				require.NoError(t, err)
				orphan := stage(t, d, 2) // a crashed writer
				a := stage(t, d, 2)      // committed during the collection
				time.Sleep(waitOlder(0)) // both orphans by the store's clock
				var c *pointer.Pointer
				commitC := func() {
					tx, err := d.Begin(ctx)
					require.NoError(t, err)
					tx.KeepFrom(first) // seq 1's files, planned for deletion
					require.NoError(t, tx.PutBytes(ctx, "c", []byte("c")))
					c, err = tx.Commit(ctx, commit.CommitOptions{})
					require.NoError(t, err)
				}
				windows := 0
				fs := faults.NewStore(s)
				// The registration of the lease token passes; the CASes
				// that follow it are held while the commits land.
				fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Held, Times: 1})
				fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: tc.held, Then: func() {
					windows++
					if windows == 1 {
						_, err := a.Commit(ctx, commit.CommitOptions{})
						require.NoError(t, err)
					}
					if windows == tc.held {
						commitC()
					}
				}})
				rep, err := gc.Run(ctx, fs, strict())
				require.NoError(t, err)
				require.Equal(t, tc.held, windows, "every held CAS was sent")
				require.NotNil(t, c)
				assert.Equal(t, c.Generation, rep.Generation, "the horizon was published on the pointer naming C")
				assert.Equal(t, []string{orphan.Generation()}, genIDs(rep.Orphans), "A is no orphan once committed")
				reasons := map[string]string{}
				for _, k := range rep.Kept {
					reasons[k.Generation] = k.Reason
				}
				assert.Equal(t, "committed while the collector planned", reasons[a.Generation()], "the plan was corrected, not made again")
				assert.Equal(t, "committed while the collector planned", reasons[c.Generation])

				// I1 and I4: C and its parent A are whole, and C's files
				// from seq 1 are there.
				requireComplete(t, d)
				snapA, err := d.OpenAt(ctx, "4")
				require.NoError(t, err)
				assert.Equal(t, a.Generation(), snapA.Generation())
				require.NoError(t, readAll(ctx, snapA), "A, committed during the collection, is whole")
				// The corrected plan keeps its own window (seq 3 and 2) as
				// well: what C, A, 3 and 2 reference, nothing else.
				assert.Equal(t, referenced(t, d, 3), keysUnder(t, s, generation.Dir))
				after, _, err := pointer.Read(ctx, s)
				require.NoError(t, err)
				assert.EqualValues(t, 2, after.GCFloor, "the plan's floor, from seq 3 with Keep 1")
				assert.False(t, after.GCHorizon.IsZero())

				assert.Empty(t, keysUnder(t, s, generation.Prefix(orphan.Generation())), "the crashed writer's objects are gone")
				_, err = orphan.Commit(ctx, commit.CommitOptions{})
				require.Error(t, err)
			})
		})
	}
}

// TestPinDuringCorrectedCAS: while the horizon CAS is held, a commit lands
// and a reader pins (or tags) the generation the plan deletes. The
// corrected CAS then succeeds; the collector must still list the pins and
// tags again after it and keep the generation.
func TestPinDuringCorrectedCAS(t *testing.T) {
	for _, how := range []string{"pin", "tag"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			s := storeFor(t)
			d := dataset(s)
			for i := range 3 {
				publish(t, d, false, files(2, fmt.Sprint("seq", i+1)))
			}
			old, err := d.OpenAt(ctx, "1")
			require.NoError(t, err)
			stage(t, d, 1) // an orphan: the run needs its horizon CAS
			fs := faults.NewStore(s)
			fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Held, Times: 1})
			fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
				publish(t, d, false, files(1, "four"))
				if how == "pin" {
					_, err := old.Pin(ctx, time.Hour, "reader")
					require.NoError(t, err, "the floor is not published yet")
				} else {
					_, err := old.Tag(ctx, "release", false)
					require.NoError(t, err)
				}
			}})
			rep, err := gc.Run(ctx, fs, strict())
			require.NoError(t, err)
			assert.Contains(t, genIDs(rep.Kept), old.Generation())
			assert.NotContains(t, genIDs(rep.Deleted), old.Generation())
			require.NoError(t, readAll(ctx, old), "the %sned generation is whole", how)
			requireComplete(t, d)
		})
	}
}

// deleteOrder checks, at every DeleteMany, the order the sweep owes crash
// safety: a request that deletes a manifest is sent only when no request
// for data objects is in flight and none of that generation's data
// objects planned for deletion is left. It holds the first request until a
// second one arrives, so that the data requests overlap for certain.
type deleteOrder struct {
	store.Store
	t        *testing.T
	mu       sync.Mutex
	inFlight int
	data     int // requests for data objects in flight
	requests int
	second   chan struct{}
	parallel bool // two requests were in flight at once
}

func (o *deleteOrder) DeleteMany(ctx context.Context, keys []string) error {
	o.mu.Lock()
	o.requests++
	n := o.requests
	o.inFlight++
	if o.inFlight > 1 {
		o.parallel = true
	}
	manifests := 0
	for _, k := range keys {
		if generation.ManifestKey(generation.FromKey(k)) == k {
			manifests++
		}
	}
	if manifests == 0 {
		o.data++
		defer func() {
			o.mu.Lock()
			o.data--
			o.mu.Unlock()
		}()
	} else {
		assert.Zero(o.t, o.data, "a manifest is deleted while a request for data objects is in flight")
		for _, k := range keys {
			gen := generation.FromKey(k)
			for left := range keysUnder(o.t, o.Store, generation.Prefix(gen)) {
				if left != generation.ManifestKey(gen) {
					assert.Fail(o.t, "a manifest is deleted before its data", "%s goes while %s is still there", k, left)
				}
			}
		}
	}
	o.mu.Unlock()
	switch n {
	case 1:
		select {
		case <-o.second:
		case <-time.After(30 * time.Second):
			o.t.Error("the delete requests for the data were not sent in parallel")
		}
	case 2:
		close(o.second)
	}
	err := o.Store.DeleteMany(ctx, keys)
	o.mu.Lock()
	o.inFlight--
	o.mu.Unlock()
	return err
}

// TestManifestsAfterData: the data objects of a backlog are deleted by
// several requests at once, and the manifests only after every one of
// them has finished (see deleteOrder).
func TestManifestsAfterData(t *testing.T) {
	ctx := context.Background()
	s := storeFor(t)
	seedChain(t, s, 300, 10)
	o := &deleteOrder{Store: s, t: t, second: make(chan struct{})}
	rep, err := gc.Run(ctx, o, gc.Options{Keep: 2, Grace: -1, OrphanAge: time.Hour, Owner: "test"})
	require.NoError(t, err)
	assert.True(t, o.parallel, "data requests overlapped")
	assert.Equal(t, 297*11, rep.ObjectsDeleted)
	assert.Equal(t, 4, o.requests, "3 requests for the data, 1 for the manifests")
	assert.Equal(t, referenced(t, dataset(s), 2), keysUnder(t, s, generation.Dir))
	requireComplete(t, dataset(s))
}

// TestMaxDelete: a backlog collected in steps of at most MaxDelete
// objects. Each step leaves the chain walkable: the next run finds every
// generation left in the chain (none as an orphan, which a generation
// whose manifest went before its data would be) and continues, until
// nothing is left.
func TestMaxDelete(t *testing.T) {
	ctx := context.Background()
	s := storeFor(t)
	seedChain(t, s, 30, 10) // 27 garbage generations of 11 objects
	d := dataset(s)
	opts := gc.Options{Keep: 2, Grace: -1, OrphanAge: -1, Owner: "test", MaxDelete: 25}
	left, runs, deleted := 27*11, 0, 0
	for left > 0 {
		runs++
		require.LessOrEqual(t, runs, 20, "the collection does not converge")
		rep, err := gc.Run(ctx, s, opts)
		require.NoError(t, err)
		assert.Empty(t, rep.Orphans, "run %d: the generations left are still in the chain", runs)
		assert.LessOrEqual(t, rep.ObjectsDeleted, 25)
		assert.Equal(t, rep.Planned, rep.ObjectsDeleted)
		assert.Equal(t, left-rep.ObjectsDeleted, rep.Left, "run %d", runs)
		left, deleted = rep.Left, deleted+rep.ObjectsDeleted
		requireComplete(t, d)
	}
	assert.Equal(t, 27*11, deleted)
	assert.Equal(t, 12, runs, "25 objects a run")
	assert.Equal(t, referenced(t, d, 2), keysUnder(t, s, generation.Dir))
}

// TestBudget: a run whose time budget is spent when it is ready to delete
// deletes nothing, says how much it left, and leaves the chain for the
// next run.
func TestBudget(t *testing.T) {
	ctx := context.Background()
	s := storeFor(t)
	seedChain(t, s, 10, 10)
	d := dataset(s)
	opts := gc.Options{Keep: 2, Grace: -1, OrphanAge: -1, Owner: "test", Budget: time.Nanosecond}
	rep, err := gc.Run(ctx, s, opts)
	require.NoError(t, err)
	assert.Zero(t, rep.ObjectsDeleted)
	assert.Zero(t, rep.Requests[store.OpDeleteMany])
	assert.Equal(t, 7*11, rep.Left)
	assert.Contains(t, rep.Notes[len(rep.Notes)-1], "budget was spent")
	opts.Budget = 0
	rep, err = gc.Run(ctx, s, opts)
	require.NoError(t, err)
	assert.Len(t, rep.Deleted, 7)
	assert.Zero(t, rep.Left)
	assert.Equal(t, referenced(t, d, 2), keysUnder(t, s, generation.Dir))
}

// TestHorizonReadBackRetried: the horizon CAS lands but its response is
// lost, and the first read of the pointer that should settle it fails as
// well. The read is tried again, finds the write, and the run goes on
// instead of failing (seen in the soak, with faults on).
func TestHorizonReadBackRetried(t *testing.T) {
	ctx := context.Background()
	s := storeFor(t)
	d := dataset(s)
	publish(t, d, false, files(2, "one"))
	orphan := stage(t, d, 2)
	fs := faults.NewStore(s)
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Held, Times: 1})
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Lost, Times: 1, Then: func() {
		fs.Add(faults.Rule{Op: store.OpGet, Key: pointer.Key, Kind: faults.Refused, Times: 1})
	}})
	rep, err := gc.Run(ctx, fs, strict())
	require.NoError(t, err)
	assert.Equal(t, []string{orphan.Generation()}, genIDs(rep.Orphans))
	assert.Empty(t, keysUnder(t, s, generation.Prefix(orphan.Generation())))
	requireComplete(t, d)
}

// TestCancelledRunDoesNotWarn: a run whose caller cancelled it (publish gc
// --every on SIGTERM) logs no warning: the caller knows why it stopped.
func TestCancelledRunDoesNotWarn(t *testing.T) {
	s := storeFor(t)
	publish(t, dataset(s), false, files(1, "one"))
	var logged strings.Builder
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	opts := strict()
	opts.Logger = slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelInfo}))
	_, err := gc.Run(ctx, s, opts)
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, logged.String(), "stopped by the caller")
	assert.NotContains(t, logged.String(), "level=WARN")
}
