package gc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/job"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// hourly are collector options with a one-hour orphan age, for tests on a
// store clock moved by hand.
func hourly() gc.Options {
	return gc.Options{Keep: 1, Grace: -1, OrphanAge: time.Hour, LeaseTTL: time.Minute, Owner: "test"}
}

// An attempt that opened a job before the collector dropped it, and
// commits its task after, is never published by the job begun again under
// the same id (a driver restarted with Begin): its objects precede the new
// job's staging start, so the horizon does not protect them, and the
// collector deletes them as orphans. I1: the pointer never names a
// generation with a missing object.
func TestTaskOfAJobDroppedByTheCollectorIsNeverPublishedByTheJobBegunAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		// staleFirst: the straggler stages before the collector drops the
		// job (its objects go in that run); otherwise after it, and a later
		// run deletes them.
		staleFirst bool
	}{{"objects staged before the drop", true}, {"objects staged after the drop", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clock := newStoreClock()
			s := memStore(clock.Now)
			d := dataset(s)
			publish(t, d, false, files(1, "base"))
			old, err := job.Begin(ctx, d, "j", job.Options{})
			require.NoError(t, err)
			straggler, err := old.Task("t", "a1", "test")
			require.NoError(t, err)
			if tc.staleFirst {
				require.NoError(t, straggler.Tx().PutBytes(ctx, "x", []byte("stale")))
			}
			clock.Advance(2 * time.Hour)
			rep, err := gc.Run(ctx, s, hourly())
			require.NoError(t, err)
			require.Equal(t, 1, rep.JobsDropped, "the job outlived the orphan age")
			if !tc.staleFirst {
				require.NoError(t, straggler.Tx().PutBytes(ctx, "x", []byte("stale")))
			}
			// The straggler commits its task into a job that has no record.
			_, err = straggler.Commit(ctx)
			require.NoError(t, err)

			// The driver is restarted and begins the job again.
			clock.Advance(time.Minute)
			j, err := job.Begin(ctx, d, "j", job.Options{})
			require.NoError(t, err)
			if !tc.staleFirst {
				// A run past the straggler's objects, not past the new
				// job's start.
				clock.Advance(time.Hour)
				_, err = gc.Run(ctx, s, hourly())
				require.NoError(t, err)
			}
			require.Empty(t, keysUnder(t, s, generation.Prefix(straggler.Generation())), "the collector deleted the straggler's objects as orphans")
			require.NotEqual(t, old.Instance(), j.Instance())
			_, err = j.Commit(ctx, job.CommitOptions{})
			require.ErrorIs(t, err, job.ErrTasks, "the straggler's record is of the earlier instance")
			requireComplete(t, d)
		})
	}
}

// An attempt that lost its task and deleted its objects, and whose task
// record write was held in the network and lands after the job committed
// (its records gone), is never published, not even by the job begun again
// once the collector dropped its commit record: the lost attempt deleted
// the objects that record names.
func TestLateTaskRecordOfALostAttemptIsNeverPublished(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	fs := faults.NewStore(s)
	d := dataset(fs)
	publish(t, d, false, files(1, "base"))
	j, err := job.Begin(ctx, d, "j", job.Options{})
	require.NoError(t, err)

	loser, err := j.Task("t", "a1", "test")
	require.NoError(t, err)
	require.NoError(t, loser.Tx().PutBytes(ctx, "x", []byte("loser")))
	winner, err := j.Task("t", "a2", "test")
	require.NoError(t, err)
	require.NoError(t, winner.Tx().PutBytes(ctx, "x", []byte("winner")))
	// The loser's record write is held in the network; the winner's lands
	// meanwhile, and the loser reads it back.
	fs.Add(faults.Rule{Op: store.OpPut, Key: job.Prefix("j") + "task/", Kind: faults.Late, Times: 1, Then: func() {
		_, err := winner.Commit(ctx)
		require.NoError(t, err)
	}})
	_, err = loser.Commit(ctx)
	require.ErrorIs(t, err, job.ErrTaskLost)
	require.Empty(t, keysUnder(t, s, generation.Prefix(loser.Generation())), "the loser deleted its objects")

	res, err := j.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
	require.NoError(t, err)
	clock.Advance(30 * time.Minute)
	require.NoError(t, fs.Release(), "the held write lands on the task record the commit removed")

	requireComplete(t, d)
	assert.Equal(t, res.Generation, currentGen(t, s))

	// The collector drops the commit record, older than the orphan age,
	// and keeps the late task record, younger.
	clock.Advance(45 * time.Minute)
	_, err = gc.Run(ctx, s, hourly())
	require.NoError(t, err)
	require.Equal(t, map[string]bool{j.TaskKey("t"): true}, keysUnder(t, s, job.Dir), "the late record is younger than the orphan age")
	j2, err := job.Begin(ctx, d, "j", job.Options{})
	require.NoError(t, err)
	_, err = j2.Commit(ctx, job.CommitOptions{})
	require.ErrorIs(t, err, job.ErrTasks, "the late record is of the earlier instance")
	requireComplete(t, d)
	assert.Equal(t, res.Generation, currentGen(t, s))
}

func currentGen(t *testing.T, s store.Store) string {
	t.Helper()
	p, _, err := pointer.Read(context.Background(), s)
	require.NoError(t, err)
	return p.Generation
}

// A job's commit whose pointer write is held in the network while the
// collector, the job past the orphan age, publishes its horizon, deletes
// the tasks' objects and drops the job, is refused when its write fails:
// the horizon reached the job's staging start.
func TestJobCommitHeldWhileTheCollectorDropsTheJobIsRefused(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	d := dataset(s)
	publish(t, d, false, files(1, "base"))
	_, taskGen := runJobTask(t, d, "j", "t")
	clock.Advance(2 * time.Hour)
	fs := faults.NewStore(s)
	j, err := job.Open(ctx, dataset(fs), "j")
	require.NoError(t, err)
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		rep, err := gc.Run(ctx, s, hourly())
		require.NoError(t, err)
		require.Equal(t, 1, rep.JobsDropped)
		require.Empty(t, keysUnder(t, s, generation.Prefix(taskGen)), "the task's objects are orphans to the collector")
	}})
	_, err = j.Commit(ctx, job.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrStale)
	requireComplete(t, d)
	_, err = j.Commit(ctx, job.CommitOptions{})
	require.ErrorIs(t, err, job.ErrNoJob)
}

// A job inside the orphan age keeps every record and every task's object
// through a collection that runs while its commit is in flight, and the
// commit lands.
func TestCollectionDuringTheCommitOfAYoungJobKeepsIt(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	d := dataset(s)
	publish(t, d, false, files(1, "base"))
	clock.Advance(2 * time.Hour)
	_, taskGen := runJobTask(t, d, "j", "t")
	stage(t, d, 1) // an orphan, so the run publishes a horizon
	clock.Advance(2 * time.Hour)
	_, _ = runJobTask(t, d, "young", "u")
	fs := faults.NewStore(s)
	j, err := job.Open(ctx, dataset(fs), "young")
	require.NoError(t, err)
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		rep, err := gc.Run(ctx, s, hourly())
		require.NoError(t, err)
		require.Equal(t, 1, rep.JobsDropped, "the old job goes")
	}})
	res, err := j.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
	require.NoError(t, err)
	assert.False(t, res.Recovered)
	requireComplete(t, d)
	assert.Empty(t, keysUnder(t, s, generation.Prefix(taskGen)))
	assert.Empty(t, keysUnder(t, s, job.Prefix("j")))
}

// The winning attempt's first task record write, held in the network while
// a resend committed the task, lands after the job committed (its task
// records gone). Once the collector dropped the commit record, older than
// the orphan age, and kept that late record, younger, an abort of the job
// must still not delete what the committed generation references.
func TestAbortAfterTheCommitRecordWasDroppedNeverDeletesCommittedObjects(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	fs := faults.NewStore(s)
	d := dataset(fs)
	publish(t, d, false, files(1, "base"))
	j, err := job.Begin(ctx, d, "j", job.Options{})
	require.NoError(t, err)
	tk, err := j.Task("t", "a1", "test")
	require.NoError(t, err)
	require.NoError(t, tk.Tx().PutBytes(ctx, "x", []byte("x")))
	fs.Add(faults.Rule{Op: store.OpPut, Key: job.Prefix("j") + "task/", Kind: faults.Late, Times: 1})
	_, err = tk.Commit(ctx)
	require.NoError(t, err, "the resend committed the task")
	_, err = j.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
	require.NoError(t, err)
	clock.Advance(30 * time.Minute)
	require.NoError(t, fs.Release(), "the held write lands on the task record the commit removed")
	clock.Advance(45 * time.Minute)
	_, err = gc.Run(ctx, s, hourly())
	require.NoError(t, err)
	require.Equal(t, map[string]bool{j.TaskKey("t"): true}, keysUnder(t, s, job.Dir), "the late record is younger than the orphan age")

	require.NoError(t, job.Abort(ctx, d, "j"))
	requireComplete(t, d)
	require.Equal(t, map[string]bool{job.Prefix("j") + job.CommitName: true}, keysUnder(t, s, job.Dir), "the abort removed the late record and left its own")
}

// With no minimum orphan age, a collection in the very instant the job's
// task committed (the store's clock has not moved) deletes the task's
// objects and publishes a horizon equal to the job's start: the job's
// commit, its pointer write held across that run, is refused.
func TestJobCommitInTheInstantOfTheCollectorsHorizonIsRefused(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	d := dataset(s)
	publish(t, d, false, files(1, "base"))
	_, taskGen := runJobTask(t, d, "j", "t")
	fs := faults.NewStore(s)
	j, err := job.Open(ctx, dataset(fs), "j")
	require.NoError(t, err)
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		rep, err := gc.Run(ctx, s, strict())
		require.NoError(t, err)
		require.Equal(t, j.StagingStart(), rep.Horizon.UTC())
		require.Empty(t, keysUnder(t, s, generation.Prefix(taskGen)))
	}})
	_, err = j.Commit(ctx, job.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrStale)
	requireComplete(t, d)
}

// failCommitted fails the write of a job's "committed" commit record: a
// driver that dies after its commit landed, before recording it.
type failCommitted struct{ store.Store }

func (f failCommitted) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return store.Attrs{}, err
	}
	if strings.HasSuffix(key, "/commit") && bytes.Contains(b, []byte(`"committed"`)) {
		return store.Attrs{}, errors.New("driver crashed")
	}
	return f.Store.Put(ctx, key, bytes.NewReader(b), opts)
}

// A job committed by a driver that died before recording it is dropped by
// the collector past the orphan age: its task records, then its commit
// record, then its job record. Wherever a run stops, an abort after it
// never deletes what the committed generation references: with the commit
// record left it finds the commit, and with only the job record left the
// horizon has passed the job's start.
func TestAbortOfAJobPartlyDroppedAfterItsCommitNeverDeletesCommittedObjects(t *testing.T) {
	const tasks = store.MaxDeleteBatch + 1 // two batches of task records
	for _, tc := range []struct {
		name string
		// stop is the first key of the batch the run fails at, given the
		// job's last task key, commit key and record key.
		stop func(last, commitKey, recordKey string) string
		left func(last, commitKey, recordKey string) map[string]bool
		// committed: the abort finds the commit and refuses.
		committed bool
	}{
		{"at the second batch of task records",
			func(last, _, _ string) string { return last },
			func(last, c, r string) map[string]bool { return map[string]bool{last: true, c: true, r: true} }, true},
		{"at the commit record",
			func(_, c, _ string) string { return c },
			func(_, c, r string) map[string]bool { return map[string]bool{c: true, r: true} }, true},
		{"at the job record",
			func(_, _, r string) string { return r },
			func(_, _, r string) map[string]bool { return map[string]bool{r: true} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			clock := newStoreClock()
			s := memStore(clock.Now)
			d := dataset(s)
			publish(t, d, false, files(1, "base"))
			j, err := job.Begin(ctx, dataset(failCommitted{s}), "j", job.Options{})
			require.NoError(t, err)
			var g errgroup.Group
			g.SetLimit(16)
			for i := range tasks {
				g.Go(func() error {
					tk, err := j.Task(fmt.Sprintf("t%04d", i), "a", "test")
					if err != nil {
						return err
					}
					if err := tk.Tx().PutBytes(ctx, fmt.Sprintf("part-%04d", i), []byte("x")); err != nil {
						return err
					}
					_, err = tk.Commit(ctx)
					return err
				})
			}
			require.NoError(t, g.Wait())
			_, err = j.Commit(ctx, job.CommitOptions{ExpectTasks: tasks})
			require.ErrorContains(t, err, "driver crashed")
			requireComplete(t, d)

			clock.Advance(2 * time.Hour)
			last, commitKey, recordKey := j.TaskKey(fmt.Sprintf("t%04d", tasks-1)), job.Prefix("j")+job.CommitName, job.Prefix("j")+job.RecordName
			fs := faults.NewStore(s)
			fs.Add(faults.Rule{Op: store.OpDeleteMany, Key: tc.stop(last, commitKey, recordKey), Kind: faults.Refused, Times: 1})
			_, err = gc.Run(ctx, fs, hourly())
			require.Error(t, err, "the run stops")
			require.Equal(t, tc.left(last, commitKey, recordKey), keysUnder(t, s, job.Dir))
			requireComplete(t, d)

			err = job.Abort(ctx, d, "j")
			if tc.committed {
				require.ErrorIs(t, err, job.ErrCommitted)
			} else {
				require.NoError(t, err)
			}
			requireComplete(t, d)
		})
	}
}

// A collection past a committed job's start that stops before its job
// record, and a held task record write of that job that lands after it,
// leave a job record and a task record without a commit record. An abort
// then must not delete the objects that record names: the horizon has
// passed the job's start, and the commit record may have been dropped.
func TestAbortOfADroppedJobWithALateTaskRecordNeverDeletesCommittedObjects(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	fs := faults.NewStore(s)
	d := dataset(fs)
	publish(t, d, false, files(1, "base"))
	j, err := job.Begin(ctx, dataset(failCommitted{fs}), "j", job.Options{})
	require.NoError(t, err)
	tk, err := j.Task("t", "a1", "test")
	require.NoError(t, err)
	require.NoError(t, tk.Tx().PutBytes(ctx, "x", []byte("x")))
	fs.Add(faults.Rule{Op: store.OpPut, Key: j.TaskKey("t"), Kind: faults.Late, Times: 1})
	_, err = tk.Commit(ctx)
	require.NoError(t, err, "the resend committed the task")
	_, err = j.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
	require.ErrorContains(t, err, "driver crashed", "the commit landed and was not recorded")
	requireComplete(t, d)

	clock.Advance(2 * time.Hour)
	recordKey := job.Prefix("j") + job.RecordName
	fs.Add(faults.Rule{Op: store.OpDeleteMany, Key: recordKey, Kind: faults.Refused, Times: 1})
	_, err = gc.Run(ctx, fs, hourly())
	require.Error(t, err, "the run stops at the job record")
	require.NoError(t, fs.Release(), "the held task record write lands")
	require.Equal(t, map[string]bool{recordKey: true, j.TaskKey("t"): true}, keysUnder(t, s, job.Dir))

	require.NoError(t, job.Abort(ctx, d, "j"))
	requireComplete(t, d)
}

// A second driver that opened the job before it committed, and commits
// after the collector dropped the finished job's commit record and the job
// was begun again under its id, must not commit its instance a second
// time: the job record it finds is the new instance's, and the task record
// it would publish is the late one of an attempt that lost and deleted its
// objects (I1). Its commit is refused, and the new instance's records are
// left alone.
func TestDriverOfAFinishedInstanceNeverCommitsItAgainOnceTheJobIsBegunAgain(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	fs := faults.NewStore(s)
	d := dataset(fs)
	publish(t, d, false, files(1, "base"))
	j, err := job.Begin(ctx, d, "j", job.Options{})
	require.NoError(t, err)
	second, err := job.Open(ctx, d, "j")
	require.NoError(t, err)

	loser, err := j.Task("t", "a1", "test")
	require.NoError(t, err)
	require.NoError(t, loser.Tx().PutBytes(ctx, "x", []byte("loser")))
	winner, err := j.Task("t", "a2", "test")
	require.NoError(t, err)
	require.NoError(t, winner.Tx().PutBytes(ctx, "x", []byte("winner")))
	fs.Add(faults.Rule{Op: store.OpPut, Key: j.TaskKey("t"), Kind: faults.Late, Times: 1, Then: func() {
		_, err := winner.Commit(ctx)
		require.NoError(t, err)
	}})
	_, err = loser.Commit(ctx)
	require.ErrorIs(t, err, job.ErrTaskLost)
	res, err := j.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
	require.NoError(t, err)
	clock.Advance(30 * time.Minute)
	require.NoError(t, fs.Release(), "the loser's held record write lands after the commit")
	clock.Advance(45 * time.Minute)
	_, err = gc.Run(ctx, s, hourly())
	require.NoError(t, err)
	require.Equal(t, map[string]bool{j.TaskKey("t"): true}, keysUnder(t, s, job.Dir), "the commit record is dropped, the late task record kept")

	again, err := job.Begin(ctx, d, "j", job.Options{})
	require.NoError(t, err)
	_, err = runTaskOf(t, again, "u")
	require.NoError(t, err)

	_, err = second.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
	assert.ErrorIs(t, err, job.ErrNoJob, "the second driver's instance is gone")
	assert.Equal(t, res.Generation, currentGen(t, s), "the first instance committed once")
	requireComplete(t, d)
	assert.True(t, keysUnder(t, s, job.Prefix("j"))[job.Prefix("j")+job.RecordName], "the new instance's record is left")
}

// runTaskOf commits one task of one file (named after the task) in j.
func runTaskOf(t *testing.T, j *job.Job, task string) (*job.TaskRecord, error) {
	t.Helper()
	ctx := context.Background()
	tk, err := j.Task(task, "a", "test")
	require.NoError(t, err)
	require.NoError(t, tk.Tx().PutBytes(ctx, task, []byte(task)))
	return tk.Commit(ctx)
}

// A job whose commit was started long ago (its "committing" record and its
// job record past the orphan age) and that a restarted driver commits
// while a collection runs, between the collection's listing of the jobs
// and its horizon CAS, is committed now: its "committed" record is new.
// The collection, planning again once the commit beat its CAS, must not
// drop that record on the strength of its earlier listing: without it, a
// driver that runs commit again is told there is no job, and the job is
// begun again under its id and commits a second time.
func TestCollectionThatListedAJobBeforeItCommittedKeepsItsNewCommitRecord(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	d := dataset(s)
	publish(t, d, false, files(1, "base"))
	j0, _ := runJobTask(t, d, "j", "t")
	// A driver created the commit record and died before its pointer
	// write.
	_, err := s.Put(ctx, job.Prefix("j")+job.CommitName, strings.NewReader(`{"format":1,"job":"j","state":"committing","instance":"`+j0.Instance()+`","base_seq":1}`), store.PutOptions{IfNoneMatch: true})
	require.NoError(t, err)
	clock.Advance(2 * time.Hour)

	fs := faults.NewStore(s)
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1}) // the lease token's registration
	var res *job.Result
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		// The restarted driver commits the job before the horizon CAS.
		j, err := job.Open(ctx, d, "j")
		require.NoError(t, err)
		res, err = j.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
		require.NoError(t, err)
		require.False(t, res.Recovered)
	}})
	_, err = gc.Run(ctx, fs, hourly())
	require.NoError(t, err)
	require.NotNil(t, res, "the driver committed during the collection")
	requireComplete(t, d)

	assert.True(t, keysUnder(t, s, job.Prefix("j"))[job.Prefix("j")+job.CommitName], "the commit record written during the collection is kept")
	_, err = job.Begin(ctx, d, "j", job.Options{})
	require.ErrorIs(t, err, job.ErrCommitted, "a job committed moments ago is not begun again")
}

// The same race as above in one instant of the store's clock: the
// collection publishes a horizon equal to the job's staging start, which
// drops the job (its start is at or before the horizon), and stops at the
// job record; the late task record lands. An abort then reads a record
// whose start is not after the horizon, and must delete no object.
func TestAbortInTheInstantOfTheCollectorsHorizonNeverDeletesCommittedObjects(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	fs := faults.NewStore(s)
	d := dataset(fs)
	publish(t, d, false, files(1, "base"))
	j, err := job.Begin(ctx, dataset(failCommitted{fs}), "j", job.Options{})
	require.NoError(t, err)
	tk, err := j.Task("t", "a1", "test")
	require.NoError(t, err)
	require.NoError(t, tk.Tx().PutBytes(ctx, "x", []byte("x")))
	fs.Add(faults.Rule{Op: store.OpPut, Key: j.TaskKey("t"), Kind: faults.Late, Times: 1})
	_, err = tk.Commit(ctx)
	require.NoError(t, err, "the resend committed the task")
	_, err = j.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
	require.ErrorContains(t, err, "driver crashed", "the commit landed and was not recorded")
	requireComplete(t, d)

	recordKey := job.Prefix("j") + job.RecordName
	fs.Add(faults.Rule{Op: store.OpDeleteMany, Key: recordKey, Kind: faults.Refused, Times: 1})
	rep, err := gc.Run(ctx, fs, strict())
	require.Error(t, err, "the run stops at the job record")
	require.Equal(t, j.StagingStart(), rep.Horizon.UTC(), "the horizon is the job's start")
	require.NoError(t, fs.Release(), "the held task record write lands")
	require.Equal(t, map[string]bool{recordKey: true, j.TaskKey("t"): true}, keysUnder(t, s, job.Dir))

	require.NoError(t, job.Abort(ctx, d, "j"))
	requireComplete(t, d)
}

// A driver that read the pointer for its commit before another driver
// committed the job, and whose "committing" record write was held in the
// network until the collector had dropped the job's commit record and the
// job was begun again, leaves that record, with its base below the earlier
// instance's generation, on the new instance. The new instance's Commit
// then either publishes its own task's file or fails: it never reports the
// earlier instance's generation, found by the job id in its meta, as its
// own commit.
func TestHeldCommitRecordOfAFinishedInstanceNeverMakesTheJobBegunAgainReportTheEarlierCommit(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	fs := faults.NewStore(s)
	publish(t, dataset(s), false, files(1, "base"))
	d := dataset(s)
	first, err := job.Begin(ctx, d, "j", job.Options{})
	require.NoError(t, err)
	_, err = runTaskOf(t, first, "t")
	require.NoError(t, err)
	second, err := job.Open(ctx, dataset(fs), "j")
	require.NoError(t, err)

	var again *job.Job
	var earlier string
	fs.Add(faults.Rule{Op: store.OpPut, Key: job.Prefix("j") + job.CommitName, Kind: faults.Latency, Times: 1, Then: func() {
		res, err := first.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
		require.NoError(t, err)
		earlier = res.Generation
		clock.Advance(75 * time.Minute)
		_, err = gc.Run(ctx, s, hourly())
		require.NoError(t, err)
		require.Empty(t, keysUnder(t, s, job.Dir), "the commit record is dropped")
		again, err = job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		_, err = runTaskOf(t, again, "u")
		require.NoError(t, err)
	}})
	_, err = second.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
	require.ErrorIs(t, err, job.ErrNoJob, "the second driver's instance is gone")
	require.NotNil(t, again)

	res, err := again.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
	requireComplete(t, d)
	require.NoError(t, err, "the earlier instance's record left committing is replaced")
	assert.False(t, res.Recovered)
	assert.NotEqual(t, earlier, res.Generation, "the job begun again reports the earlier instance's generation as its commit")
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	_, err = snap.ReadFile(ctx, "u")
	assert.NoError(t, err, "the job begun again reported a commit without its task's file")
}

// An attempt whose task record landed unheard, was published by the job's
// commit and removed, and whose read-back finds a later attempt's record
// in the freed key only once the collector dropped the commit record and
// the job was begun again, keeps its objects: the job record it reads is
// another instance's, and the committed generation references them.
func TestLosingAttemptOfAJobCommittedAndBegunAgainKeepsItsObjects(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	fs := faults.NewStore(s)
	publish(t, dataset(s), false, files(1, "base"))
	d := dataset(s)
	j, err := job.Begin(ctx, d, "j", job.Options{})
	require.NoError(t, err)
	first, err := job.Open(ctx, dataset(fs), "j")
	require.NoError(t, err)
	loser, err := first.Task("t", "a1", "test")
	require.NoError(t, err)
	require.NoError(t, loser.Tx().PutBytes(ctx, "x", []byte("first")))
	later, err := j.Task("t", "a2", "test")
	require.NoError(t, err)
	require.NoError(t, later.Tx().PutBytes(ctx, "x", []byte("later")))

	var committed string
	fs.Add(faults.Rule{Op: store.OpPut, Key: first.TaskKey("t"), Kind: faults.Lost, Times: 1, Then: func() {
		res, err := j.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
		require.NoError(t, err)
		committed = res.Generation
		clock.Advance(75 * time.Minute)
		_, err = later.Commit(ctx)
		require.NoError(t, err, "the later attempt writes the key the commit freed")
		_, err = gc.Run(ctx, s, hourly())
		require.NoError(t, err)
		require.Equal(t, map[string]bool{j.TaskKey("t"): true}, keysUnder(t, s, job.Dir), "the commit record is dropped, the young task record kept")
		_, err = job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
	}})
	_, err = loser.Commit(ctx)
	var lost *job.TaskLostError
	require.ErrorAs(t, err, &lost)
	assert.True(t, lost.Kept)
	assert.Equal(t, committed, currentGen(t, s))
	requireComplete(t, d)
}

// A driver that finds the job committed rewrites its "committed" record;
// held in the network until the collector dropped that record and the job
// was begun again, the rewrite lands beside the new instance's record. The
// new instance's Commit then either publishes its own task's file or
// fails: it never reports the earlier instance's generation as its commit.
func TestRewrittenCommitRecordOfAFinishedInstanceNeverMakesTheJobBegunAgainReportTheEarlierCommit(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	fs := faults.NewStore(s)
	publish(t, dataset(s), false, files(1, "base"))
	d := dataset(s)
	first, err := job.Begin(ctx, d, "j", job.Options{})
	require.NoError(t, err)
	_, err = runTaskOf(t, first, "t")
	require.NoError(t, err)
	second, err := job.Open(ctx, dataset(fs), "j")
	require.NoError(t, err)
	res, err := first.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
	require.NoError(t, err)
	earlier := res.Generation

	var again *job.Job
	fs.Add(faults.Rule{Op: store.OpPut, Key: job.Prefix("j") + job.CommitName, Kind: faults.Latency, Times: 1, Then: func() {
		clock.Advance(75 * time.Minute)
		_, err := gc.Run(ctx, s, hourly())
		require.NoError(t, err)
		require.Empty(t, keysUnder(t, s, job.Dir), "the commit record is dropped")
		again, err = job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		_, err = runTaskOf(t, again, "u")
		require.NoError(t, err)
	}})
	// The second driver is told of the earlier commit (or, if the rewrite
	// is refused, of an error): either answer is true of its instance.
	if res, err := second.Commit(ctx, job.CommitOptions{ExpectTasks: 1}); err == nil {
		assert.Equal(t, earlier, res.Generation)
	}
	require.NotNil(t, again)

	res, err = again.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
	requireComplete(t, d)
	require.ErrorIs(t, err, job.ErrCommitted, "the earlier instance's committed record is in place")
	assert.Nil(t, res, "no commit is reported as the new instance's")
}
