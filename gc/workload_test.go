package gc_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// TestMixedWorkload runs writers, readers and collectors at once for a few
// seconds with short retention, then checks the invariants:
//
//   - I4: no reader of a pinned snapshot, and no reader that finished within
//     the grace, ever gets ErrCollected;
//   - I1: whenever a reader finds an object of the current generation
//     missing, the pointer has moved on (the generation was not current);
//     and at the end the pointer resolves completely;
//   - I7: after the run, the orphan age and one more collection, nothing
//     unreferenced remains under _gen/.
func TestMixedWorkload(t *testing.T) {
	const (
		run       = 4 * time.Second
		grace     = 500 * time.Millisecond
		orphanAge = 2 * time.Second
		nfiles    = 6
	)
	testenv.EachStoreAtOnce(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := dataset(s)
		publish(t, d, false, files(nfiles, "seed"))
		opts := gc.Options{Keep: 1, Grace: grace, OrphanAge: orphanAge, LeaseTTL: time.Minute}

		var (
			wg                                  sync.WaitGroup
			stop                                = make(chan struct{})
			commits, lost, abandoned, reads     atomic.Int64
			lateCollected, runs, held, collects atomic.Int64
			busy                                atomic.Int64
		)
		stopped := func() bool {
			select {
			case <-stop:
				return true
			default:
				return false
			}
		}
		spawn := func(n int, fn func(id int)) {
			for id := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					fn(id)
				}()
			}
		}

		// Writers: incremental read-modify-write of one file at a time, so
		// that generations share most of their objects; every fifth round
		// a writer crashes mid-staging and leaves an orphan.
		spawn(2, func(id int) {
			for n := 0; !stopped(); n++ {
				if n%5 == 4 {
					tx, err := d.Begin(ctx)
					if assert.NoError(t, err) {
						assert.NoError(t, tx.PutBytes(ctx, "crashed", []byte(fmt.Sprint(id, n))))
						abandoned.Add(1)
					}
					continue
				}
				time.Sleep(time.Duration(rand.N(int64(20 * time.Millisecond))))
				_, err := d.Update(ctx, commit.CommitOptions{}, func(ctx context.Context, tx *commit.Tx) error {
					return tx.PutBytes(ctx, fmt.Sprintf("f%04d", rand.N(nfiles)), fmt.Appendf(nil, "writer %d round %d", id, n))
				})
				switch {
				case err == nil:
					commits.Add(1)
				case errors.Is(err, commit.ErrConflict), errors.Is(err, commit.ErrStale):
					lost.Add(1)
				default:
					t.Errorf("writer %d: %v", id, err)
					return
				}
			}
		})

		// Pinned readers: open, pin at once, then read slowly, for longer
		// than the grace. They must never see ErrCollected.
		spawn(2, func(id int) {
			for !stopped() {
				snap, err := d.Open(ctx)
				if !assert.NoError(t, err) {
					return
				}
				pin, err := snap.Pin(ctx, time.Minute, fmt.Sprint("reader ", id))
				if !assert.NoError(t, err) {
					return
				}
				for range 3 {
					if err := readAll(ctx, snap); err != nil {
						t.Errorf("I4: pinned reader of seq %d: %v", snap.Seq(), err)
						return
					}
					reads.Add(1)
					time.Sleep(grace / 2)
				}
				assert.NoError(t, pin.Release(ctx))
			}
		})

		// An unpinned reader: a read that finishes within the grace of
		// opening must never see ErrCollected; later ones may. (The grace
		// runs from the successor's manifest, written a moment before the
		// pointer moves, so allow half of it for that moment.)
		spawn(1, func(int) {
			for !stopped() {
				start := time.Now()
				snap, err := d.Open(ctx)
				if !assert.NoError(t, err) {
					return
				}
				err = readAll(ctx, snap)
				switch {
				case err == nil:
					reads.Add(1)
				case errors.Is(err, commit.ErrCollected) && time.Since(start) >= grace/2:
					lateCollected.Add(1)
				default:
					t.Errorf("I4: unpinned reader of seq %d after %s: %v", snap.Seq(), time.Since(start), err)
					return
				}
				time.Sleep(time.Duration(rand.N(int64(grace))))
			}
		})

		// The I1 checker: an object of the current generation is never
		// missing. When one is, the pointer must have moved on meanwhile.
		spawn(1, func(int) {
			for !stopped() {
				snap, err := d.Open(ctx)
				if !assert.NoError(t, err) {
					return
				}
				if err := readAll(ctx, snap); err != nil {
					if !errors.Is(err, commit.ErrCollected) {
						t.Errorf("checker: %v", err)
						return
					}
					p, _, perr := pointer.Read(ctx, s)
					if assert.NoError(t, perr) && p.Generation == snap.Generation() {
						t.Errorf("I1: current generation %s (seq %d): %v", snap.Generation(), snap.Seq(), err)
						return
					}
				}
			}
		})

		// Two collectors contending for the lease.
		spawn(2, func(id int) {
			o := opts
			o.Owner = fmt.Sprint("collector ", id)
			for !stopped() {
				rep, err := gc.Run(ctx, s, o)
				runs.Add(1)
				switch {
				case errors.Is(err, lease.ErrHeld):
					held.Add(1)
				case errors.Is(err, gc.ErrBusy):
					// Two writers committing back to back on a loaded
					// machine can keep the horizon CAS from landing; the
					// loop below runs on until collections happened.
					busy.Add(1)
				case err != nil:
					t.Errorf("collector %d: %v", id, err)
					return
				default:
					collects.Add(int64(rep.ObjectsDeleted))
				}
				time.Sleep(time.Duration(rand.N(int64(200 * time.Millisecond))))
			}
		})

		// Run for the planned time, and on a loaded machine on until the
		// collectors have collected something, so that the invariants
		// are checked with collections running, not merely beside them.
		time.Sleep(run)
		for deadline := time.Now().Add(30 * time.Second); collects.Load() == 0 && time.Now().Before(deadline) && !t.Failed(); {
			time.Sleep(50 * time.Millisecond)
		}
		close(stop)
		wg.Wait()
		t.Logf("commits %d, lost %d, abandoned %d, reads %d, late ErrCollected %d, collector runs %d (held %d, busy %d), objects collected %d",
			commits.Load(), lost.Load(), abandoned.Load(), reads.Load(), lateCollected.Load(), runs.Load(), held.Load(), busy.Load(), collects.Load())
		if t.Failed() {
			return
		}
		assert.Positive(t, commits.Load())
		assert.Positive(t, collects.Load(), "the collectors collected during the run")
		requireComplete(t, d)

		// I7: after the orphan age, one collection leaves only what the
		// retained generations reference.
		time.Sleep(waitOlder(orphanAge))
		final := opts
		final.Grace = -1
		rep, err := gc.Run(ctx, s, final)
		require.NoError(t, err)
		t.Logf("final run: %d superseded, %d orphans, %d objects", len(rep.Deleted), len(rep.Orphans), rep.ObjectsDeleted)
		assert.Equal(t, referenced(t, d, 1), keysUnder(t, s, generation.Dir))
		assert.Empty(t, keysUnder(t, s, commit.PinDir), "pins were released")
		requireComplete(t, d)
	})
}
