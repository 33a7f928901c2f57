package gc

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/commitptr/commitptr/job"
	"github.com/commitptr/commitptr/store"
)

// jobListing is the listing of _job/, by job id.
type jobListing map[string]*jobKeys

// jobKeys are the listed records of one job.
type jobKeys struct {
	// record is the job record, whose Last-Modified is the job's staging
	// start; nil once the job was committed or aborted.
	record *store.Object
	keys   []store.Object
}

// listJobs lists the records of every job: one LIST page per 1,000.
func (r *runner) listJobs(ctx context.Context) (jobListing, error) {
	l := jobListing{}
	for o, err := range store.List(ctx, r.s, job.Dir, "", "") {
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", job.Dir, err)
		}
		id, rest, ok := strings.Cut(strings.TrimPrefix(o.Key, job.Dir), "/")
		if !ok || job.ValidID("job", id) != nil {
			continue // not a job's: left alone
		}
		k := l[id]
		if k == nil {
			k = &jobKeys{}
			l[id] = k
		}
		k.keys = append(k.keys, o)
		if rest == job.RecordName {
			k.record = &o
		}
	}
	return l, nil
}

// olderThan reports whether a job's record was written at or before cutoff.
func (l jobListing) olderThan(cutoff time.Time) bool {
	for _, k := range l {
		if k.record != nil && !k.record.LastModified.After(cutoff) {
			return true
		}
	}
	return false
}

// dropJobs deletes the records of the jobs that can no longer commit: a
// job's commit is refused once the pointer's horizon reaches the job's
// staging start (its record's Last-Modified), the horizon the plan
// published. Keys of a job without a record (the commit record left by a
// commit or an abort, a task record written after them) go once they are
// older than the orphan age. The objects its tasks staged are orphans:
// the sweep deletes them by the same horizon. A job inside the horizon is
// never touched.
//
// The jobs are listed again after the horizon is published. Task records
// go first, then commit records, then job records, each kind
// only once the one before is gone: a run stopped halfway never leaves a
// task record without its job's commit record, nor a commit record without
// its job record, so the job is still judged by its staging start.
func (r *runner) dropJobs(ctx context.Context, p *plan) error {
	if len(r.jobs) == 0 {
		return nil
	}
	// Listed again now that the horizon is on the pointer: a job committed,
	// removed or begun again since the plan's listing is judged as it is.
	jobs, err := r.listJobs(ctx)
	if err != nil {
		return err
	}
	var tasks, commits, records []string
	add := func(id, key string) {
		switch strings.TrimPrefix(key, job.Prefix(id)) {
		case job.RecordName:
			records = append(records, key)
		case job.CommitName:
			commits = append(commits, key)
		default:
			tasks = append(tasks, key)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(jobs)) {
		k := jobs[id]
		if k.record != nil {
			if p.horizon.IsZero() || k.record.LastModified.After(p.horizon) {
				continue
			}
			for _, o := range k.keys {
				add(id, o.Key)
			}
			r.rep.JobsDropped++
			continue
		}
		n := 0
		for _, o := range k.keys {
			if !o.LastModified.After(p.cutoff) {
				add(id, o.Key)
				n++
			}
		}
		if n == len(k.keys) {
			r.rep.JobsDropped++
		}
	}
	var n int
	for _, keys := range [][]string{tasks, commits, records} {
		if err := r.drop(ctx, keys, "jobs' records", &n); err != nil {
			return err
		}
	}
	return nil
}
