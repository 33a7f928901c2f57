package perf

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commitptr/commitptr/internal/bench"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// BenchmarkPartitions runs disjoint writers (each commits its own path of
// one dataset, keeping the rest) against the real S3 server with 1 to 32
// writers, with rebase on and off side by side at each writer count. With
// COMMITPTR_PLOT=file.svg it draws both goodput curves. Each run lasts
// COMMITPTR_CONTENTION_DURATION (default 5s). Each writer is a job with a
// Dataset of its own; with COMMITPTR_PROCESS=commit, each commit is (as
// a 'publish' run per commit would be). COMMITPTR_STORE=mem runs it on
// the in-memory store instead, with the same delay (see partitionsStore):
//
//	COMMITPTR_PLOT=docs/partitions.svg go test -run - -bench Partitions -benchtime 1x ./tests/perf
func BenchmarkPartitions(b *testing.B) {
	dur, latency, procs := partitionsEnv(b)
	series := map[bench.PartitionMode][]bench.Result{}
	modes := []bench.PartitionMode{bench.RebaseGroup, bench.RebaseAlone, bench.NoRebase}
	for _, w := range []int{1, 2, 4, 8, 16, 32} {
		for _, mode := range modes {
			b.Run(fmt.Sprintf("writers=%d/mode=%s", w, mode), func(b *testing.B) {
				s := partitionsStore(b, latency)
				for b.Loop() {
					r, err := bench.Partitions(context.Background(), s, w, mode, procs, dur)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(r.PerSecond, "commits/s")
					b.ReportMetric(r.Extra["attempts_per_success"], "attempts/success")
					b.ReportMetric(r.Extra["rebases_per_success"], "rebases/success")
					b.ReportMetric(r.Extra["carried_per_success"], "carried/success")
					b.ReportMetric(r.Extra["fairness"], "fairness")
					var reqs float64
					for _, n := range r.Requests {
						reqs += n
					}
					b.ReportMetric(reqs, "requests/success")
					b.Logf("requests per success, by kind: %v", fmtKinds(r.Requests))
					b.ReportMetric(float64(r.P99.Microseconds())/1000, "p99-ms")
					b.ReportMetric(float64(r.P50.Microseconds())/1000, "p50-ms")
					series[mode] = append(series[mode], r)
				}
			})
		}
	}
	if path := os.Getenv("COMMITPTR_PLOT"); path != "" && len(series[bench.RebaseGroup]) > 0 {
		if err := os.WriteFile(path, bench.PartitionsSVG(series[bench.RebaseGroup], series[bench.RebaseAlone], series[bench.NoRebase]), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// partitionsEnv reads the run length, the delay per request and what a
// process is from COMMITPTR_CONTENTION_DURATION (default 5s),
// COMMITPTR_LATENCY (default none) and COMMITPTR_PROCESS (writer, the
// default, or commit).
func partitionsEnv(b *testing.B) (dur, latency time.Duration, procs bench.Processes) {
	b.Helper()
	dur = 5 * time.Second
	if v := os.Getenv("COMMITPTR_CONTENTION_DURATION"); v != "" {
		var err error
		if dur, err = time.ParseDuration(v); err != nil {
			b.Fatal(err)
		}
	}
	if v := os.Getenv("COMMITPTR_LATENCY"); v != "" {
		var err error
		if latency, err = time.ParseDuration(v); err != nil {
			b.Fatal(err)
		}
	}
	switch v := os.Getenv("COMMITPTR_PROCESS"); v {
	case "", "writer":
	case "commit":
		procs = bench.ProcessPerCommit
	default:
		b.Fatalf("COMMITPTR_PROCESS=%q: want writer or commit", v)
	}
	return dur, latency, procs
}

// partitionsStore is the store the partition benchmarks run on, each
// request delayed by latency: the real S3 server, or, with
// COMMITPTR_STORE=mem, the in-memory store. The latter takes no core
// from the writers, so it measures the protocol alone, without what a
// server that shares the machine's cores with 32 writers adds.
func partitionsStore(b *testing.B, latency time.Duration) store.Store {
	b.Helper()
	switch v := os.Getenv("COMMITPTR_STORE"); v {
	case "", "s3":
		return bench.Slow(remoteStore(b), latency)
	case "mem":
		return bench.Slow(mem.New(), latency)
	default:
		b.Fatalf("COMMITPTR_STORE=%q: want s3 or mem", v)
		return nil
	}
}

// BenchmarkPartitionsTail measures the latency goal the way one
// run cannot: the p99 of W writers (COMMITPTR_WRITERS, default 32) over
// the single writer's, group commit, in COMMITPTR_REPEAT (default 5)
// pairs run in turn, one writer then W, so that both see the machine as
// it is then. It reports the median, lowest and highest ratio, and logs
// each pair. Run lengths, delay, processes and store as
// BenchmarkPartitions:
//
//	COMMITPTR_LATENCY=10ms go test -run - -bench PartitionsTail -benchtime 1x ./tests/perf
func BenchmarkPartitionsTail(b *testing.B) {
	dur, latency, procs := partitionsEnv(b)
	writers, pairs := envInt("COMMITPTR_WRITERS", 32), envInt("COMMITPTR_REPEAT", 5)
	for b.Loop() {
		s := partitionsStore(b, latency)
		var ratios []float64
		for i := range pairs {
			one, err := bench.Partitions(context.Background(), s, 1, bench.RebaseGroup, procs, dur)
			if err != nil {
				b.Fatal(err)
			}
			many, err := bench.Partitions(context.Background(), s, writers, bench.RebaseGroup, procs, dur)
			if err != nil {
				b.Fatal(err)
			}
			r := float64(many.P99) / float64(one.P99)
			ratios = append(ratios, r)
			b.Logf("pair %d: 1 writer p99 %v (%.1f commits/s), %d writers p99 %v (%.1f commits/s): %.1fx",
				i+1, one.P99.Round(time.Millisecond), one.PerSecond, writers, many.P99.Round(time.Millisecond), many.PerSecond, r)
		}
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], "median-p99-ratio")
		b.ReportMetric(ratios[0], "min-p99-ratio")
		b.ReportMetric(ratios[len(ratios)-1], "max-p99-ratio")
	}
}

// BenchmarkPartitionPuts runs 16 concurrent publishes of one partition
// each (20 files of 4 KiB, as 'publish put --into pNN/' does) against the
// real S3 server, and reports commits, losses, objects uploaded twice and
// requests against the floor.
//
//	go test -run - -bench PartitionPuts -benchtime 1x ./tests/perf
func BenchmarkPartitionPuts(b *testing.B) {
	s := remoteStore(b)
	for b.Loop() {
		p, err := bench.PartitionPuts(context.Background(), s, 16, 20, 4096)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(p.Commits), "commits")
		b.ReportMetric(float64(p.Lost), "lost")
		b.ReportMetric(float64(p.UploadedTwice), "uploaded-twice")
		b.ReportMetric(float64(p.Rebases), "rebases")
		b.ReportMetric(float64(p.Carried), "carried")
		b.ReportMetric(float64(p.Requests.Total()), "requests")
		b.ReportMetric(float64(p.Floor), "floor")
		b.ReportMetric(float64(p.RebaseFloor), "floor+rebases")
		b.Logf("%d writers x %d files: %d commits, %d lost, %d rebases, %d data PUTs (%d keys twice); requests %s = %d; floor %d, with rebases %d; %s",
			p.Writers, p.FilesPer, p.Commits, p.Lost, p.Rebases, p.DataPuts, p.UploadedTwice, p.Requests, p.Requests.Total(), p.Floor, p.RebaseFloor, p.Elapsed.Round(time.Millisecond))
	}
}

// fmtKinds writes requests per success by kind, sorted by kind, with two
// decimals: "get=4.81 list=2.30 ...".
func fmtKinds(m map[string]float64) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, " %s=%.2f", k, m[k])
	}
	return strings.TrimSpace(b.String())
}
