package lease_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/store"
)

// benchStores runs fn on a fresh counted store of the mem, fs and s3
// drivers (s3 against the real test server).
func benchStores(b *testing.B, fn func(b *testing.B, c *store.Counter)) {
	for _, f := range testenv.Stores() {
		if f.Name == "minio" {
			continue // the same server as s3
		}
		b.Run(f.Name, func(b *testing.B) { fn(b, store.Count(f.New(b))) })
	}
}

// report adds requests/op and the p50 and p99 of lat in milliseconds.
func report(b *testing.B, c *store.Counter, before store.Counts, lat []time.Duration, what string) {
	b.Helper()
	n := c.Counts().Sub(before)
	b.ReportMetric(float64(n.Total())/float64(b.N), "requests/op")
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p int) float64 {
		return float64(lat[min(len(lat)-1, len(lat)*p/100)]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(50), what+"-p50-ms")
	b.ReportMetric(pct(99), what+"-p99-ms")
}

// BenchmarkAcquireRelease: "fresh" acquires an unused name (1 PUT) and
// releases it (1 PUT); "reacquire" takes over the same released lease each
// time (PUT 412, GET, PUT) and releases it.
func BenchmarkAcquireRelease(b *testing.B) {
	ctx := context.Background()
	for _, reuse := range []bool{false, true} {
		name := map[bool]string{false: "fresh", true: "reacquire"}[reuse]
		b.Run(name, func(b *testing.B) {
			benchStores(b, func(b *testing.B, c *store.Counter) {
				o := lease.Options{Owner: "bench", TTL: time.Minute}
				lat := make([]time.Duration, 0, b.N)
				before := c.Counts()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					key := "bench"
					if !reuse {
						key = fmt.Sprintf("bench-%d", i)
					}
					start := time.Now()
					l, err := lease.TryAcquire(ctx, c, key, o)
					if err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
					if err := l.Release(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				report(b, c, before, lat, "acquire")
			})
		})
	}
}

// BenchmarkRenew: one renewal, 1 PUT.
func BenchmarkRenew(b *testing.B) {
	ctx := context.Background()
	benchStores(b, func(b *testing.B, c *store.Counter) {
		l, err := lease.TryAcquire(ctx, c, "bench", lease.Options{Owner: "bench", TTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		lat := make([]time.Duration, 0, b.N)
		before := c.Counts()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			start := time.Now()
			if err := l.Renew(ctx); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		report(b, c, before, lat, "renew")
		l.Release(ctx)
	})
}

// BenchmarkHandoff: a waiter blocks in Acquire (polling every 10–50 ms)
// while the holder works; the holder releases. Latency is from the start
// of Release until the waiter holds the lease. Requests/op include the
// waiter's polls during about 20 ms of waiting.
func BenchmarkHandoff(b *testing.B) {
	ctx := context.Background()
	benchStores(b, func(b *testing.B, c *store.Counter) {
		o := lease.Options{Owner: "w", TTL: time.Minute, PollMin: 10 * time.Millisecond, PollMax: 50 * time.Millisecond}
		holder, err := lease.TryAcquire(ctx, c, "bench", o)
		if err != nil {
			b.Fatal(err)
		}
		lat := make([]time.Duration, 0, b.N)
		before := c.Counts()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			got := make(chan *lease.Lease, 1)
			go func() {
				l, err := lease.Acquire(ctx, c, "bench", o)
				if err != nil {
					b.Error(err)
				}
				got <- l
			}()
			time.Sleep(20 * time.Millisecond) // the holder's work
			start := time.Now()
			if err := holder.Release(ctx); err != nil {
				b.Fatal(err)
			}
			holder = <-got
			if holder == nil {
				b.FailNow()
			}
			lat = append(lat, time.Since(start))
		}
		b.StopTimer()
		report(b, c, before, lat, "handoff")
		holder.Release(ctx)
	})
}
