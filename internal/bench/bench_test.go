package bench_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/bench"
	"github.com/commitptr/commitptr/store/mem"
)

func TestCommitAtFloor(t *testing.T) {
	r, err := bench.Commit(context.Background(), mem.New(), 10, 1024, 5)
	require.NoError(t, err)
	assert.Equal(t, 5, r.Ops)
	assert.Equal(t, map[string]float64{"get": 1, "put": 12}, r.Requests, "a commit of 10 files costs 10+3 requests")
	assert.Positive(t, r.P50)
}

func TestContentionNoLostUpdate(t *testing.T) {
	var rs []bench.Result
	for _, w := range []int{1, 4} {
		r, err := bench.Contention(context.Background(), mem.New(), w, 500*time.Millisecond)
		require.NoError(t, err)
		assert.Positive(t, r.Ops)
		assert.GreaterOrEqual(t, r.Extra["attempts_per_success"], 1.0)
		rs = append(rs, r)
	}
	svg := bench.ContentionSVG(rs)
	require.NoError(t, xml.Unmarshal(svg, new(struct{})), "the plot is well-formed XML")
	assert.Equal(t, 2, bytes.Count(svg, []byte("<polyline")))
	var table bytes.Buffer
	bench.WriteTable(&table, rs)
	assert.Contains(t, table.String(), "contention writers=4")
}

func TestLeaseHandoffAndCollect(t *testing.T) {
	ctx := context.Background()
	r, err := bench.LeaseHandoff(ctx, mem.New(), 5)
	require.NoError(t, err)
	assert.Equal(t, 5, r.Ops)
	assert.Positive(t, r.P50)

	r, err = bench.Collect(ctx, mem.New(), 20, 3)
	require.NoError(t, err)
	assert.EqualValues(t, 19*4, r.Extra["objects_deleted"], "all but the current generation: 3 files and a manifest each")
	assert.EqualValues(t, 2, r.Requests["delete-many"], "one for the data objects, then one for the manifests")
}

func TestPartitionsRebase(t *testing.T) {
	ctx := context.Background()
	series := map[bench.PartitionMode][]bench.Result{}
	for _, w := range []int{1, 4} {
		for _, mode := range []bench.PartitionMode{bench.RebaseGroup, bench.RebaseAlone, bench.NoRebase} {
			r, err := bench.Partitions(ctx, mem.New(), w, mode, bench.ProcessPerWriter, 300*time.Millisecond)
			require.NoError(t, err, "no lost update, no livelock")
			assert.Positive(t, r.Ops)
			series[mode] = append(series[mode], r)
			if mode != bench.RebaseGroup {
				assert.Zero(t, r.Extra["carried_per_success"], mode)
			}
			if mode == bench.NoRebase {
				assert.Zero(t, r.Extra["rebases_per_success"])
			}
		}
	}
	r, err := bench.Partitions(ctx, mem.New(), 4, bench.RebaseGroup, bench.ProcessPerCommit, 300*time.Millisecond)
	require.NoError(t, err, "no lost update, no livelock, with a process per commit")
	assert.Positive(t, r.Ops)

	svg := bench.PartitionsSVG(series[bench.RebaseGroup], series[bench.RebaseAlone], series[bench.NoRebase])
	require.NoError(t, xml.Unmarshal(svg, new(struct{})), "the plot is well-formed XML")
	assert.Equal(t, 3, bytes.Count(svg, []byte("<polyline")))

	p, err := bench.PartitionPuts(ctx, mem.New(), 8, 5, 1024)
	require.NoError(t, err)
	assert.Equal(t, 8, p.Commits, "disjoint partitions all commit")
	assert.Zero(t, p.Lost)
	assert.Zero(t, p.UploadedTwice)
	assert.Equal(t, 8*5, p.DataPuts)
	assert.GreaterOrEqual(t, int(p.Requests.Total()), p.RebaseFloor)
}
