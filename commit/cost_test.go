package commit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// TestRequestFloor: a commit of K files costs exactly K data PUTs + 1
// manifest PUT + 1 pointer GET + 1 pointer PUT, a snapshot read of K files
// 1 pointer GET + 1 manifest GET + K GETs, no LIST on either path, and
// neither grows with history.
func TestRequestFloor(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		const k = 5
		ctx := context.Background()
		tr := &trace{Store: s}
		c := store.Count(tr)
		d := commit.New(c)
		files := map[string]string{}
		for i := range k {
			files["f"+strconv.Itoa(i)] = "v"
		}
		for history := range 12 {
			cost, about := tr.costOf(t, c, func() {
				_, err := publish(t, d, files, commit.CommitOptions{})
				require.NoError(t, err)
			})
			var want store.Counts
			want[store.OpPut] = k + 2
			want[store.OpGet] = 1
			require.Equal(t, want, cost, "commit after %d prior commits: %s", history, about)
		}

		cost, about := tr.costOf(t, c, func() {
			snap, err := d.Open(ctx)
			require.NoError(t, err)
			for _, e := range snap.Files() {
				_, err := snap.ReadFile(ctx, e.Path)
				require.NoError(t, err)
			}
		})
		var want store.Counts
		want[store.OpGet] = k + 2
		assert.Equal(t, want, cost, "snapshot read: %s", about)
	})
}

// TestIncrementalCost: an incremental publish of 1,000 files proves the
// objects it reuses with one LIST page per 1,000 of them, and a single
// reused object with one HEAD. Besides that it costs the floor: the
// pointer GET, the base-manifest GET (not when the Dataset committed the
// base itself), the changed files' PUTs, the manifest PUT and the pointer
// PUT.
func TestIncrementalCost(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		const k = 1000
		tr := &trace{Store: s}
		c := store.Count(tr)
		d := commit.New(c, commit.WithConcurrency(32))
		dir := writeFiles(t, k, "1")
		putDir(t, d, dir)
		step := func(name string, want string) {
			t.Helper()
			// A Dataset of its own for each publish, as 'publish put' has.
			cost, about := tr.costOf(t, c, func() { putDir(t, commit.New(c, commit.WithConcurrency(32)), dir) })
			assert.Equal(t, want, cost.String(), "%s: %s", name, about)
		}
		cost, about := tr.costOf(t, c, func() { putDir(t, d, dir) })
		assert.Equal(t, "get=1 put=2 list=1", cost.String(), "nothing changed, on the base the Dataset committed: %s", about)
		step("nothing changed", "get=2 put=2 list=1")
		for i := 0; i < k; i += 100 {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "d", fmt.Sprintf("%04d", i)), []byte("changed"), 0o644))
		}
		step("10 files changed", "get=2 put=12 list=1")
		// 990 reused objects of seq 1, 10 of seq 3: one page for each.
		step("nothing changed, references in two generations", "get=2 put=2 list=2")

		small := writeFiles(t, 2, "1")
		d = commit.New(store.WithPrefix(c, "small/"))
		putDir(t, d, small)
		require.NoError(t, os.WriteFile(filepath.Join(small, "d", "0000"), []byte("changed"), 0o644))
		cost, about = tr.costOf(t, c, func() { putDir(t, d, small) })
		assert.Equal(t, "get=1 head=1 put=3", cost.String(), "one reused object: %s", about)
	})
}

// TestKeptFilesCost: a commit that keeps the files of partitions each
// published by its own commit proves them with one LIST page, not a HEAD
// for each generation they sit in.
func TestKeptFilesCost(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		const parts = 8
		ctx := context.Background()
		tr := &trace{Store: s}
		c := store.Count(tr)
		d := commit.New(c, commit.WithConcurrency(32))
		publishPart := func(i int, body string) {
			t.Helper()
			tx, err := d.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.KeepAll(ctx))
			require.NoError(t, tx.PutBytes(ctx, fmt.Sprintf("part=%d/data", i), []byte(body)))
			_, err = tx.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
		}
		for i := range parts {
			publishPart(i, "1")
		}
		// parts-1 kept files, each the only one of its generation besides
		// the manifest.
		cost, about := tr.costOf(t, c, func() { publishPart(0, "2") })
		assert.Equal(t, "get=1 put=3 list=1", cost.String(), "kept files of %d generations (the base manifest is the one d committed): %s", parts-1, about)

		// The same listing proves a key among them missing, and only that one.
		snap, err := d.Open(ctx)
		require.NoError(t, err)
		gone, _ := snap.Manifest.Find("part=4/data")
		require.NoError(t, s.Delete(ctx, gone.Key, store.DeleteOptions{}))
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.KeepAll(ctx))
		require.NoError(t, tx.PutBytes(ctx, "part=0/data", []byte("3")))
		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.ErrorIs(t, err, commit.ErrMissingObject)
		assert.Contains(t, err.Error(), "part=4/data: object "+gone.Key+" missing")
		assert.Equal(t, 1, strings.Count(err.Error(), ": object "), "only the deleted object is missing: %v", err)
	})
}

// BenchmarkCommit reports requests per commit against the floor, and the
// latency of a commit after 10 and after 1,000 prior commits, on mem and on
// the real S3 server. Run: go test -run - -bench Commit ./commit
func BenchmarkCommit(b *testing.B) {
	for _, f := range []testenv.Factory{testenv.Stores()[0], testenv.Stores()[2]} {
		for _, prior := range []int{10, 1000} {
			b.Run(fmt.Sprintf("%s/K=10/prior=%d", f.Name, prior), func(b *testing.B) {
				ctx := context.Background()
				c := store.Count(f.New(b))
				d := commit.New(c)
				data := []byte("0123456789abcdef")
				commitK := func(k int) {
					tx, err := d.Begin(ctx)
					if err != nil {
						b.Fatal(err)
					}
					for i := range k {
						if err := tx.PutBytes(ctx, "f"+strconv.Itoa(i), data); err != nil {
							b.Fatal(err)
						}
					}
					if _, err := tx.Commit(ctx, commit.CommitOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				for range prior {
					commitK(1)
				}
				before := c.Counts()
				b.ResetTimer()
				for b.Loop() {
					commitK(10)
				}
				b.StopTimer()
				used := c.Counts().Sub(before)
				n := float64(b.N)
				b.ReportMetric(float64(used.Total())/n, "req/op")
				b.ReportMetric(float64(used[store.OpList])/n, "list/op")
				b.ReportMetric(float64(used.Total())/n/13, "req/floor")
			})
		}
	}
}

// BenchmarkSnapshotRead reports requests per snapshot read of 10 files.
func BenchmarkSnapshotRead(b *testing.B) {
	ctx := context.Background()
	c := store.Count(mem.New())
	d := commit.New(c)
	tx, _ := d.Begin(ctx)
	for i := range 10 {
		if err := tx.PutBytes(ctx, "f"+strconv.Itoa(i), []byte("data")); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := tx.Commit(ctx, commit.CommitOptions{}); err != nil {
		b.Fatal(err)
	}
	before := c.Counts()
	for b.Loop() {
		snap, err := d.Open(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range snap.Files() {
			if _, err := snap.ReadFile(ctx, e.Path); err != nil {
				b.Fatal(err)
			}
		}
	}
	used := c.Counts().Sub(before)
	b.ReportMetric(float64(used.Total())/float64(b.N), "req/op")
	b.ReportMetric(float64(used.Total())/float64(b.N)/12, "req/floor")
}

// trace records the requests sent through it that failed, by kind, and
// every LIST. The cost tests count the requests of each operation; one
// that a loaded server failed and the code retried is not a cost of the
// operation, so they take the failed ones out and report them.
type trace struct {
	store.Store
	mu     sync.Mutex
	failed store.Counts
	lists  []string
}

func (t *trace) Unwrap() store.Store { return t.Store }

func (t *trace) fail(op store.Op, err error) {
	if err != nil && !errors.Is(err, store.ErrNotExist) && !errors.Is(err, store.ErrPrecondition) {
		t.mu.Lock()
		t.failed[op]++
		t.mu.Unlock()
	}
}

func (t *trace) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	r, a, err := t.Store.Get(ctx, key)
	t.fail(store.OpGet, err)
	return r, a, err
}

func (t *trace) Head(ctx context.Context, key string) (store.Attrs, error) {
	a, err := t.Store.Head(ctx, key)
	t.fail(store.OpHead, err)
	return a, err
}

func (t *trace) Put(ctx context.Context, key string, r io.Reader, opts store.PutOptions) (store.Attrs, error) {
	a, err := t.Store.Put(ctx, key, r, opts)
	t.fail(store.OpPut, err)
	return a, err
}

func (t *trace) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	start := time.Now()
	page, err := t.Store.List(ctx, req)
	t.fail(store.OpList, err)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lists = append(t.lists, fmt.Sprintf("prefix %q after %q token %t: %d objects, next %t, %s, error %v",
		req.Prefix, req.StartAfter, req.Token != "", len(page.Objects), page.Next != "", time.Since(start).Round(time.Millisecond), err))
	return page, err
}

// costOf runs op and returns the requests it sent through c, which counts
// the requests through t, less those that failed. It logs the failed ones
// and, with the LISTs, puts them in the message of a failed assertion.
func (t *trace) costOf(tb testing.TB, c *store.Counter, op func()) (cost store.Counts, about string) {
	tb.Helper()
	t.mu.Lock()
	t.lists = nil
	failedBefore := t.failed
	t.mu.Unlock()
	before := c.Counts()
	op()
	sent := c.Counts().Sub(before)
	t.mu.Lock()
	defer t.mu.Unlock()
	failed := t.failed.Sub(failedBefore)
	if failed != (store.Counts{}) {
		tb.Logf("failed and retried, not counted: %s", failed)
	}
	return sent.Sub(failed), fmt.Sprintf("sent %s, of which failed %s; the LISTs:\n%s", sent, failed, strings.Join(t.lists, "\n"))
}
