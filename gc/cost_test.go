package gc_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
)

// TestCostGrowsWithGarbage: a collection after 50 or 500 earlier
// commits (collected as they went) costs the same; what it costs depends
// on the retained window and the new garbage only.
func TestCostGrowsWithGarbage(t *testing.T) {
	const nfiles = 10
	cost := func(history, garbage int) store.Counts {
		ctx := context.Background()
		s := storeFor(t)
		d := dataset(s)
		opts := gc.Options{Keep: 2, Grace: -1, OrphanAge: -1}
		publish(t, d, false, files(nfiles, "seed"))
		for i := range history {
			publish(t, d, true, map[string]string{fmt.Sprintf("f%04d", i%nfiles): fmt.Sprint("h", i)})
			if i%50 == 49 {
				_, err := gc.Run(ctx, s, opts)
				require.NoError(t, err)
			}
		}
		_, err := gc.Run(ctx, s, opts)
		require.NoError(t, err)
		for i := range garbage {
			publish(t, d, true, map[string]string{fmt.Sprintf("f%04d", i%nfiles): fmt.Sprint("g", i)})
		}
		rep, err := gc.Run(ctx, s, opts)
		require.NoError(t, err)
		require.Len(t, rep.Deleted, garbage)
		return rep.Requests
	}
	short, long := cost(50, 5), cost(500, 5)
	t.Logf("after 50 commits: %s; after 500: %s", short, long)
	assert.Equal(t, short, long, "the cost does not grow with history")
	// 2 pointer (the token's registration, the plan) + (1 current + 2
	// kept + 5 garbage) manifests + 1 for the collected link that ends
	// the walk + 1 lease read.
	assert.EqualValues(t, 2+8+1+1, long[store.OpGet])
	assert.EqualValues(t, 2, long[store.OpDeleteMany], "one for the data, then one for the manifests")

	more := cost(50, 40)
	t.Logf("with 40 garbage generations: %s", more)
	assert.EqualValues(t, 2+43+1+1, more[store.OpGet], "one GET per garbage manifest")
	assert.EqualValues(t, 2, more[store.OpDeleteMany])
}

// BenchmarkCollect measures one collection of a history of generations of
// 10 objects each, all but 3 of them garbage, on each driver, and reports
// the requests it took against the floor: one LIST page per 1000 keys
// under _gen/, one DeleteMany per 1000 deleted keys, one GET per manifest
// read (and two for the pointer). Set GC_BENCH_GENS to change the number
// of generations (default 100) and GC_BENCH_DRIVERS to a driver name to
// run one driver only.
func BenchmarkCollect(b *testing.B) {
	gens := 100
	if v := os.Getenv("GC_BENCH_GENS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err)
		gens = n
	}
	const perGen, keep = 10, 2
	for _, f := range testenv.Stores() {
		if only := os.Getenv("GC_BENCH_DRIVERS"); only != "" && only != f.Name {
			continue
		}
		b.Run(fmt.Sprintf("%s/gens=%d", f.Name, gens), func(b *testing.B) {
			var total store.Counts
			var deleted int
			var seed time.Duration
			for range b.N {
				b.StopTimer()
				s := f.New(b)
				start := time.Now()
				seedChain(b, s, gens, perGen)
				seed += time.Since(start)
				b.StartTimer()
				rep, err := gc.Run(context.Background(), s, gc.Options{Keep: keep, Grace: -1, OrphanAge: time.Hour})
				require.NoError(b, err)
				require.Len(b, rep.Deleted, gens-keep-1)
				total = addCounts(total, rep.Requests)
				deleted += rep.ObjectsDeleted
			}
			n := float64(b.N)
			keys := gens * (perGen + 1)
			b.ReportMetric(float64(total[store.OpList])/n, "lists/op")
			b.ReportMetric(float64(ceilDiv(keys, store.MaxListPage)), "list-floor/op")
			b.ReportMetric(float64(total[store.OpDeleteMany])/n, "deletes/op")
			b.ReportMetric(float64(ceilDiv(deleted/b.N, store.MaxDeleteBatch)), "delete-floor/op")
			b.ReportMetric(float64(total[store.OpGet])/n, "gets/op")
			b.ReportMetric(float64(gens+2), "get-floor/op")
			b.ReportMetric(float64(total[store.OpPut])/n, "puts/op")
			b.ReportMetric(float64(total.Total())/n, "requests/op")
			b.ReportMetric(float64(deleted)/n, "objects-deleted/op")
			b.ReportMetric(seed.Seconds()/n, "seed-s/op")
		})
	}
}

func addCounts(a, b store.Counts) store.Counts {
	for i := range a {
		a[i] += b[i]
	}
	return a
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
