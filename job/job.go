// Package job publishes the output of a fan-out job, written by many tasks,
// with one atomic commit: readers see no part of it before the commit and
// all of it after.
//
// A job is opened with Begin, which writes the job's record. Each task
// stages its files under a generation of its own attempt (Task) and commits
// the task by creating its task record, create-if-absent: the first attempt
// of a task to do so wins, and a later attempt of the same task learns that
// it lost and deletes only what it staged itself. Job.Commit reads the task
// records, checks that the expected tasks are there, and publishes the
// winning attempts' files with one pointer compare-and-swap on the dataset
// (package commit). A Commit run again after a crash returns the generation
// that committed the job instead of committing twice.
//
// # Layout
//
//	_job/<job>/job                    the job record, written once: a random
//	                                  instance id; its Last-Modified is the
//	                                  job's staging start
//	_job/<job>/task/<instance>/<task> a task record: the winning attempt and
//	                                  its files, written once (If-None-Match)
//	_job/<job>/commit                 the commit record: "committing" before
//	                                  the first pointer write, "committed"
//	                                  with the generation after it, or
//	                                  "aborted"
//	_gen/<attempt gen>/...            the data objects of one task attempt
//
// A job begun again under the same id, once the collector dropped its
// records, is another instance: task records of an earlier instance are
// never read by its commit, and the collector removes them.
//
// docs/PROTOCOL.md, "Jobs", has the rules.
package job

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/strictjson"
	"github.com/commitptr/commitptr/store"
)

// Dir is the prefix of every job's records.
const Dir = "_job/"

// MetaKey is the pointer and manifest meta key that names the job a
// generation committed.
const MetaKey = "commitptr.job"

// InstanceMetaKey is the meta key that names the instance of the job a
// generation committed.
const InstanceMetaKey = "commitptr.job.instance"

var (
	// ErrTaskLost: another attempt of the task committed it first. This
	// attempt's objects were deleted. Errors of this class are
	// *TaskLostError values.
	ErrTaskLost = errors.New("job: another attempt of the task won")
	// ErrNoJob: the job has no record: it was never begun, or it was
	// committed or aborted and its records removed.
	ErrNoJob = errors.New("job: no such job")
	// ErrAborted: the job was aborted.
	ErrAborted = errors.New("job: aborted")
	// ErrCommitted: the job was committed (Abort refuses).
	ErrCommitted = errors.New("job: committed")
	// ErrTasks: the tasks committed are not the ones expected.
	ErrTasks = errors.New("job: tasks are not the ones expected")
	// ErrCorrupt: a job record cannot be read.
	ErrCorrupt = errors.New("job: corrupt record")
)

// TaskLostError says which attempt won the task, and whether this
// attempt's objects were deleted.
type TaskLostError struct {
	Task, Winner, Mine string
	// Kept: the deletion was not proven safe (a commit of the job may
	// have read this attempt's record before it was replaced), so the
	// objects are left to the collector's orphan sweep.
	Kept bool
}

func (e *TaskLostError) Error() string {
	if e.Kept {
		return fmt.Sprintf("job: task %s: attempt %s won; attempt %s lost, and left its objects to the collector", e.Task, e.Winner, e.Mine)
	}
	return fmt.Sprintf("job: task %s: attempt %s won; attempt %s lost and deleted its objects", e.Task, e.Winner, e.Mine)
}

// Is makes errors.Is(err, ErrTaskLost) true.
func (e *TaskLostError) Is(target error) bool { return target == ErrTaskLost }

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidID checks a job, task or attempt id: 1 to 128 characters of
// letters, digits, '.', '_' and '-', starting with a letter or digit.
func ValidID(what, id string) error {
	if !idRE.MatchString(id) {
		return fmt.Errorf("job: %s id %q: want 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", what, id)
	}
	return nil
}

// Prefix returns the prefix of job id's records.
func Prefix(id string) string { return Dir + id + "/" }

// RecordName is the name of a job's record below its prefix: its
// Last-Modified is the job's staging start.
const RecordName = "job"

// CommitName is the name of a job's commit record below its prefix.
const CommitName = "commit"

func recordKey(id string) string { return Prefix(id) + RecordName }
func commitKey(id string) string { return Prefix(id) + CommitName }

// tasksDir is the prefix of every instance's task records.
func tasksDir(id string) string { return Prefix(id) + "task/" }

// taskDir is the prefix of the task records of one instance of a job.
func taskDir(id, instance string) string { return tasksDir(id) + instance + "/" }

func taskKey(id, instance, task string) string { return taskDir(id, instance) + task }

// Options are the fencing token a job's commit carries: a job opened under
// a lease commits fenced by it, like any commit (commit.CommitOptions).
type Options struct {
	Fence      uint64
	FenceLease string
}

// record is the body of _job/<job>/job.
type record struct {
	Format     int       `json:"format"`
	Job        string    `json:"job"`
	Instance   string    `json:"instance"`
	Writer     string    `json:"writer,omitempty"`
	Created    time.Time `json:"created"`
	Fence      uint64    `json:"fence,omitempty"`
	FenceLease string    `json:"fence_lease,omitempty"`
}

// Job is an open job of a dataset.
type Job struct {
	ds *commit.Dataset
	s  store.Store
	id string
	// instance is the random id of this beginning of the job.
	instance string
	// start is the job's staging start: the Last-Modified of its record,
	// in the store's clock, which precedes every object its tasks stage.
	start time.Time
	opts  Options
}

// ID returns the job's id.
func (j *Job) ID() string { return j.id }

// Instance returns the random id that Begin drew for this beginning of
// the job.
func (j *Job) Instance() string { return j.instance }

// TaskKey returns the key of task's record in this instance of the job.
func (j *Job) TaskKey(task string) string { return taskKey(j.id, j.instance, task) }

// StagingStart returns the job's staging start: the Last-Modified of its
// record in the store's clock. The collector's horizon is held against it.
func (j *Job) StagingStart() time.Time { return j.start }

// Begin opens job id on ds, writing its record if it has none; a job
// begun already is opened as it is (a driver that restarts resumes it).
// A job that was committed or aborted is not begun again: Begin returns
// ErrCommitted or ErrAborted.
func Begin(ctx context.Context, ds *commit.Dataset, id string, opts Options) (*Job, error) {
	if err := ValidID("job", id); err != nil {
		return nil, err
	}
	s := ds.Store()
	if c, _, err := readCommit(ctx, s, id); err == nil {
		return nil, c.finished(id)
	} else if !errors.Is(err, store.ErrNotExist) {
		return nil, err
	}
	body, err := json.Marshal(record{Format: 1, Job: id, Instance: rand.Text(), Created: time.Now().UTC(), Fence: opts.Fence, FenceLease: opts.FenceLease})
	if err != nil {
		return nil, err
	}
	_, err = s.Put(ctx, recordKey(id), bytes.NewReader(body), store.PutOptions{IfNoneMatch: true, Size: int64(len(body)), ContentType: "application/json"})
	if err != nil && !errors.Is(err, store.ErrPrecondition) {
		return nil, fmt.Errorf("job: write %s: %w", recordKey(id), err)
	}
	return Open(ctx, ds, id)
}

// Open opens job id, begun before, for its tasks or its commit. It returns
// ErrNoJob if the job has no record.
func Open(ctx context.Context, ds *commit.Dataset, id string) (*Job, error) {
	if err := ValidID("job", id); err != nil {
		return nil, err
	}
	s := ds.Store()
	r, attrs, err := readRecord(ctx, s, id)
	if err != nil {
		return nil, err
	}
	// Without a Last-Modified in the store's clock, the staging start
	// could not be held against the collector's horizon.
	if attrs.LastModified.IsZero() {
		return nil, fmt.Errorf("job: %s has no Last-Modified: the job's staging start cannot be told", recordKey(id))
	}
	return &Job{ds: ds, s: s, id: id, instance: r.Instance, start: attrs.LastModified.UTC(), opts: Options{Fence: r.Fence, FenceLease: r.FenceLease}}, nil
}

func readRecord(ctx context.Context, s store.Store, id string) (*record, store.Attrs, error) {
	b, attrs, err := getSmall(ctx, s, recordKey(id))
	if errors.Is(err, store.ErrNotExist) {
		return nil, attrs, fmt.Errorf("%w: %s: %s is missing", ErrNoJob, id, recordKey(id))
	}
	if err != nil {
		return nil, attrs, err
	}
	var r record
	if err := strictjson.Decode(b, []int{1}, &r); err != nil {
		return nil, attrs, fmt.Errorf("%w: %s: %v", ErrCorrupt, recordKey(id), err)
	}
	if r.Job != id {
		return nil, attrs, fmt.Errorf("%w: %s names job %q", ErrCorrupt, recordKey(id), r.Job)
	}
	if ValidID("instance", r.Instance) != nil {
		return nil, attrs, fmt.Errorf("%w: %s has instance %q", ErrCorrupt, recordKey(id), r.Instance)
	}
	return &r, attrs, nil
}

// maxRecord bounds the size of a record read back.
const maxRecord = 256 << 20

// getSmall reads a whole record.
func getSmall(ctx context.Context, s store.Store, key string) ([]byte, store.Attrs, error) {
	rc, attrs, err := s.Get(ctx, key)
	if err != nil {
		return nil, attrs, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxRecord+1))
	if err != nil {
		return nil, attrs, fmt.Errorf("job: read %s: %w", key, err)
	}
	if len(b) > maxRecord {
		return nil, attrs, fmt.Errorf("%w: %s is over %d bytes", ErrCorrupt, key, maxRecord)
	}
	return b, attrs, nil
}

func putJSON(ctx context.Context, s store.Store, key string, v any, opts store.PutOptions) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	opts.Size, opts.ContentType = int64(len(body)), "application/json"
	if _, err := s.Put(ctx, key, bytes.NewReader(body), opts); err != nil {
		return fmt.Errorf("job: write %s: %w", key, err)
	}
	return nil
}
