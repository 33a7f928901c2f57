package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/job"
)

// A job operation of a rebase run: job.Begin on a fresh job id, two or
// three tasks, one of which sometimes runs two attempts at once, each
// attempt staging "j/<job>/<task>" holding the names of its job, task and
// attempt, then Job.Commit, which keeps the base's files. The job commit
// is a compare-and-swap from its parent to its generation; that generation
// must hold exactly its parent's files plus, for each task, the file of
// the attempt whose Task.Commit returned nil, never a losing attempt's.

// jobAttempt is one attempt of a task of a job operation.
type jobAttempt struct {
	id, gen string // attempt id, and the generation it staged under
	content string // what it staged at its task's path
	// res: resOK (its Task.Commit returned nil: it won the task),
	// resLost (ErrTaskLost), resUnknown, or resAborted (it never wrote
	// its task record).
	res string
	// winner is the attempt its TaskLostError named, when it lost.
	winner string
}

// jobCommitAttempts bounds the compare-and-swaps of a job commit: it does
// not rebase, so under the run's contention it often loses, and a lost job
// commit is an outcome to check too.
const jobCommitAttempts = 3

// jobRec is one job operation.
type jobRec struct {
	id, instance string
	client       int
	tasks        map[string][]*jobAttempt // task id → its attempts
	// call and ret bound the Job.Commit call.
	call, ret int64
	// res is the job commit's outcome; gen and seq name the generation
	// that committed the job when res is resOK.
	res string
	gen string
	seq uint64
	// recorded: the commit's CAS is in the history already, from the
	// pointer Commit returned; otherwise verify records it from the chain.
	recorded bool
}

// jobStats counts the job operations of a run.
type jobStats struct {
	ok, lost, unknown, aborted, beginFails atomic.Int64
	// Task attempts, by outcome; raced counts the tasks run as two
	// attempts at once.
	taskWon, taskLost, taskUnknown, taskAborted, raced atomic.Int64
	// checked counts the job generations of the final chain whose files
	// were checked, losersChecked those among them with a task that had
	// a losing attempt, and appliedUnknown the unknown job commits found
	// in the chain.
	checked, losersChecked, appliedUnknown atomic.Int64
}

func (s *jobStats) String() string {
	return fmt.Sprintf("jobs: ok=%d lost=%d unknown=%d (applied %d) aborted=%d (begin failed %d); task attempts: won=%d lost=%d unknown=%d aborted=%d, %d tasks raced; %d job generations checked, %d with a loser",
		s.ok.Load(), s.lost.Load(), s.unknown.Load(), s.appliedUnknown.Load(), s.aborted.Load(), s.beginFails.Load(),
		s.taskWon.Load(), s.taskLost.Load(), s.taskUnknown.Load(), s.taskAborted.Load(), s.raced.Load(), s.checked.Load(), s.losersChecked.Load())
}

// jobPath is the path task of job id stages.
func jobPath(id, task string) string { return "j/" + id + "/" + task }

// commitJob runs one job operation and records its commit.
func (r *linRun) commitJob(ctx context.Context, client int, rnd *rand.Rand) {
	id := fmt.Sprintf("lin-%d-%d", client, r.jobSeq.Add(1))
	j, err := job.Begin(ctx, r.d, id, job.Options{})
	if err != nil {
		r.jstats.beginFails.Add(1)
		r.jstats.aborted.Add(1)
		return
	}
	jr := &jobRec{id: id, instance: j.Instance(), client: client, tasks: map[string][]*jobAttempt{}, res: resAborted}
	ntasks, raced := 2+rnd.IntN(2), -1
	if rnd.IntN(2) == 0 {
		raced = rnd.IntN(ntasks)
	}
	for k := range ntasks {
		task := fmt.Sprintf("t%d", k)
		n := 1
		if k == raced {
			n = 2
			r.jstats.raced.Add(1)
		}
		for a := range n {
			jr.tasks[task] = append(jr.tasks[task], &jobAttempt{id: fmt.Sprintf("a%d", a), res: resAborted})
		}
	}
	r.mu.Lock()
	r.jobs[id] = jr
	r.mu.Unlock()

	// Every attempt of every task at once: two attempts of one task race
	// for its record.
	var wg sync.WaitGroup
	for task, attempts := range jr.tasks {
		for _, at := range attempts {
			wg.Go(func() { r.runAttempt(ctx, j, task, at) })
		}
	}
	wg.Wait()
	for task, attempts := range jr.tasks {
		var won []string
		for _, at := range attempts {
			if at.res == resOK {
				won = append(won, at.id)
			}
		}
		if len(won) > 1 {
			r.violation("job %s task %s: attempts %v all committed the task", id, task, won)
		}
	}

	jr.call = r.rec.now()
	res, err := j.Commit(ctx, job.CommitOptions{Message: "lin job", MaxAttempts: jobCommitAttempts})
	jr.ret = r.rec.now()
	meta := "job " + id
	switch {
	case res != nil && res.Generation != "":
		// Committed; an error too is about removing the job's records.
		if err != nil {
			r.t.Logf("job %s committed as %s, then: %v", id, res.Generation, err)
		}
		r.jstats.ok.Add(1)
		r.mu.Lock()
		jr.res, jr.gen, jr.seq = resOK, res.Generation, res.Seq
		if prev, ok := r.results[res.Generation]; ok {
			r.violation("job %s committed generation %s, which another commit returned too (%s)", id, res.Generation, prev)
		}
		r.results[res.Generation] = resOK
		r.mu.Unlock()
		if p := res.Pointer; p != nil {
			if p.Generation != res.Generation || p.Seq != res.Seq || p.Meta[job.MetaKey] != id {
				r.violation("job %s: Commit returned generation %d:%s and pointer %d:%s naming job %q", id, res.Seq, res.Generation, p.Seq, p.Generation, p.Meta[job.MetaKey])
			}
			in := linInput{Kind: opCommit, From: reg{Seq: p.Seq - 1, Gen: p.Parent}, Gen: p.Generation}
			r.rec.add(client, in, linOutput{Result: resOK}, jr.call, jr.ret, meta)
			jr.recorded = true
		}
		return
	case err == nil:
		r.violation("job %s: Commit returned neither an error nor a generation", id)
		return
	}
	out := outcomeOf(err)
	switch out {
	case resUnknown:
		r.jstats.unknown.Add(1)
		r.unknownAlsoLost(err)
	case resLost:
		r.jstats.lost.Add(1)
	default:
		r.jstats.aborted.Add(1)
	}
	if out == resUnknown || out == resAborted {
		r.t.Logf("%s job commit: %v", out, err)
	}
	r.mu.Lock()
	jr.res = out
	r.mu.Unlock()
}

// runAttempt runs one attempt of task: it stages the task's file, holding
// the names of the job, the task and the attempt, and commits the task.
func (r *linRun) runAttempt(ctx context.Context, j *job.Job, task string, at *jobAttempt) {
	t, err := j.Task(task, at.id, "lin")
	if err != nil {
		r.jstats.taskAborted.Add(1)
		return
	}
	content := j.ID() + "/" + task + "/" + at.id
	// Readers of a job generation look attempts up while others run.
	r.mu.Lock()
	at.gen, at.content = t.Generation(), content
	r.mu.Unlock()
	if err := t.Tx().PutBytes(ctx, jobPath(j.ID(), task), []byte(content)); err != nil {
		t.Discard(context.WithoutCancel(ctx))
		r.jstats.taskAborted.Add(1)
		return
	}
	_, err = t.Commit(ctx)
	res, winner := resAborted, ""
	defer func() {
		r.mu.Lock()
		at.res, at.winner = res, winner
		r.mu.Unlock()
	}()
	var lost *job.TaskLostError
	switch {
	case err == nil:
		res = resOK
		r.jstats.taskWon.Add(1)
	case errors.As(err, &lost):
		res, winner = resLost, lost.Winner
		r.jstats.taskLost.Add(1)
		if lost.Winner == at.id || lost.Task != task {
			r.violation("job %s task %s attempt %s lost, to attempt %s of task %s", j.ID(), task, at.id, lost.Winner, lost.Task)
		}
	case errors.Is(err, commit.ErrCommitUnknown):
		res = resUnknown
		r.jstats.taskUnknown.Add(1)
		r.t.Logf("unknown task commit: %v", err)
	default:
		r.jstats.taskAborted.Add(1)
		r.t.Logf("aborted task commit: %v", err)
	}
}

// attemptOf returns the attempt of a job operation that staged the object
// key, or nil.
func (r *linRun) attemptOf(id, task, key string) *jobAttempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	jr := r.jobs[id]
	if jr == nil {
		return nil
	}
	gen := generation.FromKey(key)
	for _, at := range jr.tasks[task] {
		if at.gen != "" && at.gen == gen {
			return at
		}
	}
	return nil
}

// checkJobFile checks a file at a job's path read from a generation: it
// must hold what the attempt that staged its object wrote.
func (r *linRun) checkJobFile(where string, e generation.Entry, b []byte) {
	rest, _ := strings.CutPrefix(e.Path, "j/")
	id, task, _ := strings.Cut(rest, "/")
	at := r.attemptOf(id, task, e.Key)
	switch {
	case at == nil:
		r.violation("%s: %s (key %s) is no attempt of job %s task %s", where, e.Path, e.Key, id, task)
	case string(b) != at.content:
		r.violation("%s holds %q at %s, want attempt %s's %q", where, b, e.Path, at.id, at.content)
	}
}

// checkJob verifies that the job generation m holds exactly its parent's
// files plus one file per task of its job: the winning attempt's, when a
// Task.Commit returned nil or a losing attempt named the winner; else,
// when some attempt's outcome is unknown, that attempt's or none; else
// none. A losing attempt's is never there.
func (r *linRun) checkJob(m, parent *generation.Manifest) {
	id := m.Meta[job.MetaKey]
	r.mu.Lock()
	jr := r.jobs[id]
	r.mu.Unlock()
	if jr == nil {
		r.violation("generation %s (seq %d) names job %s, which no operation ran", m.Generation, m.Seq, id)
		r.unionBad.Add(1)
		return
	}
	bad := false
	if m.Meta[job.InstanceMetaKey] != jr.instance || m.Meta["own"] != "" || len(m.Carried) > 0 {
		bad = true
		r.violation("job generation %s (seq %d, job %s): instance %q (want %q), own %q, carrying %d", m.Generation, m.Seq, id, m.Meta[job.InstanceMetaKey], jr.instance, m.Meta["own"], len(m.Carried))
	}
	want, got := map[string]string{}, map[string]string{}
	if parent != nil {
		for _, e := range parent.Entries {
			want[e.Path] = e.Key
		}
	}
	for _, e := range m.Entries {
		got[e.Path] = e.Key
	}
	lost := false
	for task, attempts := range jr.tasks {
		path := jobPath(id, task)
		for _, at := range attempts {
			switch at.res {
			case resOK:
				want[path] = generation.DataKey(at.gen, path)
			case resUnknown:
				if _, ok := want[path]; !ok && got[path] == generation.DataKey(at.gen, path) {
					want[path] = got[path]
				}
			case resLost:
				lost = true
				// The winner's record was there before the job commit.
				w := attemptByID(attempts, at.winner)
				switch {
				case w == nil || w.res == resLost || w.res == resAborted:
					bad = true
					r.violation("job %s task %s: attempt %s lost to attempt %s, which did not win", id, task, at.id, at.winner)
				default:
					want[path] = generation.DataKey(w.gen, path)
				}
			}
		}
	}
	if !maps.Equal(got, want) {
		bad = true
		r.violation("job generation %s (seq %d, job %s) is not its parent's files plus its winning attempts': %s", m.Generation, m.Seq, id, filesDiff(got, want))
	}
	if bad {
		r.unionBad.Add(1)
	}
	r.jstats.checked.Add(1)
	if lost {
		r.jstats.losersChecked.Add(1)
	}
}

// attemptByID returns the attempt of attempts named id, or nil.
func attemptByID(attempts []*jobAttempt, id string) *jobAttempt {
	for _, at := range attempts {
		if at.id == id {
			return at
		}
	}
	return nil
}

// filesDiff describes how got (path → key) differs from want.
func filesDiff(got, want map[string]string) string {
	var diff []string
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if got[p] != want[p] {
			diff = append(diff, fmt.Sprintf("%s: has %q, want %q", p, got[p], want[p]))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			diff = append(diff, fmt.Sprintf("%s: has %q, want none", p, got[p]))
		}
	}
	return strings.Join(diff, "; ")
}

// verifyJobs checks the job operations against the chain ms: a job whose
// Commit succeeded committed exactly one generation, the one it returned;
// an unknown one at most one; a lost or aborted one none. It records in
// the history the job commits whose CAS is not there yet: a successful
// one that returned no pointer, and an unknown one found in the chain,
// each as a CAS from the generation's parent (an unknown job commit that
// is not in the chain never became the pointer's value).
func (r *linRun) verifyJobs(ms []*generation.Manifest) {
	at := map[string][]*generation.Manifest{}
	for _, m := range ms {
		if id := m.Meta[job.MetaKey]; id != "" {
			at[id] = append(at[id], m)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, jr := range r.jobs {
		gens := at[id]
		var where []string
		for _, m := range gens {
			where = append(where, fmt.Sprintf("%d:%s", m.Seq, m.Generation))
		}
		switch {
		case len(gens) > 1:
			r.violation("I2: job %s (%s) committed %d times: %v", id, jr.res, len(gens), where)
			continue
		case jr.res == resOK && len(gens) == 0:
			r.violation("I2: job %s committed %d:%s, its Commit says, but no generation of the chain names it", id, jr.seq, jr.gen)
			continue
		case jr.res == resOK && (gens[0].Generation != jr.gen || gens[0].Seq != jr.seq):
			r.violation("I2: job %s committed %d:%s, its Commit says, but the chain has it in %v", id, jr.seq, jr.gen, where)
			continue
		case (jr.res == resLost || jr.res == resAborted) && len(gens) > 0:
			r.violation("I2: job %s reported %s but is in the history: %v", id, jr.res, where)
			continue
		case len(gens) == 0 || jr.recorded:
			continue
		}
		m := gens[0]
		if jr.res == resUnknown {
			r.results[m.Generation] = resUnknown
			r.jstats.appliedUnknown.Add(1)
		}
		in := linInput{Kind: opCommit, From: reg{Seq: m.Seq - 1, Gen: m.Parent}, Gen: m.Generation}
		r.rec.add(jr.client, in, linOutput{Result: jr.res}, jr.call, jr.ret, "job "+id+", from the chain")
	}
	for id, gens := range at {
		if _, ok := r.jobs[id]; !ok {
			r.violation("I2: generation %s names job %s, which no operation ran", gens[0].Generation, id)
		}
	}
}

// TestLinearizableJobs: the rebase run with one operation in eight a job
// (commitJob). Each job commit is a compare-and-swap in the history, from
// its generation's parent; each job generation of the final chain must
// hold exactly its parent's files plus its winning attempts', every job
// whose Commit succeeded must be in the chain once, an unknown one at
// most once, a lost or aborted one never.
func TestLinearizableJobs(t *testing.T) {
	var total, ok, lost, checked, losers atomic.Int64
	for _, driver := range drivers() {
		t.Run(driver, func(t *testing.T) {
			plan := linPlanFor(driver)
			// A job commit does not rebase: every compare-and-swap it loses
			// costs a new reuse proof, a HEAD per file so far. Long runs
			// are more runs, as in TestLinearizableRebase; the short form
			// is one run of half as many operations.
			plan.ops = min(plan.ops, 500)
			if driver != "mem" && driver != "fs" {
				plan.ops = min(plan.ops, 250)
			}
			if !long() {
				plan.runs, plan.ops = 1, plan.ops/2
			}
			for i := range plan.runs {
				r := rebaseRun(t, driver, "linjob", seed(t, 3000)+uint64(i), plan, true)
				total.Add(r.stats.ops.Load())
				ok.Add(r.jstats.ok.Load())
				lost.Add(r.jstats.taskLost.Load())
				checked.Add(r.jstats.checked.Load())
				losers.Add(r.jstats.losersChecked.Load())
			}
		})
	}
	require.Positive(t, ok.Load(), "no job commit succeeded")
	require.Positive(t, lost.Load(), "no task attempt lost its task")
	require.Positive(t, checked.Load(), "no job generation of a final chain was checked")
	require.Positive(t, losers.Load(), "no job generation with a losing task attempt was checked")
	t.Logf("%d operations checked; %d job commits succeeded; %d task attempts lost; %d job generations checked, %d of them with a losing attempt",
		total.Load(), ok.Load(), lost.Load(), checked.Load(), losers.Load())
}
