package commit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// advClock is a controlled store clock for the tests of rebases racing a collection.
type advClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *advClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *advClock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// advSetup gives a mem store on a controlled clock, a dataset through a
// fault injector, a direct dataset (another writer), and a seed commit.
func advSetup(t *testing.T) (*advClock, store.Store, *faults.Store, *commit.Dataset, *commit.Dataset) {
	t.Helper()
	clock := &advClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := mem.New(mem.WithClock(clock.Now))
	fs := faults.NewStore(s)
	d := commit.New(fs)
	direct := commit.New(s)
	_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	return clock, s, fs, d, direct
}

// advCollect runs the collector with nothing kept but the current
// generation and a one-minute orphan age.
func advCollect(t *testing.T, s store.Store) *gc.Report {
	t.Helper()
	rep, err := gc.Run(context.Background(), s, gc.Options{Keep: -1, Grace: -1, OrphanAge: time.Minute})
	require.NoError(t, err)
	return rep
}

// loseFirstCAS makes the Tx's first pointer write lose: while it is in
// flight, direct commits another partition. then, if set, runs after that
// commit, still before the first write reaches the store.
func loseFirstCAS(t *testing.T, fs *faults.Store, direct *commit.Dataset, then func()) {
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		commitOpen(t, direct, "theirs/", map[string]string{"f": "t"})
		if then != nil {
			then()
		}
	}})
}

// commitOpen commits files as the partition prefix of d with a commit
// that rebases once, so that the value it writes is open to rounds.
func commitOpen(t *testing.T, d *commit.Dataset, prefix string, files map[string]string) *pointer.Pointer {
	t.Helper()
	return rebasedOnce(t, d, partition(t, d, prefix, files))
}

// openHead makes d's pointer value open to rounds without changing a
// file: a commit that changes nothing rebases once over another.
func openHead(t *testing.T, d *commit.Dataset) {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.KeepAll(ctx))
	require.NoError(t, tx.EnableRebase(commit.Rebase{}))
	rebasedOnce(t, d, tx)
}

// rebasedOnce commits tx after a commit that changes nothing has landed
// since its Begin, so that tx rebases once.
func rebasedOnce(t *testing.T, d *commit.Dataset, tx *commit.Tx) *pointer.Pointer {
	t.Helper()
	ctx := context.Background()
	between, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, between.KeepAll(ctx))
	_, err = between.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, tx.Rebased(), "the commit rebased once")
	return p
}

// TestRebaseSlowPastOrphanAgeIsStale: the rebase is slow. Its manifest
// PUT is held while the store's clock passes the orphan age and the
// collector runs: the Tx's objects, under its original id, are orphans to
// it (no manifest in the chain names them yet), and it deletes them after
// publishing its horizon. The rebased compare-and-swap, sent afterwards on
// the head's old ETag, must then be refused (ErrStale against the original
// staging start), never commit a manifest whose objects are gone (I1).
func TestRebaseSlowPastOrphanAgeIsStale(t *testing.T) {
	ctx := context.Background()
	clock, s, fs, d, direct := advSetup(t)
	tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
	var rep *gc.Report
	loseFirstCAS(t, fs, direct, func() {
		// The next write under _gen/ is the rebased manifest.
		fs.Add(faults.Rule{Op: store.OpPut, Key: generation.Dir, Kind: faults.Latency, Times: 1, Then: func() {
			clock.Advance(time.Hour)
			rep = advCollect(t, s)
		}})
	})
	_, err := tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrStale)
	require.NotNil(t, rep)
	assert.NotEmpty(t, rep.Orphans, "the collector took the Tx's objects as orphans")
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t"}, contents(t, d))
	assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
}

// TestRebasedCASHeldDuringCollectionIsStale: the rebased compare-and-swap is
// held in the network, not yet at the store, while the clock passes the
// orphan age and the collector deletes the Tx's objects (the rebased
// manifest is too young to be an orphan; the data under the original id
// are not). The late CAS fails its condition, the commit is settled as not
// applied, and the guard refuses it against the new horizon: ErrStale, and
// the pointer stays complete (I1).
func TestRebasedCASHeldDuringCollectionIsStale(t *testing.T) {
	ctx := context.Background()
	clock, s, fs, d, direct := advSetup(t)
	tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
	var rep *gc.Report
	loseFirstCAS(t, fs, direct, func() {
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			clock.Advance(time.Hour)
			rep = advCollect(t, s)
		}})
	})
	_, err := tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrStale)
	require.Equal(t, 1, tx.Rebased())
	require.NotNil(t, rep)
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t"}, contents(t, d))
	assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
}

// TestRebasedCASLandedDuringCollectionKeepsObjects: the rebased compare-and-swap lands
// at once, and its response is held while the clock passes the orphan age,
// the collector runs, and another writer commits on top; then the
// response is lost. The collector must keep the objects under the Tx's
// original id, which the current (rebased) manifest names, and delete only
// the original id's first manifest (I4, I1); the writer settles the commit
// as its own by walking down the chain (I2) and discards nothing.
func TestRebasedCASLandedDuringCollectionKeepsObjects(t *testing.T) {
	ctx := context.Background()
	clock, s, fs, d, direct := advSetup(t)
	tx := partition(t, d, "mine/", map[string]string{"f": "mine", "g": "mine"})
	loseFirstCAS(t, fs, direct, func() {
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Lost, Times: 1, Then: func() {
			clock.Advance(time.Hour)
			advCollect(t, s)
			p := partition(t, direct, "top/", map[string]string{"f": "top"})
			_, err := p.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
		}})
	})
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, tx.Rebased())
	cur := readPointer(t, s)
	assert.Equal(t, p.Generation, cur.Parent)
	assert.NotEqual(t, tx.Generation(), p.Generation, "a rebased commit has a fresh id")
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "mine/f": "mine", "mine/g": "mine", "top/f": "top"}, contents(t, d))
	left := keysUnder(t, s, generation.Prefix(tx.Generation()))
	assert.ElementsMatch(t, []string{generation.DataKey(tx.Generation(), "mine/f"), generation.DataKey(tx.Generation(), "mine/g")}, left)

	// Once superseded and out of retention, the objects go with it.
	clock.Advance(time.Hour)
	for _, prefix := range []string{"mine/", "top/"} {
		p := partition(t, direct, prefix, map[string]string{"f": "new"})
		_, err := p.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
	}
	clock.Advance(time.Hour)
	advCollect(t, s)
	checkComplete(t, d)
	assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
}

// TestRebasedUnknownOutcomeKeepsAll: the rebased compare-and-swap lands,
// its response is lost, and the pointer cannot be read back: the outcome
// is unknown. Nothing may be discarded (I6): neither the objects under the
// original id nor the rebased manifest, which the pointer now names; and
// Attempted names the rebased generation, not the Tx's id.
func TestRebasedUnknownOutcomeKeepsAll(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fs := faults.NewStore(s)
	d := commit.New(fs, commit.WithRetry(commit.Retry{Attempts: 1, Base: time.Millisecond, Max: time.Millisecond}))
	direct := commit.New(s)
	_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
	loseFirstCAS(t, fs, direct, func() {
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Lost, Times: 1, Then: func() {
			fs.Add(faults.Rule{Op: store.OpGet, Key: pointer.Key, Kind: faults.Refused})
		}})
	})
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrCommitUnknown)
	fs.Clear()
	cur := readPointer(t, s)
	require.NotNil(t, tx.Attempted())
	assert.Equal(t, cur.Generation, tx.Attempted().Generation)
	assert.NotEqual(t, tx.Generation(), cur.Generation)
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "mine/f": "mine"}, contents(t, d))
}

// TestRebaseStringPrefixPartitionsAreDisjoint: partitions whose names are string
// prefixes of each other ("p1/" and "p10/") are disjoint: writers of both,
// begun on one base, both commit by rebase, and neither removes nor
// conflicts with the other's files. A writer of "p1/" that lost to a
// writer adding "p1" (a file, not under the prefix) also commits.
func TestRebaseStringPrefixPartitionsAreDisjoint(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	_, err := publish(t, d, map[string]string{"p1/a": "1", "p10/a": "10", "p1x": "x"}, commit.CommitOptions{})
	require.NoError(t, err)
	t1 := partition(t, d, "p1/", map[string]string{"b": "1b"})
	t10 := partition(t, d, "p10/", map[string]string{"b": "10b"})
	_, err = t10.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	_, err = t1.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, 1, t1.Rebased())
	assert.Equal(t, map[string]string{"p1/b": "1b", "p10/b": "10b", "p1x": "x"}, contents(t, d))

	// An empty partition (put --into --allow-empty, or rm --into) loses
	// to a writer that added a file under it meanwhile, and removes
	// nothing outside it.
	rm := partition(t, d, "p1/", nil)
	add := partition(t, d, "p1/", map[string]string{"b": "1b", "c": "1c"})
	_, err = add.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	_, err = rm.Commit(ctx, commit.CommitOptions{})
	var ce *commit.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.True(t, slices.Contains(ce.Overlap, "p1/c"), "overlap %v", ce.Overlap)
	assert.Equal(t, map[string]string{"p1/b": "1b", "p1/c": "1c", "p10/b": "10b", "p1x": "x"}, contents(t, d))
}

// TestRebaseLandingBeforeHorizonCASKeepsObjects: a collection plans while a rebased
// commit is on its way, past the orphan age: the objects under the Tx's
// original id and the rebased manifest are both orphans to its plan. Its
// horizon compare-and-swap is held in the network while the rebased commit
// lands (after one resend: the collector's token registration changed the
// ETag the rebase had read). The collector's CAS then fails, and the
// correction of its plan must keep every object the new current
// generation names, under whatever generation id they sit (I4, I1); only
// the original id's first manifest may go.
func TestRebaseLandingBeforeHorizonCASKeepsObjects(t *testing.T) {
	ctx := context.Background()
	clock, s, fs, d, direct := advSetup(t)
	gcfs := faults.NewStore(s)
	gcReady, gcDone, writerDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var rep *gc.Report
	var gcErr error
	gcfs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Held, Times: 1, Then: func() {
		// The token registration landed; hold the next pointer write,
		// the horizon CAS, until the writer has committed.
		gcfs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			close(gcReady)
			<-writerDone
		}})
	}})
	tx := partition(t, d, "mine/", map[string]string{"f": "mine", "g": "mine"})
	loseFirstCAS(t, fs, direct, func() {
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			clock.Advance(time.Hour)
			go func() {
				defer close(gcDone)
				rep, gcErr = gc.Run(ctx, gcfs, gc.Options{Keep: -1, Grace: -1, OrphanAge: time.Minute})
			}()
			select {
			case <-gcReady:
			case <-gcDone:
			}
		}})
	})
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	close(writerDone)
	<-gcDone
	require.NoError(t, err)
	require.NoError(t, gcErr)
	select {
	case <-gcReady:
	default:
		t.Fatal("the collector sent no horizon CAS: the interleaving did not happen")
	}
	require.Equal(t, 1, tx.Rebased())
	assert.Equal(t, p.Generation, readPointer(t, s).Generation)
	assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "mine/f": "mine", "mine/g": "mine"}, contents(t, d))
	assert.ElementsMatch(t, []string{generation.DataKey(tx.Generation(), "mine/f"), generation.DataKey(tx.Generation(), "mine/g")},
		keysUnder(t, s, generation.Prefix(tx.Generation())), "orphans %+v", rep.Orphans)
	assert.NotEmpty(t, keysUnder(t, s, generation.Prefix(p.Generation)), "the rebased manifest stays")
}

// TestRebaseUnderBackToBackCollections: writers of disjoint partitions commit
// with rebase, over and over, while collectors run back to back with no
// orphan age (every run publishes its horizon at its own now and sweeps
// every generation outside the chain, the objects of in-flight writers
// included), keeping the whole chain. Every commit that returned success
// must be in the history, with every file readable and matching its
// checksum (I1, I2, I4): none of its objects, under its original id, was
// taken as an orphan. Writers refused as stale or lost try again. On mem,
// fs and s3.
func TestRebaseUnderBackToBackCollections(t *testing.T) {
	for _, f := range testenv.Stores() {
		if f.Name != "mem" && f.Name != "fs" && f.Name != "s3" {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			s := f.New(t)
			d := commit.New(s)
			_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
			require.NoError(t, err)
			const writers, wins, maxTries = 3, 3, 60
			var mu sync.Mutex
			var won []*pointer.Pointer
			var rebased, refused int
			stop := make(chan struct{})
			var gcRuns, gcWG sync.WaitGroup
			gcRuns.Add(1)
			gcWG.Add(1)
			go func() {
				defer gcWG.Done()
				first := true
				for {
					_, err := gc.Run(ctx, s, gc.Options{Keep: 1000, Grace: -1, OrphanAge: -1})
					if err != nil && !errors.Is(err, gc.ErrBusy) && !errors.Is(err, lease.ErrHeld) {
						t.Errorf("collector: %v", err)
					}
					if first {
						gcRuns.Done()
						first = false
					}
					select {
					case <-stop:
						return
					default:
					}
				}
			}()
			gcRuns.Wait()
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n := 0
					for try := 0; n < wins && try < maxTries; try++ {
						tx, err := d.Begin(ctx)
						if !assert.NoError(t, err) {
							return
						}
						prefix := fmt.Sprintf("w%d/", w)
						if !assert.NoError(t, tx.KeepAll(ctx)) {
							return
						}
						for _, e := range tx.Entries() {
							if strings.HasPrefix(e.Path, prefix) {
								tx.Remove(e.Path)
							}
						}
						if err := tx.PutBytes(ctx, fmt.Sprintf("%sf%d", prefix, try), []byte(fmt.Sprint(w, try))); err != nil {
							// With no orphan age, the fs driver's sweep of
							// leftovers may remove the temp file of a put in
							// flight: the put fails, and nothing commits.
							assert.NoError(t, tx.Discard(ctx))
							continue
						}
						if !assert.NoError(t, tx.EnableRebase(commit.Rebase{Scope: prefix})) {
							return
						}
						p, err := tx.Commit(ctx, commit.CommitOptions{})
						mu.Lock()
						rebased += tx.Rebased()
						if err != nil {
							refused++
						}
						mu.Unlock()
						switch {
						case err == nil:
							n++
							mu.Lock()
							won = append(won, p)
							mu.Unlock()
						case errors.Is(err, commit.ErrStale), errors.Is(err, commit.ErrConflict), errors.Is(err, commit.ErrMissingObject):
						default:
							t.Errorf("writer %d: %v", w, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			gcWG.Wait()
			t.Logf("%d commits won, %d rebases, %d refused", len(won), rebased, refused)
			require.NotEmpty(t, won, "no commit won under the collector: the test proves nothing")
			for _, p := range won {
				snap, err := d.OpenAt(ctx, p.Generation)
				require.NoError(t, err, "I2: a successful commit is in the history")
				for _, e := range snap.Files() {
					_, err := snap.ReadFile(ctx, e.Path)
					require.NoError(t, err, "I1/I4: file %q of generation %s (seq %d)", e.Path, p.Generation, p.Seq)
				}
			}
			checkComplete(t, d)
		})
	}
}

// rollbackTo commits, as publish rollback does, the files of the
// generation at seq, held by a pin.
func rollbackTo(t *testing.T, d *commit.Dataset, seq uint64) *pointer.Pointer {
	t.Helper()
	ctx := context.Background()
	target, err := d.OpenAt(ctx, fmt.Sprint(seq))
	require.NoError(t, err)
	pin, err := target.Pin(ctx, time.Hour, "rollback")
	require.NoError(t, err)
	defer pin.Release(ctx) //nolint:errcheck // the test checks the commit
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	tx.KeepFrom(target)
	tx.HoldPin(pin)
	p, err := tx.Commit(ctx, commit.CommitOptions{Message: "rollback"})
	require.NoError(t, err)
	return p
}

// TestRebaseOnRollback: a partition writer loses to a rollback
// (to a seq without the partition writer's base changes outside its
// scope) and rebases on it: the result is the rollback's files with the
// partition's put in. A collection that keeps only the current generation
// then leaves it complete; a rollback to the rebased generation itself
// (whose files sit under the Tx's original id) commits and survives a
// collection too (I1, I4).
func TestRebaseOnRollback(t *testing.T) {
	for _, f := range testenv.LocalStores() {
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			s := f.New(t)
			fs := faults.NewStore(s)
			d := commit.New(fs)
			direct := commit.New(s)
			_, err := publish(t, d, map[string]string{"other/x": "v1"}, commit.CommitOptions{})
			require.NoError(t, err)
			_, err = publish(t, d, map[string]string{"other/x": "v2", "other/y": "y"}, commit.CommitOptions{})
			require.NoError(t, err)
			tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
			fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
				rollbackTo(t, direct, 1)
			}})
			p, err := tx.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
			require.Equal(t, 1, tx.Rebased())
			assert.EqualValues(t, 4, p.Seq)
			assert.Equal(t, map[string]string{"other/x": "v1", "mine/f": "mine"}, contents(t, d))
			_, err = gc.Run(ctx, s, gc.Options{Keep: -1, Grace: -1, OrphanAge: time.Hour})
			require.NoError(t, err)
			assert.Equal(t, map[string]string{"other/x": "v1", "mine/f": "mine"}, contents(t, d))

			// Supersede the rebased generation, then roll back to it.
			_, err = publish(t, d, map[string]string{"z": "z"}, commit.CommitOptions{})
			require.NoError(t, err)
			rollbackTo(t, d, p.Seq)
			_, err = gc.Run(ctx, s, gc.Options{Keep: -1, Grace: -1, OrphanAge: time.Hour})
			require.NoError(t, err)
			assert.Equal(t, map[string]string{"other/x": "v1", "mine/f": "mine"}, contents(t, d))
			assert.Contains(t, keysUnder(t, s, generation.Prefix(tx.Generation())), generation.DataKey(tx.Generation(), "mine/f"))
		})
	}
}

// TestRebaseOnFirstCommit: two partition writers begin on a dataset
// with no pointer yet; the one whose create-if-absent loses rebases on the
// other's first generation instead of losing, with seq 2 and the winner
// as parent. On every local driver and s3.
func TestRebaseOnFirstCommit(t *testing.T) {
	for _, f := range testenv.Stores() {
		if f.Name != "mem" && f.Name != "fs" && f.Name != "s3" {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			d := commit.New(f.New(t))
			a := partition(t, d, "a/", map[string]string{"f": "a"})
			b := partition(t, d, "b/", map[string]string{"f": "b"})
			pa, err := a.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
			pb, err := b.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
			assert.Equal(t, 1, b.Rebased())
			assert.EqualValues(t, 2, pb.Seq)
			assert.Equal(t, pa.Generation, pb.Parent)
			assert.Equal(t, map[string]string{"a/f": "a", "b/f": "b"}, contents(t, d))
		})
	}
}

// TestRebasedCASHeldPastDiscardFails: the rebased compare-and-swap is
// held back in the network and its caller hears an error; meanwhile a
// writer of the same partition commits. The Tx proves its loss (the seq it
// wanted is the other's), finds the overlap and discards its objects. The
// held write then reaches the store: it must fail its condition, so that
// the pointer never names the rebased manifest whose objects were just
// deleted (I1, I6). On mem, fs and s3.
func TestRebasedCASHeldPastDiscardFails(t *testing.T) {
	for _, f := range testenv.Stores() {
		if f.Name != "mem" && f.Name != "fs" && f.Name != "s3" {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			s := f.New(t)
			fs := faults.NewStore(s)
			d := commit.New(fs)
			direct := commit.New(s)
			_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
			require.NoError(t, err)
			tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
			loseFirstCAS(t, fs, direct, func() {
				fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Late, Times: 1, Then: func() {
					p := partition(t, direct, "mine/", map[string]string{"f": "theirs"})
					_, err := p.Commit(ctx, commit.CommitOptions{})
					require.NoError(t, err)
				}})
			})
			_, err = tx.Commit(ctx, commit.CommitOptions{})
			var ce *commit.ConflictError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, []string{"mine/f"}, ce.Overlap)
			assert.Equal(t, 1, tx.Rebased())
			assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())), "discarded after the proof")
			require.ErrorIs(t, fs.Release(), store.ErrPrecondition, "the held write fails its condition")
			assert.Equal(t, map[string]string{"seed": "0", "theirs/f": "t", "mine/f": "theirs"}, contents(t, d))
		})
	}
}

// TestRebaseFileDirClashIsOverlap: the rebase rule merges two generations
// that are each well-formed into one that is not. Writer A replaces the
// partition p1/ (its base has no "p1"); writer B, outside A's scope, adds a
// file named "p1" and commits first. A's rebase sees no overlap ("p1" is
// not under "p1/") and commits the head's files plus its own: "p1" is then
// both a file and a directory, a tree no reader can materialize (publish
// get fails with "file exists"). Expected: the rebase treats a head file
// that is an ancestor of a path it writes (or a head path under a file it
// writes) as an overlap and loses, naming it.
func TestRebaseFileDirClashIsOverlap(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	a := partition(t, d, "p1/", map[string]string{"x": "a"})
	b, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, b.KeepAll(ctx))
	require.NoError(t, b.PutBytes(ctx, "p1", []byte("b")))
	_, err = b.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)

	_, err = a.Commit(ctx, commit.CommitOptions{})
	files := contents(t, d)
	for p := range files {
		for q := range files {
			assert.False(t, strings.HasPrefix(q, p+"/"), "the current generation holds %q as a file and as the directory of %q (commit error: %v)", p, q, err)
		}
	}
	var ce *commit.ConflictError
	if assert.ErrorAs(t, err, &ce) {
		assert.Contains(t, ce.Overlap, "p1")
	}
}
