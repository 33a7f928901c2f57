package gc_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/job"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// runJobTask begins job id (or opens it) and commits one task of one file.
func runJobTask(t *testing.T, d *commit.Dataset, id, task string) (*job.Job, string) {
	t.Helper()
	ctx := context.Background()
	j, err := job.Begin(ctx, d, id, job.Options{})
	require.NoError(t, err)
	tk, err := j.Task(task, "a", "test")
	require.NoError(t, err)
	require.NoError(t, tk.Tx().PutBytes(ctx, task, []byte(task)))
	_, err = tk.Commit(ctx)
	require.NoError(t, err)
	return j, tk.Generation()
}

// The collector removes a job left uncommitted past the orphan age, its
// records and its tasks' objects, publishing its horizon first even when
// nothing else is an orphan; it never touches a job younger than that,
// and the abandoned job can then no longer commit.
func TestGCDropsAbandonedJobsAndKeepsOpenOnes(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	d := dataset(s)
	publish(t, d, false, files(1, "base"))
	abandoned, abandonedGen := runJobTask(t, d, "abandoned", "t")
	_, err := job.Begin(ctx, d, "empty", job.Options{})
	require.NoError(t, err)
	clock.Advance(2 * time.Hour)
	open, openGen := runJobTask(t, d, "open", "t")
	fresh, _ := runJobTask(t, d, "fresh", "t")
	_, err = fresh.Commit(ctx, job.CommitOptions{})
	require.NoError(t, err)

	rep, err := gc.Run(ctx, s, gc.Options{Keep: 1, Grace: -1, OrphanAge: time.Hour, Owner: "test"})
	require.NoError(t, err)
	assert.Equal(t, 2, rep.JobsDropped)
	assert.Empty(t, keysUnder(t, s, job.Prefix("abandoned")))
	assert.Empty(t, keysUnder(t, s, job.Prefix("empty")), "a job without tasks goes too: the run published its horizon for it")
	assert.Empty(t, keysUnder(t, s, generation.Prefix(abandonedGen)), "the abandoned task's objects are orphans")
	assert.NotEmpty(t, keysUnder(t, s, job.Prefix("open")), "a job inside the orphan age is kept")
	assert.NotEmpty(t, keysUnder(t, s, generation.Prefix(openGen)))
	assert.NotEmpty(t, keysUnder(t, s, job.Prefix("fresh")), "the commit record of a job committed inside the orphan age stays, for a driver that runs commit again")

	_, err = abandoned.Commit(ctx, job.CommitOptions{})
	require.ErrorIs(t, err, job.ErrNoJob)
	res, err := open.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
	require.NoError(t, err)
	assert.Equal(t, uint64(3), res.Seq)
}

// A job's commit that read its records before the collector dropped the
// job is refused by the horizon the collector published: the objects it
// would reference may be gone.
func TestJobDroppedByTheCollectorCannotCommit(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	d := dataset(s)
	publish(t, d, false, files(1, "base"))
	runJobTask(t, d, "j", "t")
	clock.Advance(2 * time.Hour)
	// The driver's commit reads the task records, then the collector
	// runs, then the driver sends.
	hooked := faults.NewStore(s)
	jd := dataset(hooked)
	j, err := job.Open(ctx, jd, "j")
	require.NoError(t, err)
	hooked.Add(faults.Rule{Op: store.OpGet, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		_, err := gc.Run(ctx, s, gc.Options{Keep: 1, Grace: -1, OrphanAge: time.Hour, Owner: "test"})
		require.NoError(t, err)
	}})
	_, err = j.Commit(ctx, job.CommitOptions{})
	require.ErrorIs(t, err, job.ErrNoJob, "the job record is gone once the commit record is in place")
	requireComplete(t, d)
}

// Every driver: the collector with no minimum orphan age drops an
// uncommitted job, and the commit record a committed job left, while the
// committed job's files stay.
func TestGCDropsJobRecordsOnEveryDriver(t *testing.T) {
	testenv.EachStoreAtOnce(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := dataset(s)
		publish(t, d, false, files(1, "base"))
		done, _ := runJobTask(t, d, "done", "t")
		_, err := done.Commit(ctx, job.CommitOptions{})
		require.NoError(t, err)
		runJobTask(t, d, "left", "u")
		time.Sleep(waitOlder(0)) // the store's clock passes the records' times
		rep, err := gc.Run(ctx, s, strict())
		require.NoError(t, err)
		assert.Equal(t, 2, rep.JobsDropped)
		assert.Empty(t, keysUnder(t, s, job.Dir))
		requireComplete(t, d)
		snap, err := d.Open(ctx)
		require.NoError(t, err)
		_, err = snap.ReadFile(ctx, "t")
		require.NoError(t, err, "the committed job's file stays")
	})
}

// A job abandoned before any task committed leaves no orphan generation;
// the collector publishes its horizon for the job alone, and drops it.
func TestGCDropsAnAbandonedJobWithoutTasks(t *testing.T) {
	ctx := context.Background()
	clock := newStoreClock()
	s := memStore(clock.Now)
	d := dataset(s)
	publish(t, d, false, files(1, "base"))
	j, err := job.Begin(ctx, d, "empty", job.Options{})
	require.NoError(t, err)
	clock.Advance(2 * time.Hour)
	rep, err := gc.Run(ctx, s, gc.Options{Keep: 1, Grace: -1, OrphanAge: time.Hour, Owner: "test"})
	require.NoError(t, err)
	assert.Equal(t, 1, rep.JobsDropped)
	assert.Empty(t, keysUnder(t, s, job.Prefix("empty")))
	assert.False(t, rep.Horizon.Before(j.StagingStart()), "the horizon passed the job's start")
}
