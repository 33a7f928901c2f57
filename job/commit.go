package job

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/internal/strictjson"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// Commit record states.
const (
	stateCommitting = "committing"
	stateCommitted  = "committed"
	stateAborted    = "aborted"
)

// commitRecord is the body of _job/<job>/commit.
type commitRecord struct {
	Format int    `json:"format"`
	Job    string `json:"job"`
	State  string `json:"state"`
	// Instance is the job instance that committed or is committing; an
	// abort's record, written before it reads the job record, has none.
	Instance string `json:"instance,omitempty"`
	// BaseSeq is the seq of the pointer the first commit attempt read
	// ("committing"): a generation that committed the job has a higher seq.
	BaseSeq    uint64 `json:"base_seq,omitempty"`
	Generation string `json:"generation,omitempty"`
	Seq        uint64 `json:"seq,omitempty"`
}

// foreign reports whether c is the commit record of another instance of
// the job than j's. An abort's record belongs to every instance.
func (j *Job) foreign(c *commitRecord) bool {
	return c.Instance != "" && c.Instance != j.instance
}

func (c *commitRecord) finished(id string) error {
	switch c.State {
	case stateCommitted:
		return fmt.Errorf("%w: job %s is generation %s (seq %d)", ErrCommitted, id, c.Generation, c.Seq)
	case stateAborted:
		return fmt.Errorf("%w: job %s", ErrAborted, id)
	}
	return fmt.Errorf("%w: job %s is being committed", ErrCommitted, id)
}

func readCommit(ctx context.Context, s store.Store, id string) (*commitRecord, store.Attrs, error) {
	b, attrs, err := getSmall(ctx, s, commitKey(id))
	if err != nil {
		return nil, attrs, err
	}
	var c commitRecord
	if err := strictjson.Decode(b, []int{1}, &c); err != nil {
		return nil, attrs, fmt.Errorf("%w: %s: %v", ErrCorrupt, commitKey(id), err)
	}
	ok := c.Job == id
	switch c.State {
	case stateCommitting:
		ok = ok && ValidID("instance", c.Instance) == nil
	case stateCommitted:
		ok = ok && ValidID("instance", c.Instance) == nil && generation.Valid(c.Generation) == nil && c.Seq > 0
	case stateAborted:
	default:
		ok = false
	}
	if !ok {
		return nil, attrs, fmt.Errorf("%w: %s: bad job, state, generation or seq", ErrCorrupt, commitKey(id))
	}
	return &c, attrs, nil
}

// CommitOptions say how a job's files become a generation.
type CommitOptions struct {
	// ExpectTasks, when not 0, is the number of tasks that must be
	// committed; ExpectTaskIDs, when not empty, the exact set of task ids.
	ExpectTasks   int
	ExpectTaskIDs []string
	// Into, a prefix ending in "/", replaces that subtree of the current
	// generation with the job's files, placed below it (as `put --into`).
	// Replace publishes the job's files as the whole tree. With neither,
	// the job's files are added to the current generation's, replacing
	// files at the same paths.
	Into    string
	Replace bool
	// MaxAttempts bounds the commits tried when another writer's commit
	// lands first; 0 means 10.
	MaxAttempts int
	Message     string
	Meta        map[string]string
}

// Result is what Commit did.
type Result struct {
	Pointer *pointer.Pointer // the value that committed the job; nil when Recovered
	// Generation and Seq name the generation that committed the job.
	Generation string
	Seq        uint64
	Tasks      int
	Files      int
	// Recovered is set when the job had been committed before this call,
	// by an earlier Commit of it: nothing was committed again.
	Recovered bool
}

// listing is what one LIST of a job's records shows.
type listing struct {
	record, commit bool
	// tasks are the task ids of the instance listed for.
	tasks []string
	// taskKeys are the keys of every task record, of any instance.
	taskKeys []string
}

func (j *Job) list(ctx context.Context) (listing, error) {
	return listJob(ctx, j.s, j.id, j.instance)
}

// listJob lists job id's records; tasks are those of instance.
func listJob(ctx context.Context, s store.Store, id, instance string) (listing, error) {
	var l listing
	mine := taskDir(id, instance)
	for o, err := range store.List(ctx, s, Prefix(id), "", "") {
		if err != nil {
			return l, fmt.Errorf("job: list %s: %w", Prefix(id), err)
		}
		switch {
		case o.Key == recordKey(id):
			l.record = true
		case o.Key == commitKey(id):
			l.commit = true
		case strings.HasPrefix(o.Key, tasksDir(id)):
			l.taskKeys = append(l.taskKeys, o.Key)
			if t, ok := strings.CutPrefix(o.Key, mine); ok && ValidID("task", t) == nil {
				l.tasks = append(l.tasks, t)
			}
		}
	}
	return l, nil
}

// readTasks GETs the task records in parallel.
func (j *Job) readTasks(ctx context.Context, ids []string) ([]*TaskRecord, error) {
	recs := make([]*TaskRecord, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, id := range ids {
		g.Go(func() error {
			r, err := readTask(gctx, j.s, j.id, j.instance, id)
			if err != nil {
				return fmt.Errorf("job: task record %s: %w", taskKey(j.id, j.instance, id), err)
			}
			recs[i] = r
			return nil
		})
	}
	return recs, g.Wait()
}

// Tasks returns the records of the tasks committed so far, sorted by task.
func (j *Job) Tasks(ctx context.Context) ([]*TaskRecord, error) {
	l, err := j.list(ctx)
	if err != nil {
		return nil, err
	}
	return j.readTasks(ctx, l.tasks)
}

// State returns the job's commit state: "open" (no commit tried),
// "committing", "committed" or "aborted", and for "committed" the
// generation and seq.
func State(ctx context.Context, s store.Store, id string) (state, gen string, seq uint64, err error) {
	c, _, err := readCommit(ctx, s, id)
	if errors.Is(err, store.ErrNotExist) {
		return "open", "", 0, nil
	}
	if err != nil {
		return "", "", 0, err
	}
	return c.State, c.Generation, c.Seq, nil
}

// Commit publishes the winning attempts of every task committed so far as
// one generation, with one pointer compare-and-swap. It LISTs the job's
// records once (one page per 1,000 tasks), GETs the task records in
// parallel, checks them against ExpectTasks and ExpectTaskIDs, and fails
// with ErrTasks before writing anything when they differ, when no task
// committed, or when two tasks staged one path.
//
// Before its first pointer write, Commit creates the job's commit record
// ("committing", with the seq of the pointer it read). A Commit that finds
// that record, from an earlier Commit that crashed or whose outcome was
// unknown, first walks the history from the current pointer down to that
// seq: a generation whose meta names the job committed it, and Commit
// returns it with Recovered set and commits nothing. It does the same
// after every compare-and-swap it loses before trying again on the new
// head, so an earlier attempt whose write lands late is found, never
// doubled. After the commit it records the generation, then deletes the
// job record and the task records (the data objects stay: the generation
// references them). Commit of a job committed before returns that
// generation.
//
// An outcome that cannot be proven returns an error matching
// commit.ErrCommitUnknown; Commit can be called again to settle it.
func (j *Job) Commit(ctx context.Context, opts CommitOptions) (*Result, error) {
	if opts.Into != "" {
		if !strings.HasSuffix(opts.Into, "/") || generation.CheckPath(strings.TrimSuffix(opts.Into, "/")) != nil {
			return nil, fmt.Errorf("job: --into %q must be a valid path prefix ending in /", opts.Into)
		}
		if opts.Replace {
			return nil, fmt.Errorf("job: Into and Replace exclude each other")
		}
	}
	for _, k := range []string{MetaKey, InstanceMetaKey} {
		if _, ok := opts.Meta[k]; ok {
			return nil, fmt.Errorf("job: meta key %q is reserved", k)
		}
	}
	l, err := j.list(ctx)
	if err != nil {
		return nil, err
	}
	var prior *commitRecord
	if l.commit {
		c, _, err := readCommit(ctx, j.s, j.id)
		if err != nil && !errors.Is(err, store.ErrNotExist) {
			return nil, err
		}
		switch {
		case c == nil:
		case c.State == stateCommitted && j.foreign(c):
			return nil, c.finished(j.id)
		case c.State == stateCommitted:
			return j.finish(ctx, c, l, nil, true)
		case c.State == stateAborted:
			return nil, c.finished(j.id)
		case !j.foreign(c):
			prior = c
		}
	}
	if !l.record {
		return nil, fmt.Errorf("%w: %s: %s is missing", ErrNoJob, j.id, recordKey(j.id))
	}
	recs, err := j.readTasks(ctx, l.tasks)
	if err != nil {
		return nil, err
	}
	if err := checkTasks(recs, opts); err != nil {
		return nil, err
	}
	entries, err := merged(recs, opts.Into)
	if err != nil {
		return nil, err
	}
	meta := maps.Clone(opts.Meta)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[MetaKey], meta[InstanceMetaKey] = j.id, j.instance
	attempts := opts.MaxAttempts
	if attempts <= 0 {
		attempts = 10
	}
	for n := 0; ; n++ {
		tx, err := j.ds.Begin(ctx)
		if err != nil {
			return nil, err
		}
		var baseSeq uint64
		if b := tx.Base(); b != nil {
			baseSeq = b.Seq
		}
		if prior == nil {
			c := &commitRecord{Format: 1, Job: j.id, State: stateCommitting, Instance: j.instance, BaseSeq: baseSeq}
			err := putJSON(ctx, j.s, commitKey(j.id), c, store.PutOptions{IfNoneMatch: true})
			if err != nil {
				got, attrs, rerr := readCommit(ctx, j.s, j.id)
				switch {
				case rerr != nil:
					tx.Discard(ctx) //nolint:errcheck // nothing staged
					return nil, fmt.Errorf("job: %s: create the commit record: %w; read back: %w", j.id, err, rerr)
				case got.State == stateCommitted && !j.foreign(got):
					tx.Discard(ctx) //nolint:errcheck // nothing staged
					return j.finish(ctx, got, l, nil, true)
				case got.State != stateCommitting:
					tx.Discard(ctx) //nolint:errcheck // nothing staged
					return nil, got.finished(j.id)
				case j.foreign(got):
					// An earlier instance's commit record, left by a driver
					// that found the job record of this one and stopped
					// before any pointer write (or refused by the horizon
					// that dropped its instance): it is replaced.
					if err := putJSON(ctx, j.s, commitKey(j.id), c, store.PutOptions{IfMatch: attrs.ETag}); err != nil {
						tx.Discard(ctx) //nolint:errcheck // nothing staged
						return nil, fmt.Errorf("job: %s: replace the commit record of instance %s: %w", j.id, got.Instance, err)
					}
				default:
					c = got
				}
			}
			prior = c
		}
		// With the commit record in place, the job record must still be
		// this instance's: a job committed and removed since this driver
		// read its tasks, and perhaps begun again, is not committed again.
		if r, _, err := readRecord(ctx, j.s, j.id); err != nil || r.Instance != j.instance {
			tx.Discard(ctx) //nolint:errcheck // nothing staged
			if err != nil && !errors.Is(err, ErrNoJob) {
				return nil, err
			}
			// Finished since: by a commit of this instance, whose
			// record says so, or by an abort or the collector.
			if c, _, cerr := readCommit(ctx, j.s, j.id); cerr == nil && c.State == stateCommitted && !j.foreign(c) {
				return j.finish(ctx, c, l, nil, true)
			}
			return nil, fmt.Errorf("%w: %s: %s is gone or of another instance of the job, begun since this one", ErrNoJob, j.id, recordKey(j.id))
		}
		// A commit of this job may have landed since prior's base: find it
		// before committing again.
		if found, err := j.findCommitted(ctx, tx.Base(), prior.BaseSeq); err != nil || found != nil {
			tx.Discard(ctx) //nolint:errcheck // nothing staged
			if err != nil {
				return nil, err
			}
			return j.finish(ctx, found, l, nil, true)
		}
		if err := j.build(ctx, tx, entries, opts); err != nil {
			tx.Discard(ctx) //nolint:errcheck // nothing staged
			return nil, err
		}
		p, err := tx.Commit(ctx, commit.CommitOptions{Message: opts.Message, Meta: meta, Fence: j.opts.Fence, FenceLease: j.opts.FenceLease})
		if err == nil {
			c := &commitRecord{Format: 1, Job: j.id, State: stateCommitted, Instance: j.instance, BaseSeq: prior.BaseSeq, Generation: p.Generation, Seq: p.Seq}
			res, ferr := j.finish(ctx, c, l, p, false)
			res.Tasks, res.Files = len(recs), len(entries)
			return res, ferr
		}
		var lost *commit.ConflictError
		if !errors.As(err, &lost) || n+1 >= attempts {
			return nil, fmt.Errorf("job: commit %s: %w", j.id, err)
		}
		// Every pointer write of that attempt is dead; another writer's
		// commit landed. Try again on the new head.
		if err := ctxtime.Sleep(ctx, backoff(n)); err != nil {
			return nil, err
		}
	}
}

func backoff(n int) time.Duration {
	d := 20 * time.Millisecond << min(n, 6)
	return d
}

// build stages the job's generation on tx.
func (j *Job) build(ctx context.Context, tx *commit.Tx, entries []generation.Entry, opts CommitOptions) error {
	if !opts.Replace {
		if err := tx.KeepAll(ctx); err != nil {
			return err
		}
	}
	if opts.Into != "" {
		for _, e := range tx.Entries() {
			if strings.HasPrefix(e.Path, opts.Into) {
				tx.Remove(e.Path)
			}
		}
	}
	return tx.Adopt(j.start, entries)
}

// findCommitted walks the history from p down to the generation after seq
// since, and returns the commit record of the one whose meta names this
// job, or nil. A history it cannot walk that far makes the outcome
// unknown.
func (j *Job) findCommitted(ctx context.Context, p *pointer.Pointer, since uint64) (*commitRecord, error) {
	if p == nil || p.Seq <= since {
		return nil, nil
	}
	if p.Meta[MetaKey] == j.id && p.Meta[InstanceMetaKey] == j.instance {
		return &commitRecord{Format: 1, Job: j.id, State: stateCommitted, Instance: j.instance, BaseSeq: since, Generation: p.Generation, Seq: p.Seq}, nil
	}
	gen, sha := p.Generation, p.ManifestSHA256
	for {
		m, err := j.ds.ReadManifest(ctx, gen, sha)
		if err != nil {
			return nil, fmt.Errorf("%w: job %s: the history from seq %d down to %d cannot be read to tell whether an earlier commit of the job landed: %v", commit.ErrCommitUnknown, j.id, p.Seq, since+1, err)
		}
		if m.Meta[MetaKey] == j.id && m.Meta[InstanceMetaKey] == j.instance {
			return &commitRecord{Format: 1, Job: j.id, State: stateCommitted, Instance: j.instance, BaseSeq: since, Generation: m.Generation, Seq: m.Seq}, nil
		}
		if m.Seq <= since+1 || m.Parent == "" {
			return nil, nil
		}
		gen, sha = m.Parent, m.ParentManifestSHA256
	}
}

// finish records the committed generation, then removes the job record
// and the task records.
func (j *Job) finish(ctx context.Context, c *commitRecord, l listing, p *pointer.Pointer, recovered bool) (*Result, error) {
	res := &Result{Pointer: p, Generation: c.Generation, Seq: c.Seq, Recovered: recovered}
	if err := putJSON(ctx, j.s, commitKey(j.id), c, store.PutOptions{}); err != nil {
		return res, fmt.Errorf("job: %s committed as generation %s; %w", j.id, c.Generation, err)
	}
	keys := slices.Clone(l.taskKeys)
	if l.record {
		keys = append(keys, recordKey(j.id))
	}
	if len(keys) > 0 {
		if err := j.s.DeleteMany(ctx, keys); err != nil {
			return res, fmt.Errorf("job: %s committed as generation %s; remove its records: %w", j.id, c.Generation, err)
		}
	}
	return res, nil
}

func checkTasks(recs []*TaskRecord, opts CommitOptions) error {
	// A job none of whose tasks committed is a job that failed: committed
	// with Replace, it would empty the dataset.
	if len(recs) == 0 {
		return fmt.Errorf("%w: no task committed", ErrTasks)
	}
	if opts.ExpectTasks > 0 && len(recs) != opts.ExpectTasks {
		return fmt.Errorf("%w: %d tasks committed, %d expected", ErrTasks, len(recs), opts.ExpectTasks)
	}
	if len(opts.ExpectTaskIDs) > 0 {
		want := slices.Clone(opts.ExpectTaskIDs)
		slices.Sort(want)
		want = slices.Compact(want)
		have := sortedTasks(recs)
		var missing, extra []string
		for _, w := range want {
			if _, ok := slices.BinarySearch(have, w); !ok {
				missing = append(missing, w)
			}
		}
		for _, h := range have {
			if _, ok := slices.BinarySearch(want, h); !ok {
				extra = append(extra, h)
			}
		}
		if len(missing)+len(extra) > 0 {
			return fmt.Errorf("%w: missing %s; not expected %s", ErrTasks, store.KeyList(missing), store.KeyList(extra))
		}
	}
	return nil
}

// merged returns the entries of every task, below into, and fails when
// two tasks staged one path.
func merged(recs []*TaskRecord, into string) ([]generation.Entry, error) {
	owner := map[string]string{}
	var out []generation.Entry
	for _, r := range recs {
		for _, e := range r.Entries {
			e.Path = into + e.Path
			if o, ok := owner[e.Path]; ok {
				return nil, fmt.Errorf("%w: tasks %s and %s both staged %q", ErrTasks, o, r.Task, e.Path)
			}
			owner[e.Path] = r.Task
			out = append(out, e)
		}
	}
	if into != "" {
		for _, e := range out {
			if err := generation.CheckPath(e.Path); err != nil {
				return nil, fmt.Errorf("job: %q: %w", e.Path, err)
			}
		}
	}
	return out, nil
}

// Abort deletes the job: the commit record becomes "aborted" first, so
// that no Commit can start after it, and then the winning attempts'
// objects and the job's records go. A job whose Commit was started is
// aborted only once the history proves that no generation committed it;
// Abort fails with ErrCommitted if one did, and with an error matching
// commit.ErrCommitUnknown when a pointer write of that Commit may still
// land (Commit settles it; the collector removes the job after
// --orphan-age). Objects of attempts that never committed their task are
// left to the collector's orphan sweep.
//
// Abort deletes objects only for a job whose record it reads and that the
// collector's horizon has not reached. Without the record, or past the
// horizon, the job may have been committed and its commit record dropped
// since: Abort then deletes only the records, and the objects that no
// generation references are the orphan sweep's.
func (j *Job) Abort(ctx context.Context) error {
	return abort(ctx, j.ds, j.id)
}

// Abort aborts job id; see Job.Abort. It also aborts a job whose record is
// gone.
func Abort(ctx context.Context, ds *commit.Dataset, id string) error {
	if err := ValidID("job", id); err != nil {
		return err
	}
	return abort(ctx, ds, id)
}

func abort(ctx context.Context, ds *commit.Dataset, id string) error {
	s := ds.Store()
	j := &Job{ds: ds, s: s, id: id}
	c := &commitRecord{Format: 1, Job: id, State: stateAborted}
	if err := putJSON(ctx, s, commitKey(id), c, store.PutOptions{IfNoneMatch: true}); err != nil {
		got, _, rerr := readCommit(ctx, s, id)
		if rerr != nil {
			return fmt.Errorf("job: abort %s: %w; read back: %w", id, err, rerr)
		}
		switch got.State {
		case stateCommitted:
			return got.finished(id)
		case stateCommitting:
			j.instance = got.Instance
			p, _, perr := pointer.Read(ctx, s)
			if perr != nil {
				return fmt.Errorf("%w: job %s: a commit was started and the pointer cannot be read: %v", commit.ErrCommitUnknown, id, perr)
			}
			found, ferr := j.findCommitted(ctx, p, got.BaseSeq)
			if ferr != nil {
				return ferr
			}
			if found != nil {
				l, _ := j.list(ctx)
				if _, err := j.finish(ctx, found, l, nil, true); err != nil {
					return err
				}
				return found.finished(id)
			}
			return fmt.Errorf("%w: job %s: a commit was started, and none of its pointer writes is proven dead; run commit to settle it, or let the collector remove the job after --orphan-age", commit.ErrCommitUnknown, id)
		}
	}
	live, err := j.abortable(ctx)
	if err != nil {
		return err
	}
	l, err := j.list(ctx)
	if err != nil {
		return err
	}
	if live {
		if err := j.deleteObjects(ctx, l.tasks); err != nil {
			return err
		}
	}
	keys := slices.Clone(l.taskKeys)
	if l.record {
		keys = append(keys, recordKey(id))
	}
	if len(keys) > 0 {
		if err := s.DeleteMany(ctx, keys); err != nil {
			return fmt.Errorf("job: abort %s: delete records: %w", id, err)
		}
	}
	return nil
}

// abortable reports whether the job's objects may be deleted by an abort
// whose "aborted" record is in place: see live. j, which has no instance
// yet, takes that of the record read.
func (j *Job) abortable(ctx context.Context) (bool, error) {
	instance, ok, err := j.live(ctx)
	if err != nil {
		return false, fmt.Errorf("job: abort %s: %w", j.id, err)
	}
	j.instance = instance
	return ok, nil
}

// uncommitted reports, for an attempt whose task record was replaced,
// whether no commit can have published the record it replaced: the job
// has no commit record, and live. A task record leaves its key only by a
// commit (after its "committed" record), an abort (after its "aborted"
// record) or the collector (past the horizon); and the collector drops a
// commit record only past the horizon or once the job record is gone.
func (j *Job) uncommitted(ctx context.Context) (bool, error) {
	if _, _, err := readCommit(ctx, j.s, j.id); !errors.Is(err, store.ErrNotExist) {
		return false, err
	}
	_, ok, err := j.live(ctx)
	return ok, err
}

// live reads the job's record and then the pointer. It returns the
// record's instance, and reports whether the record is there, of j's
// instance (any, if j has none), and the collector's horizon is before
// its staging start: no collection has dropped any of the instance's
// records.
func (j *Job) live(ctx context.Context) (string, bool, error) {
	r, attrs, err := readRecord(ctx, j.s, j.id)
	if errors.Is(err, ErrNoJob) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if j.instance != "" && r.Instance != j.instance {
		return "", false, nil
	}
	p, _, err := pointer.Read(ctx, j.s)
	switch {
	case errors.Is(err, store.ErrNotExist):
	case err != nil:
		return "", false, fmt.Errorf("read the pointer for the collector's horizon: %w", err)
	case !p.GCHorizon.IsZero() && !p.GCHorizon.Before(attrs.LastModified):
		return "", false, nil
	}
	return r.Instance, true, nil
}

// deleteObjects deletes the objects named by the task records of tasks, of
// j's instance. A record that cannot be read names nothing to delete.
func (j *Job) deleteObjects(ctx context.Context, tasks []string) error {
	var mu sync.Mutex
	var keys []string
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, t := range tasks {
		g.Go(func() error {
			r, err := readTask(gctx, j.s, j.id, j.instance, t)
			if err != nil {
				return nil // the orphan sweep removes what it names
			}
			mu.Lock()
			for _, e := range r.Entries {
				keys = append(keys, e.Key)
			}
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if len(keys) > 0 {
		if err := j.s.DeleteMany(ctx, keys); err != nil {
			return fmt.Errorf("job: abort %s: delete objects: %w", j.id, err)
		}
	}
	return nil
}
