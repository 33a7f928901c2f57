package perf

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/commitptr/commitptr/internal/bench"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	s3store "github.com/commitptr/commitptr/store/s3"
)

// BenchmarkContention runs the contention scenario against the real S3
// server with 1 to 32 writers. With COMMITPTR_PLOT=file.svg it draws the
// curve. Each sub-benchmark runs the scenario once for
// COMMITPTR_CONTENTION_DURATION (default 5s):
//
//	COMMITPTR_PLOT=docs/contention.svg go test -run - -bench Contention -benchtime 1x ./tests/perf
func BenchmarkContention(b *testing.B) {
	dur := 5 * time.Second
	if v := os.Getenv("COMMITPTR_CONTENTION_DURATION"); v != "" {
		var err error
		if dur, err = time.ParseDuration(v); err != nil {
			b.Fatal(err)
		}
	}
	var results []bench.Result
	for _, w := range []int{1, 2, 4, 8, 16, 32} {
		b.Run(fmt.Sprintf("writers=%d", w), func(b *testing.B) {
			s := remoteStore(b)
			for b.Loop() {
				r, err := bench.Contention(context.Background(), s, w, dur)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(r.PerSecond, "commits/s")
				b.ReportMetric(r.Extra["attempts_per_success"], "attempts/success")
				b.ReportMetric(float64(r.P99.Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(r.P50.Microseconds())/1000, "p50-ms")
				results = append(results, r)
			}
		})
	}
	if path := os.Getenv("COMMITPTR_PLOT"); path != "" && len(results) > 0 {
		if err := os.WriteFile(path, bench.ContentionSVG(results), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func remoteStore(b *testing.B) store.Store {
	b.Helper()
	srv := testenv.S3(b)
	b.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	b.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	st, err := s3store.New(context.Background(), s3store.Options{Bucket: srv.NewBucket(b), Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true})
	if err != nil {
		b.Fatal(err)
	}
	return st
}
