package job

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/strictjson"
	"github.com/commitptr/commitptr/store"
)

// TaskRecord is the body of _job/<job>/task/<instance>/<task>: the
// attempt that won the task and the files it staged under its own
// generation.
type TaskRecord struct {
	Format     int                `json:"format"`
	Job        string             `json:"job"`
	Instance   string             `json:"instance"`
	Task       string             `json:"task"`
	Attempt    string             `json:"attempt"`
	Generation string             `json:"generation"`
	Writer     string             `json:"writer,omitempty"`
	Entries    []generation.Entry `json:"entries"`
}

// Size returns the total size of the task's files.
func (r *TaskRecord) Size() int64 {
	var n int64
	for _, e := range r.Entries {
		n += e.Size
	}
	return n
}

// validate checks a task record read from key: it must name its job, the
// job's instance and its task, and every entry must be a valid path whose object lies under the
// attempt's own generation, so that a commit never adopts another key.
func (r *TaskRecord) validate(job, instance, task string) error {
	if r.Job != job || r.Instance != instance || r.Task != task {
		return fmt.Errorf("names job %q instance %q task %q", r.Job, r.Instance, r.Task)
	}
	if err := ValidID("attempt", r.Attempt); err != nil {
		return err
	}
	if err := generation.Valid(r.Generation); err != nil {
		return err
	}
	own := generation.Prefix(r.Generation)
	for i, e := range r.Entries {
		if err := generation.CheckPath(e.Path); err != nil {
			return err
		}
		if i > 0 && r.Entries[i-1].Path >= e.Path {
			return fmt.Errorf("entries are not sorted and unique at %q", e.Path)
		}
		rest, ok := strings.CutPrefix(e.Key, own)
		if !ok || generation.CheckPath(rest) != nil {
			return fmt.Errorf("entry %q: key %q is not a data key of generation %s", e.Path, e.Key, r.Generation)
		}
		if e.Size < 0 || len(e.SHA256) != 64 || (e.Encoding != "" && e.Encoding != "zstd") {
			return fmt.Errorf("entry %q: bad size, sha256 or encoding", e.Path)
		}
	}
	return nil
}

func readTask(ctx context.Context, s store.Store, job, instance, task string) (*TaskRecord, error) {
	key := taskKey(job, instance, task)
	b, _, err := getSmall(ctx, s, key)
	if err != nil {
		return nil, err
	}
	var r TaskRecord
	if err := strictjson.Decode(b, []int{1}, &r); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	if err := r.validate(job, instance, task); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	return &r, nil
}

// Task is one attempt of one task of a job. Its files are staged under a
// generation of its own; Commit commits the task.
type Task struct {
	j             *Job
	task, attempt string
	writer        string
	tx            *commit.Tx
}

// Task starts an attempt of task. attempt names it (a retry or a
// speculative copy of the task has another); every call stages under a
// fresh generation all the same.
func (j *Job) Task(task, attempt, writer string) (*Task, error) {
	if err := ValidID("task", task); err != nil {
		return nil, err
	}
	if err := ValidID("attempt", attempt); err != nil {
		return nil, err
	}
	tx, err := j.ds.Stage()
	if err != nil {
		return nil, err
	}
	return &Task{j: j, task: task, attempt: attempt, writer: writer, tx: tx}, nil
}

// Generation returns the generation this attempt stages under.
func (t *Task) Generation() string { return t.tx.Generation() }

// Tx returns the staging transaction: Put, PutBytes, PutFile and AddDir
// stage the task's files.
func (t *Task) Tx() *commit.Tx { return t.tx }

// Discard deletes what this attempt staged. Call it only for an attempt
// that never called Commit, or whose Commit returned an error other than
// ErrCommitUnknown (which already deleted what it could prove lost).
func (t *Task) Discard(ctx context.Context) error { return t.tx.Discard(ctx) }

// taskPutAttempts bounds the writes of a task record that were proven not
// applied (the record is still absent after the error).
const taskPutAttempts = 4

// settleTimeout bounds the reads that settle an ambiguous write; they run
// even after the caller's context is cancelled.
const settleTimeout = 30 * time.Second

// Commit commits the task: it writes the task record, create-if-absent.
// It returns nil when this attempt's record is the task's, and also when
// an earlier run of the same attempt id committed it (the task's files are
// the earlier run's). It returns a *TaskLostError when the record names
// another attempt's generation. Either way this attempt's objects are
// deleted when no commit of the job has started (see Job.uncommitted), and
// otherwise left to the collector. When the outcome cannot be proven it returns
// an error matching commit.ErrCommitUnknown and deletes nothing.
func (t *Task) Commit(ctx context.Context) (*TaskRecord, error) {
	s := t.j.s
	key := taskKey(t.j.id, t.j.instance, t.task)
	rec := &TaskRecord{Format: 1, Job: t.j.id, Instance: t.j.instance, Task: t.task, Attempt: t.attempt, Generation: t.tx.Generation(), Writer: t.writer, Entries: t.tx.Entries()}
	if err := rec.validate(t.j.id, t.j.instance, t.task); err != nil {
		return nil, fmt.Errorf("job: task %s: %w", t.task, err)
	}
	// The Tx stages nothing more: a Put still running now is not part of
	// the task, and its object is left to the collector.
	for n := 1; ; n++ {
		werr := putJSON(ctx, s, key, rec, store.PutOptions{IfNoneMatch: true})
		if werr == nil {
			return rec, nil
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		got, rerr := readTask(sctx, s, t.j.id, t.j.instance, t.task)
		cancel()
		switch {
		case rerr == nil && got.Generation == rec.Generation:
			// Our write landed (an SDK retry may have met it).
			return rec, nil
		case rerr == nil:
			// Another record is the task's. Ours may still have landed, and
			// been read by a commit of the job before the commit removed
			// it: what this attempt staged goes only once no commit of the
			// job can have started.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
			kept := true
			if ok, _ := t.j.uncommitted(dctx); ok {
				kept = t.tx.Discard(dctx) != nil // the orphan sweep removes what a failed discard left
			}
			cancel()
			if got.Attempt == t.attempt {
				return got, nil
			}
			return got, &TaskLostError{Task: t.task, Winner: got.Attempt, Mine: t.attempt, Kept: kept}
		case errors.Is(rerr, store.ErrNotExist) && n < taskPutAttempts:
			// Not applied: send it again.
			continue
		default:
			why := rerr
			if why == nil || errors.Is(rerr, store.ErrNotExist) {
				why = errors.New("the record is still absent")
			}
			return nil, fmt.Errorf("%w: task %s: write %s: %v; read back: %v", commit.ErrCommitUnknown, t.task, key, werr, why)
		}
	}
}

// sortedTasks returns the task ids of recs, sorted.
func sortedTasks(recs []*TaskRecord) []string {
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.Task
	}
	slices.Sort(ids)
	return ids
}
