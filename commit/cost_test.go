package commit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/teststores"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// TestRequestFloor: a commit of K files costs exactly K data PUTs + 1
// manifest PUT + 1 pointer GET + 1 pointer PUT, a snapshot read of K files
// 1 pointer GET + 1 manifest GET + K GETs, no LIST on either path, and
// neither grows with history.
func TestRequestFloor(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		const k = 5
		ctx := context.Background()
		c := store.Count(s)
		d := commit.New(c)
		files := map[string]string{}
		for i := range k {
			files["f"+strconv.Itoa(i)] = "v"
		}
		for history := range 12 {
			before := c.Counts()
			_, err := publish(t, d, files, commit.CommitOptions{})
			require.NoError(t, err)
			var want store.Counts
			want[store.OpPut] = k + 2
			want[store.OpGet] = 1
			require.Equal(t, want, c.Counts().Sub(before), "commit after %d prior commits", history)
		}

		before := c.Counts()
		snap, err := d.Open(ctx)
		require.NoError(t, err)
		for _, e := range snap.Files() {
			_, err := snap.ReadFile(ctx, e.Path)
			require.NoError(t, err)
		}
		var want store.Counts
		want[store.OpGet] = k + 2
		assert.Equal(t, want, c.Counts().Sub(before), "snapshot read")
	})
}

// TestIncrementalCost: an incremental publish of 1,000 files proves the
// objects it reuses with one LIST page per 1,000 of them, and a single
// reused object with one HEAD. Besides that it costs the floor: the
// pointer GET, the base-manifest GET, the changed files' PUTs, the
// manifest PUT and the pointer PUT.
func TestIncrementalCost(t *testing.T) {
	eachStore(t, func(t *testing.T, s store.Store) {
		const k = 1000
		c := store.Count(s)
		d := commit.New(c, commit.WithConcurrency(32))
		dir := writeFiles(t, k, "1")
		putDir(t, d, dir)
		step := func(name string, want string) {
			t.Helper()
			before := c.Counts()
			putDir(t, d, dir)
			assert.Equal(t, want, c.Counts().Sub(before).String(), name)
		}
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
		before := c.Counts()
		putDir(t, d, small)
		assert.Equal(t, "get=2 head=1 put=3", c.Counts().Sub(before).String(), "one reused object")
	})
}

// BenchmarkCommit reports requests per commit against the floor, and the
// latency of a commit after 10 and after 1,000 prior commits, on mem and on
// the real S3 server. Run: go test -run - -bench Commit ./commit
func BenchmarkCommit(b *testing.B) {
	for _, f := range []teststores.Factory{teststores.All()[0], teststores.All()[2]} {
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
		tx.PutBytes(ctx, "f"+strconv.Itoa(i), []byte("data"))
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
