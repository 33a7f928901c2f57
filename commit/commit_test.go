package commit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// publish commits files (path → content) as one generation.
func publish(t *testing.T, d *commit.Dataset, files map[string]string, opts commit.CommitOptions) (*pointer.Pointer, error) {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	for p, c := range files {
		require.NoError(t, tx.PutBytes(ctx, p, []byte(c)))
	}
	return tx.Commit(ctx, opts)
}

// keysUnder lists every key under prefix.
func keysUnder(t *testing.T, s store.Store, prefix string) []string {
	t.Helper()
	var keys []string
	for o, err := range store.List(context.Background(), s, prefix, "", "") {
		require.NoError(t, err)
		keys = append(keys, o.Key)
	}
	return keys
}

// checkComplete asserts I1: the pointer names a generation whose manifest
// and every file are present and match their checksums.
func checkComplete(t *testing.T, d *commit.Dataset) *commit.Snapshot {
	t.Helper()
	ctx := context.Background()
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	for _, e := range snap.Files() {
		_, err := snap.ReadFile(ctx, e.Path)
		require.NoError(t, err, "I1: file %q of the current generation", e.Path)
	}
	return snap
}

func TestCommitAndRead(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s, commit.WithWriter("test"))
		_, err := d.Open(ctx)
		require.ErrorIs(t, err, commit.ErrNoCommits)

		p1, err := publish(t, d, map[string]string{"a.txt": "alpha", "dir/b.txt": "beta"}, commit.CommitOptions{Message: "first"})
		require.NoError(t, err)
		assert.EqualValues(t, 1, p1.Seq)
		assert.Empty(t, p1.Parent)

		p2, err := publish(t, d, map[string]string{"a.txt": "alpha2"}, commit.CommitOptions{Meta: map[string]string{"k": "v"}})
		require.NoError(t, err)
		assert.EqualValues(t, 2, p2.Seq)
		assert.Equal(t, p1.Generation, p2.Parent)

		snap := checkComplete(t, d)
		assert.Equal(t, p2.Generation, snap.Generation())
		got, err := snap.ReadFile(ctx, "a.txt")
		require.NoError(t, err)
		assert.Equal(t, "alpha2", string(got))
		_, err = snap.ReadFile(ctx, "dir/b.txt")
		require.ErrorIs(t, err, commit.ErrNotFound, "a generation holds exactly the files staged into it")

		// Time travel, by seq and by generation id.
		old, err := d.OpenAt(ctx, "1")
		require.NoError(t, err)
		got, err = old.ReadFile(ctx, "dir/b.txt")
		require.NoError(t, err)
		assert.Equal(t, "beta", string(got))
		old, err = d.OpenAt(ctx, p1.Generation)
		require.NoError(t, err)
		assert.EqualValues(t, 1, old.Seq())
		_, err = d.OpenAt(ctx, "7")
		require.ErrorIs(t, err, commit.ErrNotFound)

		var seqs []uint64
		for m, err := range d.History(ctx, snap) {
			require.NoError(t, err)
			seqs = append(seqs, m.Seq)
		}
		assert.Equal(t, []uint64{2, 1}, seqs)
	})
}

func TestIncrementalAndCompression(t *testing.T) {
	for _, f := range testenv.LocalStores() {
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			s := f.New(t)
			d := commit.New(s, commit.WithCompression(true))
			dir := t.TempDir()
			for i := range 5 {
				require.NoError(t, os.WriteFile(dir+"/f"+strconv.Itoa(i), []byte(strings.Repeat("data", 1000)+strconv.Itoa(i)), 0o644))
			}
			tx, err := d.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.AddDir(ctx, dir))
			p1, err := tx.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)

			require.NoError(t, os.WriteFile(dir+"/f2", []byte("changed"), 0o644))
			tx, err = d.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.AddDir(ctx, dir))
			assert.Equal(t, 4, tx.Reused())
			_, err = tx.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)

			snap := checkComplete(t, d)
			for _, e := range snap.Files() {
				assert.Equal(t, generation.EncodingZstd, e.Encoding)
				if e.Path == "f2" {
					assert.Equal(t, snap.Generation(), generation.FromKey(e.Key))
				} else {
					assert.Equal(t, p1.Generation, generation.FromKey(e.Key), "unchanged %s is referenced, not re-uploaded", e.Path)
				}
			}
			got, err := snap.ReadFile(ctx, "f2")
			require.NoError(t, err)
			assert.Equal(t, "changed", string(got))
			// The stored object is compressed: smaller than the file.
			e, _ := snap.Manifest.Find("f0")
			a, err := s.Head(ctx, e.Key)
			require.NoError(t, err)
			assert.Less(t, a.Size, e.Size)
		})
	}
}

// TestConcurrentWriters: 16 writers race from the same base, in several
// rounds, while readers read. Every success is in the history (I2), each
// loser's objects are gone, the pointer always resolves completely (I1),
// and every reader sees exactly one generation's files (I3).
func TestConcurrentWriters(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		_, err := publish(t, d, map[string]string{"a": "init", "b": "init", "c": "init"}, commit.CommitOptions{})
		require.NoError(t, err)

		stop := make(chan struct{})
		var readers sync.WaitGroup
		var reads atomic.Int64
		readErrs := make(chan error, 4)
		for range 4 {
			readers.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := readOneGeneration(ctx, d); err != nil {
						readErrs <- err
						return
					}
					reads.Add(1)
				}
			})
		}

		var winners []string
		const writers, rounds = 16, 3
		for round := range rounds {
			txs := make([]*commit.Tx, writers)
			for w := range writers {
				tx, err := d.Begin(ctx)
				require.NoError(t, err)
				txs[w] = tx
			}
			type result struct {
				gen string
				p   *pointer.Pointer
				err error
			}
			results := make([]result, writers)
			var wg sync.WaitGroup
			for w, tx := range txs {
				wg.Go(func() {
					tag := fmt.Sprintf("%d/%d/%s", round, w, tx.Generation())
					for _, f := range []string{"a", "b", "c"} {
						if err := tx.PutBytes(ctx, f, []byte(tag)); err != nil {
							results[w] = result{tx.Generation(), nil, err}
							return
						}
					}
					p, err := tx.Commit(ctx, commit.CommitOptions{Message: tag})
					results[w] = result{tx.Generation(), p, err}
				})
			}
			wg.Wait()
			wins := 0
			for _, r := range results {
				if r.err == nil {
					wins++
					winners = append(winners, r.gen)
					continue
				}
				var ce *commit.ConflictError
				require.ErrorAs(t, r.err, &ce, "a loser must get a ConflictError")
				assert.NotEqual(t, r.gen, ce.Winner)
				assert.Empty(t, keysUnder(t, s, generation.Prefix(r.gen)), "loser %s left objects behind", r.gen)
			}
			require.Equal(t, 1, wins, "all writers shared one base, so exactly one can win")
			checkComplete(t, d)
		}
		close(stop)
		readers.Wait()
		close(readErrs)
		for err := range readErrs {
			require.NoError(t, err)
		}
		assert.Positive(t, reads.Load())

		// I2: every successful commit is in the history, in order.
		snap, err := d.Open(ctx)
		require.NoError(t, err)
		var history []string
		for m, err := range d.History(ctx, snap) {
			require.NoError(t, err)
			history = append(history, m.Generation)
		}
		slices.Reverse(history)
		assert.Equal(t, winners, history[1:])
	})
}

// readOneGeneration opens the current snapshot and checks that its files
// all carry the same tag, and that the tag names the snapshot's generation.
func readOneGeneration(ctx context.Context, d *commit.Dataset) error {
	snap, err := d.Open(ctx)
	if err != nil {
		return err
	}
	var tags []string
	for _, f := range []string{"a", "b", "c"} {
		b, err := snap.ReadFile(ctx, f)
		if err != nil {
			return err
		}
		tags = append(tags, string(b))
	}
	if tags[0] != tags[1] || tags[1] != tags[2] {
		return fmt.Errorf("I3 violated: snapshot %s mixes %v", snap.Generation(), tags)
	}
	if tags[0] != "init" && !strings.HasSuffix(tags[0], snap.Generation()) {
		return fmt.Errorf("I3 violated: snapshot %s reads files of %s", snap.Generation(), tags[0])
	}
	return nil
}

// TestLostResponse: the pointer write lands but the writer hears a failure,
// either a timeout or the SDK-retry shape that ends in 412. The commit must
// report success and keep its objects.
func TestLostResponse(t *testing.T) {
	for _, c := range []struct {
		name string
		kind faults.Kind
		err  error
	}{
		{"timeout", faults.Lost, context.DeadlineExceeded},
		{"5xx", faults.Lost, errors.New("500 InternalError")},
		{"sdk-retry-412", faults.Retried, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.EachStore(t, func(t *testing.T, s store.Store) {
				fs := faults.NewStore(s)
				d := commit.New(fs)
				_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
				require.NoError(t, err)
				fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: c.kind, Times: 1, Err: c.err})
				p, err := publish(t, d, map[string]string{"x": "2"}, commit.CommitOptions{})
				require.NoError(t, err, "the write landed, so the commit succeeded")
				snap := checkComplete(t, d)
				assert.Equal(t, p.Generation, snap.Generation())
				assert.EqualValues(t, 2, snap.Seq())
			})
		})
	}
}

// TestBuiltOnTopOfMe: my pointer write lands, the response is lost, and
// another writer commits on top before I read the pointer back. I must
// find my generation by walking the parent chain, and keep my objects.
func TestBuiltOnTopOfMe(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		fs := faults.NewStore(s)
		d := commit.New(fs)
		other := commit.New(s)
		_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
		require.NoError(t, err)
		var top *pointer.Pointer
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Lost, Times: 1, Then: func() {
			var err error
			top, err = publish(t, other, map[string]string{"x": "3"}, commit.CommitOptions{})
			require.NoError(t, err)
			_, err = publish(t, other, map[string]string{"x": "4"}, commit.CommitOptions{})
			require.NoError(t, err)
		}})
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.PutBytes(ctx, "x", []byte("2")))
		p, err := tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err, "my write landed and was built upon")
		assert.EqualValues(t, 2, p.Seq)
		assert.Equal(t, tx.Generation(), top.Parent)
		assert.NotEmpty(t, keysUnder(t, s, generation.Prefix(tx.Generation())), "my committed objects must not be discarded")
		old, err := d.OpenAt(ctx, "2")
		require.NoError(t, err)
		b, err := old.ReadFile(ctx, "x")
		require.NoError(t, err)
		assert.Equal(t, "2", string(b))
	})
}

// TestCommitUnknown: the pointer write fails and the read-back fails too.
// The commit must say so and delete nothing.
func TestCommitUnknown(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		fs := faults.NewStore(s)
		d := commit.New(fs)
		_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
		require.NoError(t, err)
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Lost, Times: 1})
		tx, err := d.Begin(context.Background())
		require.NoError(t, err)
		fs.Add(faults.Rule{Op: store.OpGet, Key: pointer.Key, Kind: faults.Refused})
		require.NoError(t, tx.PutBytes(context.Background(), "x", []byte("2")))
		_, err = tx.Commit(context.Background(), commit.CommitOptions{})
		require.ErrorIs(t, err, commit.ErrCommitUnknown)
		fs.Clear()
		assert.Len(t, keysUnder(t, s, generation.Prefix(tx.Generation())), 2, "unknown is never lost: the data and manifest stay")
		snap := checkComplete(t, d)
		assert.Equal(t, tx.Generation(), snap.Generation(), "the write had in fact landed")
	})
}

// TestNotAppliedRetries: the pointer write fails before it is sent; the
// commit re-reads, finds nothing changed, and retries without restaging.
func TestNotAppliedRetries(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		fs := faults.NewStore(s)
		c := store.Count(fs)
		d := commit.New(c)
		_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
		require.NoError(t, err)
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Conflict, Times: 2})
		before := c.Counts()
		_, err = publish(t, d, map[string]string{"x": "2"}, commit.CommitOptions{})
		require.NoError(t, err)
		used := c.Counts().Sub(before)
		assert.EqualValues(t, 1+1+3, used[store.OpPut], "1 data + 1 manifest + 3 pointer tries")
		checkComplete(t, d)
	})
}

// TestStalledWriter: the collector's horizon passes the writer's staging
// start while it stalls. Its commit must be refused and the pointer kept.
func TestStalledWriter(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		p1, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
		require.NoError(t, err)
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.PutBytes(ctx, "x", []byte("stalled")))

		// What the collector does before sweeping orphans.
		cur, attrs, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		cur.GCHorizon = attrs.ServerTime.Add(time.Second)
		_, err = pointer.Write(ctx, s, cur, attrs.ETag)
		require.NoError(t, err)

		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.ErrorIs(t, err, commit.ErrStale)
		snap := checkComplete(t, d)
		assert.Equal(t, p1.Generation, snap.Generation())
		assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
	})
}

// TestHorizonMovedOnly: the horizon moves but stays behind the writer's
// staging start; the commit retries the CAS and succeeds.
func TestHorizonMovedOnly(t *testing.T) {
	for _, f := range testenv.LocalStores() {
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			s := f.New(t)
			d := commit.New(s)
			_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
			require.NoError(t, err)
			tx, err := d.Begin(ctx)
			require.NoError(t, err)
			cur, attrs, err := pointer.Read(ctx, s)
			require.NoError(t, err)
			cur.GCHorizon = attrs.ServerTime.Add(-time.Hour)
			_, err = pointer.Write(ctx, s, cur, attrs.ETag)
			require.NoError(t, err)
			require.NoError(t, tx.PutBytes(ctx, "x", []byte("2")))
			p, err := tx.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
			assert.EqualValues(t, 2, p.Seq)
			assert.Equal(t, cur.GCHorizon.Unix(), p.GCHorizon.Unix(), "the horizon is carried forward")
		})
	}
}

func TestFencing(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		d := commit.New(s)
		p, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{Fence: 5})
		require.NoError(t, err)
		assert.EqualValues(t, 5, p.Fence)
		_, err = publish(t, d, map[string]string{"x": "low"}, commit.CommitOptions{Fence: 4})
		var fe *commit.FencedError
		require.ErrorAs(t, err, &fe)
		assert.EqualValues(t, 5, fe.Committed)
		require.ErrorIs(t, err, commit.ErrFenced)
		p, err = publish(t, d, map[string]string{"x": "unfenced"}, commit.CommitOptions{})
		require.NoError(t, err, "a commit without a token is not fenced")
		assert.EqualValues(t, 5, p.Fence, "and keeps the fence")
		p, err = publish(t, d, map[string]string{"x": "2"}, commit.CommitOptions{Fence: 5})
		require.NoError(t, err)
		assert.EqualValues(t, 5, p.Fence, "an equal token may commit again")
		p, err = publish(t, d, map[string]string{"x": "3"}, commit.CommitOptions{Fence: 9})
		require.NoError(t, err)
		assert.EqualValues(t, 9, p.Fence)
		b, err := checkComplete(t, d).ReadFile(context.Background(), "x")
		require.NoError(t, err)
		assert.Equal(t, "3", string(b))
	})
}

func TestUpdateDataset(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		const workers, incs = 6, 4
		d := commit.New(s, commit.WithRetry(commit.Retry{Attempts: 200, Base: time.Millisecond, Max: 100 * time.Millisecond}))
		_, err := publish(t, d, map[string]string{"count": "0", "other": "kept"}, commit.CommitOptions{})
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			wg.Go(func() {
				for range incs {
					_, err := d.Update(context.Background(), commit.CommitOptions{}, func(ctx context.Context, tx *commit.Tx) error {
						base, err := tx.BaseSnapshot(ctx)
						if err != nil {
							return err
						}
						b, err := base.ReadFile(ctx, "count")
						if err != nil {
							return err
						}
						n, err := strconv.Atoi(string(b))
						if err != nil {
							return err
						}
						return tx.PutBytes(ctx, "count", []byte(strconv.Itoa(n+1)))
					})
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		snap := checkComplete(t, d)
		b, err := snap.ReadFile(context.Background(), "count")
		require.NoError(t, err)
		assert.Equal(t, strconv.Itoa(workers*incs), string(b))
		b, err = snap.ReadFile(context.Background(), "other")
		require.NoError(t, err)
		assert.Equal(t, "kept", string(b))
		assert.EqualValues(t, 1+workers*incs, snap.Seq())
	})
}

// TestRollbackBelowFloor: a rollback references an older generation's
// objects. It commits while that generation is retained, and is refused
// once the collector's floor has passed it.
func TestRollbackBelowFloor(t *testing.T) {
	for _, f := range testenv.LocalStores() {
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			s := f.New(t)
			d := commit.New(s)
			for i := range 3 {
				_, err := publish(t, d, map[string]string{"x": strconv.Itoa(i + 1)}, commit.CommitOptions{})
				require.NoError(t, err)
			}
			rollback := func() (*pointer.Pointer, error) {
				old, err := d.OpenAt(ctx, "1")
				require.NoError(t, err)
				tx, err := d.Begin(ctx)
				require.NoError(t, err)
				tx.KeepFrom(old)
				return tx.Commit(ctx, commit.CommitOptions{Message: "rollback to 1"})
			}
			p, err := rollback()
			require.NoError(t, err)
			assert.EqualValues(t, 4, p.Seq)
			b, err := checkComplete(t, d).ReadFile(ctx, "x")
			require.NoError(t, err)
			assert.Equal(t, "1", string(b))

			// What the collector publishes before deleting seq 1 and 2.
			cur, attrs, err := pointer.Read(ctx, s)
			require.NoError(t, err)
			cur.GCFloor = 3
			_, err = pointer.Write(ctx, s, cur, attrs.ETag)
			require.NoError(t, err)
			_, err = rollback()
			require.ErrorIs(t, err, commit.ErrStale)
			assert.Contains(t, err.Error(), "floor")
			assert.EqualValues(t, 4, checkComplete(t, d).Seq(), "the refused rollback changed nothing")
		})
	}
}

// TestDiscardAfterCommitIsNoop: `defer tx.Discard` must never delete a
// generation that committed, or whose commit is unknown.
func TestDiscardAfterCommitIsNoop(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutBytes(ctx, "a", []byte("1")))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.NoError(t, tx.Discard(ctx))
	checkComplete(t, d)
	assert.Len(t, keysUnder(t, s, generation.Prefix(tx.Generation())), 2)
}

// TestOversizedMetaRefusedBeforeSending: a pointer too large to encode is
// refused up front, not reported as an unknown outcome.
func TestOversizedMetaRefusedBeforeSending(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutBytes(ctx, "a", []byte("1")))
	_, err = tx.Commit(ctx, commit.CommitOptions{Message: strings.Repeat("m", pointer.MaxSize)})
	require.Error(t, err)
	require.NotErrorIs(t, err, commit.ErrCommitUnknown)
	assert.Empty(t, keysUnder(t, s, generation.Dir), "the staged objects are discarded")
}

func TestPinFloorAndExpiry(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	var mu sync.Mutex
	s := mem.New(mem.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	d := commit.New(s)
	for i := range 3 {
		_, err := publish(t, d, map[string]string{"x": strconv.Itoa(i)}, commit.CommitOptions{})
		require.NoError(t, err)
	}
	old, err := d.OpenAt(ctx, "1")
	require.NoError(t, err)
	pin, err := old.Pin(ctx, time.Minute, "test")
	require.NoError(t, err)
	require.NoError(t, pin.Renew(ctx))
	advance(2 * time.Minute)
	require.ErrorIs(t, pin.Renew(ctx), commit.ErrCollected, "an expired pin cannot be revived")

	cur, attrs, err := pointer.Read(ctx, s)
	require.NoError(t, err)
	cur.GCFloor = 2
	_, err = pointer.Write(ctx, s, cur, attrs.ETag)
	require.NoError(t, err)
	_, err = old.Pin(ctx, time.Minute, "test")
	require.ErrorIs(t, err, commit.ErrCollected, "a generation below the floor cannot be pinned")
	assert.Len(t, keysUnder(t, s, commit.PinDir), 1, "only the first, expired pin is left; the refused one was removed")
}

// TestPinRenewLandsLate: a renewal that was sent in time but lands after
// the pin's TTL ran out cannot be trusted (a collector may have listed the
// pin as expired meanwhile): Renew says ErrCollected and removes the pin.
func TestPinRenewLandsLate(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	var mu sync.Mutex
	s := mem.New(mem.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	d := commit.New(s)
	_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	slow := false
	slowPuts := faults.NewStore(s)
	slowPuts.Add(faults.Rule{Op: store.OpPut, Kind: faults.Latency, Then: func() {
		if slow {
			advance(2 * time.Second) // a write that takes long to land
		}
	}})
	slowSnap, err := commit.New(slowPuts).Open(ctx)
	require.NoError(t, err)
	p, err := slowSnap.Pin(ctx, 10*time.Second, "test")
	require.NoError(t, err)
	advance(9 * time.Second)
	slow = true
	require.ErrorIs(t, p.Renew(ctx), commit.ErrCollected)
	assert.Empty(t, keysUnder(t, s, commit.PinDir), "the late renewal is not left behind")
	slow = false
	_, err = snap.Pin(ctx, 10*time.Second, "again")
	require.NoError(t, err, "reopening and pinning again works")
}

// TestManifestReadBackCut: when the read-back that settles a spurious 412
// on the manifest is itself cut, the writer reads again instead of taking
// the half it got for someone else's manifest.
func TestManifestReadBackCut(t *testing.T) {
	for _, f := range testenv.LocalStores() {
		t.Run(f.Name, func(t *testing.T) {
			fs := faults.NewStore(f.New(t))
			d := commit.New(fs)
			// No files: the first write and read under _gen/ are the
			// manifest's.
			fs.Add(faults.Rule{Op: store.OpPut, Key: generation.Dir, Kind: faults.Retried, Times: 1})
			fs.Add(faults.Rule{Op: store.OpGet, Key: generation.Dir, Kind: faults.Cut, Times: 1})
			p, err := publish(t, d, map[string]string{}, commit.CommitOptions{})
			require.NoError(t, err)
			assert.Equal(t, p.Generation, checkComplete(t, d).Generation())
		})
	}
}

// TestManifestSpurious412: the manifest PUT lands, its response is lost and
// the SDK's retry gets 412 from our own write. The commit goes on.
func TestManifestSpurious412(t *testing.T) {
	for _, f := range testenv.LocalStores() {
		t.Run(f.Name, func(t *testing.T) {
			fs := faults.NewStore(f.New(t))
			d := commit.New(fs)
			fs.Add(faults.Rule{Op: store.OpPut, Key: generation.Dir, Kind: faults.Retried, Times: 100})
			p, err := publish(t, d, map[string]string{"a": "1"}, commit.CommitOptions{})
			require.NoError(t, err)
			assert.Equal(t, p.Generation, checkComplete(t, d).Generation())
		})
	}
}

// TestFailedRePut (I1): a second Put of a path fails after its write
// landed, or its write is held in the network and lands after the commit.
// Each Put writes a key of its own, so the committed generation still
// reads the first content, whatever the failed write did.
func TestFailedRePut(t *testing.T) {
	for _, f := range testenv.Stores() {
		for name, kind := range map[string]faults.Kind{"lands at once": faults.Lost, "lands after the commit": faults.Late} {
			t.Run(f.Name+"/"+name, func(t *testing.T) {
				ctx := context.Background()
				fs := faults.NewStore(f.New(t))
				d := commit.New(fs)
				tx, err := d.Begin(ctx)
				require.NoError(t, err)
				require.NoError(t, tx.PutBytes(ctx, "a", []byte("first")))
				fs.Add(faults.Rule{Op: store.OpPut, Key: generation.Dir, Kind: kind, Times: 1})
				err = tx.PutBytes(ctx, "a", []byte("second"))
				require.ErrorIs(t, err, faults.ErrInjected)
				assert.Contains(t, err.Error(), `"a"`, "the error names the path")
				_, err = tx.Commit(ctx, commit.CommitOptions{})
				require.NoError(t, err)
				require.NoError(t, fs.Release()) // the held write lands now
				b, err := checkComplete(t, d).ReadFile(ctx, "a")
				require.NoError(t, err)
				assert.Equal(t, "first", string(b), "a failed Put leaves the Tx as it was")
			})
		}
	}
}

// TestRePut: staging a path again replaces its entry with the new content,
// written under a key of its own.
func TestRePut(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	for _, body := range []string{"first", "second", "third"} {
		require.NoError(t, tx.PutBytes(ctx, "a", []byte(body)))
	}
	require.NoError(t, tx.PutBytes(ctx, "a~2", []byte("a path of its own")))
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	snap := checkComplete(t, d)
	b, err := snap.ReadFile(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "third", string(b))
	b, err = snap.ReadFile(ctx, "a~2")
	require.NoError(t, err)
	assert.Equal(t, "a path of its own", string(b))
	var keys []string
	for _, e := range snap.Files() {
		keys = append(keys, strings.TrimPrefix(e.Key, generation.Prefix(p.Generation)))
	}
	assert.Equal(t, []string{"a~3", "a~2~2"}, keys, "every Put has a key of its own")
}

// TestPutRacingCommit: a Put still streaming its body when Commit starts
// is refused, and its object, which lands after the commit, is not part
// of the generation.
func TestPutRacingCommit(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.PutBytes(ctx, "a", []byte("first")))
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() { done <- tx.Put(ctx, "a", pr, 0) }()
		_, err = pw.Write([]byte("sec")) // returns once the store reads it
		require.NoError(t, err)
		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		_, err = pw.Write([]byte("ond"))
		require.NoError(t, err)
		require.NoError(t, pw.Close())
		err = <-done
		require.Error(t, err, "a Put racing Commit is refused")
		assert.Contains(t, err.Error(), `"a"`)
		b, err := checkComplete(t, d).ReadFile(ctx, "a")
		require.NoError(t, err)
		assert.Equal(t, "first", string(b))
	})
}
