package perf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/store"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkScalePublish publishes a directory of COMMITPTR_SCALE_FILES
// (default 100,000) small files to the real S3 server in one commit and
// reports wall time, the process's peak RSS and the stored manifest size.
//
//	go test -run - -bench ScalePublish -benchtime 1x -timeout 60m ./tests/perf
func BenchmarkScalePublish(b *testing.B) {
	n := envInt("COMMITPTR_SCALE_FILES", 100_000)
	dir := b.TempDir()
	for i := range n {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", i%1000))
		if i < 1000 {
			if err := os.Mkdir(sub, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%06d.json", i)), []byte(`{"row":`+strconv.Itoa(i)+`}`), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	s := store.Count(remoteStore(b))
	d := commit.New(s, commit.WithConcurrency(64))
	for b.Loop() {
		start := time.Now()
		tx, err := d.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := tx.AddDir(ctx, dir); err != nil {
			b.Fatal(err)
		}
		p, err := tx.Commit(ctx, commit.CommitOptions{})
		if err != nil {
			b.Fatal(err)
		}
		elapsed := time.Since(start)
		a, err := s.Head(ctx, p.Manifest)
		if err != nil {
			b.Fatal(err)
		}
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n), "files")
		b.ReportMetric(elapsed.Seconds(), "s/publish")
		b.ReportMetric(float64(n)/elapsed.Seconds(), "files/s")
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-rss-MB")
		b.ReportMetric(float64(a.Size)/1024, "manifest-KiB")
	}
}

// BenchmarkCommitAfterHistory reports commit latency of 10 files after 10
// and after COMMITPTR_HISTORY (default 10,000) prior commits on the real
// server; the two should match within noise, since nothing on the commit
// path depends on history.
func BenchmarkCommitAfterHistory(b *testing.B) {
	for _, prior := range []int{10, envInt("COMMITPTR_HISTORY", 10_000)} {
		b.Run(fmt.Sprintf("prior=%d", prior), func(b *testing.B) {
			ctx := context.Background()
			c := store.Count(remoteStore(b))
			d := commit.New(c)
			for range prior {
				tx, err := d.Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := tx.Commit(ctx, commit.CommitOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			files, _ := makeFiles(10, 4<<10)
			p := &pair{ds: d}
			before := c.Counts()
			for b.Loop() {
				if err := p.commit(ctx, files); err != nil {
					b.Fatal(err)
				}
			}
			used := c.Counts().Sub(before)
			b.ReportMetric(float64(used.Total())/float64(b.N), "req/op")
		})
	}
}
