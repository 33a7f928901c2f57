package job_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/job"
	"github.com/commitptr/commitptr/store"
)

// BenchmarkJobCommitAgainstPut compares, on versitygw, the commit of a job
// of 1,000 tasks (one small file each, staged and committed by the tasks
// beforehand) with one put of the same 1,000 files: the job's commit
// uploads nothing, so it costs the reading of the task records, not the
// data. It reports the job's commit, its tasks (run 16 at a time) and the
// put, each in seconds.
//
//	go test -run '^$' -bench JobCommitAgainstPut -benchtime 1x ./job
func BenchmarkJobCommitAgainstPut(b *testing.B) {
	const tasks = 1000
	ctx := context.Background()
	var s3 testenv.Factory
	for _, f := range testenv.Stores() {
		if f.Name == "s3" {
			s3 = f
		}
	}
	var commitTime, taskTime, putTime time.Duration
	for i := range b.N {
		s := s3.New(b)
		d := commit.New(s)
		j, err := job.Begin(ctx, d, "bench-"+strconv.Itoa(i), job.Options{})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		var g errgroup.Group
		g.SetLimit(16)
		for t := range tasks {
			g.Go(func() error {
				tk, err := j.Task("t"+strconv.Itoa(t), "a", "bench")
				if err != nil {
					return err
				}
				if err := tk.Tx().PutBytes(ctx, "part-"+strconv.Itoa(t), []byte("part "+strconv.Itoa(t))); err != nil {
					return err
				}
				_, err = tk.Commit(ctx)
				return err
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		taskTime += time.Since(start)
		start = time.Now()
		if _, err := j.Commit(ctx, job.CommitOptions{ExpectTasks: tasks, Replace: true}); err != nil {
			b.Fatal(err)
		}
		commitTime += time.Since(start)

		start = time.Now()
		putOnce(b, s3.New(b), tasks)
		putTime += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(commitTime.Seconds()/n, "job-commit-s")
	b.ReportMetric(taskTime.Seconds()/n, "tasks-s")
	b.ReportMetric(putTime.Seconds()/n, "put-s")
}

// putOnce commits files part-0... as one put, uploading 16 at a time as
// publish put does.
func putOnce(b *testing.B, s store.Store, files int) {
	ctx := context.Background()
	tx, err := commit.New(s).Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var g errgroup.Group
	g.SetLimit(16)
	for t := range files {
		g.Go(func() error {
			return tx.PutBytes(ctx, "part-"+strconv.Itoa(t), []byte("part "+strconv.Itoa(t)))
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	if _, err := tx.Commit(ctx, commit.CommitOptions{}); err != nil {
		b.Fatal(err)
	}
}
