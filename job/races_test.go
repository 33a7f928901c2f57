package job_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/job"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// An abort that runs while the job's pointer write is in flight, not yet
// landed, cannot prove the commit dead: it reports an unknown outcome and
// deletes nothing, and the write that lands then publishes every file.
func TestAbortWhileTheCommitsPointerWriteIsInFlightDeletesNothing(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		fs := faults.NewStore(s)
		d := commit.New(fs)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		tk, err := runTask(t, j, "t", "a", map[string]string{"x": "1"})
		require.NoError(t, err)
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			err := job.Abort(ctx, commit.New(s), "j")
			assert.ErrorIs(t, err, commit.ErrCommitUnknown)
		}})
		res, err := j.Commit(ctx, job.CommitOptions{})
		require.NoError(t, err)
		assert.False(t, res.Recovered)
		assert.NotEmpty(t, keysUnder(t, s, generation.Prefix(tk.Generation())))
		assert.Equal(t, map[string]string{"x": "1"}, readAll(t, d))
		require.ErrorIs(t, j.Abort(ctx), job.ErrCommitted)
		assert.Equal(t, map[string]string{"x": "1"}, readAll(t, d))
	})
}

// An abort that runs after the job's pointer write landed, before the
// commit heard back, finds the generation and refuses, deleting nothing;
// the commit then returns that generation.
func TestAbortAfterTheCommitLandedRefusesAndDeletesNothing(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		fs := faults.NewStore(s)
		d := commit.New(fs)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		_, err = runTask(t, j, "t", "a", map[string]string{"x": "1"})
		require.NoError(t, err)
		var landed string
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Held, Times: 1, Then: func() {
			p, _, err := pointer.Read(ctx, s)
			require.NoError(t, err)
			landed = p.Generation
			err = job.Abort(ctx, commit.New(s), "j")
			assert.ErrorIs(t, err, job.ErrCommitted)
		}})
		res, err := j.Commit(ctx, job.CommitOptions{})
		require.NoError(t, err)
		assert.Equal(t, landed, res.Generation)
		assert.Equal(t, map[string]string{"x": "1"}, readAll(t, d))
		state, gen, _, err := job.State(ctx, s, "j")
		require.NoError(t, err)
		assert.Equal(t, "committed", state)
		assert.Equal(t, landed, gen)
	})
}

// A driver restarted after its commit landed, and after other writers
// committed on top of it, walks the history down to the job's generation
// and commits nothing again.
func TestRestartedDriverFindsItsCommitBelowOtherWritersCommits(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		h := &hookStore{Store: s}
		d := commit.New(h)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		_, err = runTask(t, j, "t", "a", map[string]string{"x": "1"})
		require.NoError(t, err)
		// The driver dies after its pointer write, before it records the
		// commit.
		h.set(func(h *hookStore) {
			h.put = func(key string, body []byte) (bool, error) {
				if strings.HasSuffix(key, "/commit") && bytes.Contains(body, []byte(`"committed"`)) {
					return false, errCrash
				}
				return false, nil
			}
		})
		_, err = j.Commit(ctx, job.CommitOptions{})
		require.Error(t, err)
		h.set(func(h *hookStore) { h.put = nil })
		p, _, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		jobGen := p.Generation
		for _, c := range []string{"2", "3"} {
			tx, err := d.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.KeepAll(ctx))
			require.NoError(t, tx.PutBytes(ctx, "y", []byte(c)))
			_, err = tx.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
		}
		restarted, err := job.Open(ctx, d, "j")
		require.NoError(t, err)
		res, err := restarted.Commit(ctx, job.CommitOptions{})
		require.NoError(t, err)
		assert.True(t, res.Recovered)
		assert.Equal(t, jobGen, res.Generation)
		p, _, err = pointer.Read(ctx, s)
		require.NoError(t, err)
		assert.Equal(t, uint64(3), p.Seq, "the job committed once")
	})
}

// A task that is not among the expected ids refuses the commit, as a
// missing one does.
func TestExpectTaskIDsRefusesATaskNotExpected(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		for _, task := range []string{"t0", "stray"} {
			_, err := runTask(t, j, task, "a", map[string]string{task: task})
			require.NoError(t, err)
		}
		_, err = j.Commit(ctx, job.CommitOptions{ExpectTaskIDs: []string{"t0"}})
		require.ErrorIs(t, err, job.ErrTasks)
		require.ErrorContains(t, err, "stray")
		_, _, err = pointer.Read(ctx, s)
		require.ErrorIs(t, err, store.ErrNotExist, "nothing was committed")
	})
}

// A driver whose listing missed the commit record of another driver, which
// committed the job meanwhile and died before recording it, meets that
// record when it creates its own, walks from the other driver's base, and
// commits nothing again.
func TestDriverWhoseListingMissedTheCommitRecordFindsTheEarlierCommit(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		h := &hookStore{Store: s}
		j, err := job.Begin(ctx, commit.New(h), "j", job.Options{})
		require.NoError(t, err)
		_, err = runTask(t, j, "t", "a", map[string]string{"x": "1"})
		require.NoError(t, err)
		h.set(func(h *hookStore) {
			h.put = func(key string, body []byte) (bool, error) {
				if strings.HasSuffix(key, "/commit") && bytes.Contains(body, []byte(`"committed"`)) {
					return false, errCrash
				}
				return false, nil
			}
		})
		// The second driver has listed the job's records (no commit record
		// yet) when the first one commits, before the second reads the
		// pointer.
		h2 := &hookStore{Store: s}
		second, err := job.Open(ctx, commit.New(h2), "j")
		require.NoError(t, err)
		var once sync.Once
		h2.set(func(h2 *hookStore) {
			h2.get = func(key string) error {
				if key == pointer.Key {
					once.Do(func() {
						_, err := j.Commit(ctx, job.CommitOptions{})
						assert.ErrorIs(t, err, errCrash, "the first driver dies before recording its commit")
					})
				}
				return nil
			}
		})
		res, err := second.Commit(ctx, job.CommitOptions{})
		require.NoError(t, err)
		assert.True(t, res.Recovered)
		p, _, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		assert.Equal(t, uint64(1), p.Seq, "the job committed once")
		assert.Equal(t, p.Generation, res.Generation)
	})
}

// A task record copied under another task's key is refused as corrupt:
// the job would otherwise publish one attempt's objects as two tasks.
func TestTaskRecordCopiedUnderAnotherTaskIsRefused(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		_, err = runTask(t, j, "t0", "a", map[string]string{"x": "1"})
		require.NoError(t, err)
		copyObject(t, s, j.TaskKey("t0"), j.TaskKey("t1"))
		_, err = j.Commit(ctx, job.CommitOptions{})
		require.ErrorIs(t, err, job.ErrCorrupt)
		_, _, err = pointer.Read(ctx, s)
		require.ErrorIs(t, err, store.ErrNotExist, "nothing was committed")
	})
}

// A task record of an earlier instance of the job, copied into the
// current instance's records, is refused as corrupt: a job begun again
// never publishes what an earlier instance's attempts staged.
func TestTaskRecordOfAnEarlierInstanceIsRefused(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		_, err = runTask(t, j, "t0", "a", map[string]string{"x": "1"})
		require.NoError(t, err)
		require.NoError(t, s.Delete(ctx, job.Prefix("j")+job.RecordName, store.DeleteOptions{}))
		again, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		require.NotEqual(t, j.Instance(), again.Instance())
		copyObject(t, s, j.TaskKey("t0"), again.TaskKey("t0"))
		_, err = again.Commit(ctx, job.CommitOptions{})
		require.ErrorIs(t, err, job.ErrCorrupt)
		_, _, err = pointer.Read(ctx, s)
		require.ErrorIs(t, err, store.ErrNotExist, "nothing was committed")
	})
}

// An attempt whose task record landed, but whose response was lost, and
// whose job committed that record before the attempt read it back, finds
// a later attempt's record there: one written after the commit removed the
// job's records. That record does not prove that this attempt's objects
// are unreferenced: the committed generation references them, and the
// attempt must not delete them (I1), whether the later attempt has another
// id (a speculative copy) or the same one (a rerun).
func TestAttemptWhoseRecordTheJobCommittedNeverDeletesItsObjects(t *testing.T) {
	for _, tc := range []struct{ name, later string }{{"speculative copy", "a2"}, {"rerun", "a1"}} {
		t.Run(tc.name, func(t *testing.T) {
			testenv.EachStore(t, func(t *testing.T, s store.Store) {
				ctx := context.Background()
				fs := faults.NewStore(s)
				d := commit.New(fs)
				j, err := job.Begin(ctx, d, "j", job.Options{})
				require.NoError(t, err)
				first, err := j.Task("t", "a1", "test")
				require.NoError(t, err)
				require.NoError(t, first.Tx().PutBytes(ctx, "x", []byte("first")))
				later, err := j.Task("t", tc.later, "test")
				require.NoError(t, err)
				require.NoError(t, later.Tx().PutBytes(ctx, "x", []byte("later")))
				// The first attempt's record lands and its response is lost;
				// before the attempt reads the record back, the driver
				// commits the job and the later attempt commits the task
				// anew on the key the commit cleared.
				var committed string
				fs.Add(faults.Rule{Op: store.OpPut, Key: j.TaskKey("t"), Kind: faults.Lost, Times: 1, Then: func() {
					res, err := j.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
					require.NoError(t, err)
					committed = res.Generation
					_, _ = later.Commit(ctx)
				}})
				_, _ = first.Commit(ctx)
				p, _, err := pointer.Read(ctx, s)
				require.NoError(t, err)
				require.Equal(t, committed, p.Generation)
				assert.Equal(t, map[string]string{"x": "first"}, readAll(t, d), "I1: the committed generation's objects are all there")
			})
		})
	}
}

// A job's commit that loses its compare-and-swap to another writer's
// commit deletes only what it wrote itself (its manifest), never the
// tasks' objects it adopted, and commits on the new head: every file of
// both reads back.
func TestJobCommitThatLosesItsCompareAndSwapKeepsTheTasksObjects(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		fs := faults.NewStore(s)
		d := commit.New(fs)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		_, err = runTask(t, j, "t", "a", map[string]string{"x": "1"})
		require.NoError(t, err)
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			tx, err := commit.New(s).Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.PutBytes(ctx, "y", []byte("2")))
			_, err = tx.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
		}})
		res, err := j.Commit(ctx, job.CommitOptions{})
		require.NoError(t, err)
		assert.False(t, res.Recovered)
		assert.Equal(t, uint64(2), res.Seq, "committed on the other writer's generation")
		assert.Equal(t, map[string]string{"x": "1", "y": "2"}, readAll(t, d))
	})
}

// A Begin of a job that is open already (a driver restarted) resumes it:
// the same instance and staging start, so that the tasks committed before
// it are the job's, and the objects staged before it are still held
// against the collector's horizon by the start they were staged after.
func TestBeginOfAnOpenJobResumesTheSameInstance(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		_, err = runTask(t, j, "t0", "a", map[string]string{"x0": "0"})
		require.NoError(t, err)
		again, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		assert.Equal(t, j.Instance(), again.Instance())
		assert.Equal(t, j.StagingStart(), again.StagingStart())
		_, err = runTask(t, again, "t1", "a", map[string]string{"x1": "1"})
		require.NoError(t, err)
		_, err = again.Commit(ctx, job.CommitOptions{ExpectTaskIDs: []string{"t0", "t1"}})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"x0": "0", "x1": "1"}, readAll(t, d))
	})
}

// pausedRecordRemoval removes a committed job's records as a store may
// apply one DeleteMany: the task records first, then, once release is
// closed, the job record. removed is closed in between.
type pausedRecordRemoval struct {
	store.Store
	once             sync.Once
	removed, release chan struct{}
}

func (p *pausedRecordRemoval) DeleteMany(ctx context.Context, keys []string) error {
	var tasks, rest []string
	for _, k := range keys {
		if strings.HasPrefix(k, job.Prefix("j")+"task/") {
			tasks = append(tasks, k)
		} else {
			rest = append(rest, k)
		}
	}
	if len(tasks) == 0 || len(rest) == 0 {
		return p.Store.DeleteMany(ctx, keys)
	}
	if err := p.Store.DeleteMany(ctx, tasks); err != nil {
		return err
	}
	p.once.Do(func() { close(p.removed); <-p.release })
	return p.Store.DeleteMany(ctx, rest)
}

// An attempt whose record landed unheard, and which a commit of the job
// published, never deletes its objects while that commit is removing the
// job's records: the commit record says a commit started, even while the
// job record is still there.
func TestLoserNeverDeletesWhileTheCommitThatReadItsRecordRemovesTheRecords(t *testing.T) {
	ctx := context.Background()
	p := &pausedRecordRemoval{Store: mem.New(), removed: make(chan struct{}), release: make(chan struct{})}
	fs := faults.NewStore(p)
	d := commit.New(fs)
	j, err := job.Begin(ctx, d, "j", job.Options{})
	require.NoError(t, err)
	first, err := j.Task("t", "a1", "test")
	require.NoError(t, err)
	require.NoError(t, first.Tx().PutBytes(ctx, "x", []byte("first")))
	later, err := j.Task("t", "a2", "test")
	require.NoError(t, err)
	require.NoError(t, later.Tx().PutBytes(ctx, "x", []byte("later")))
	committed := make(chan error, 1)
	fs.Add(faults.Rule{Op: store.OpPut, Key: j.TaskKey("t"), Kind: faults.Lost, Times: 1, Then: func() {
		go func() {
			_, err := j.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
			committed <- err
		}()
		<-p.removed
		_, err := later.Commit(ctx)
		require.NoError(t, err, "the later attempt writes the freed key")
	}})
	_, err = first.Commit(ctx)
	require.ErrorIs(t, err, job.ErrTaskLost)
	close(p.release)
	require.NoError(t, <-committed)
	assert.Equal(t, map[string]string{"x": "first"}, readAll(t, d), "I1: the committed generation's objects are all there")
}

// A Begin that resumes an open job, whose record write is held in flight
// while another driver commits the job and removes its record, lands a new
// instance beside the job's "committed" commit record. Whatever Begin and
// the new instance's Commit then answer, a Commit that reports success
// publishes the files its tasks committed: it never reports the earlier
// instance's generation, without them, as the job's commit.
func TestBeginHeldAcrossTheJobsCommitNeverReportsAnotherInstancesCommit(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		first, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		_, err = runTask(t, first, "t", "a", map[string]string{"x": "1"})
		require.NoError(t, err)

		fs := faults.NewStore(s)
		fs.Add(faults.Rule{Op: store.OpPut, Key: job.Prefix("j") + job.RecordName, Kind: faults.Latency, Times: 1, Then: func() {
			res, err := first.Commit(ctx, job.CommitOptions{})
			assert.NoError(t, err)
			assert.False(t, res.Recovered)
		}})
		resumed, err := job.Begin(ctx, commit.New(fs), "j", job.Options{})
		require.NoError(t, err, "the held record lands as a new instance")
		_, err = runTask(t, resumed, "u", "b", map[string]string{"y": "2"})
		require.NoError(t, err)
		res, err := resumed.Commit(ctx, job.CommitOptions{})
		require.ErrorIs(t, err, job.ErrCommitted, "the earlier instance's commit record is in place")
		assert.Nil(t, res, "no commit is reported as the new instance's")
		assert.NotContains(t, readAll(t, d), "y")
	})
}

// A commit that finds, as it creates its commit record, the "committed"
// record of another instance of the job (written after its listing) is
// refused: it never reports that instance's generation as its own.
func TestCommitMeetingAnotherInstancesCommittedRecordIsRefused(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fs := faults.NewStore(s)
	d := commit.New(fs)
	j, err := job.Begin(ctx, d, "j", job.Options{})
	require.NoError(t, err)
	_, err = runTask(t, j, "t", "a", map[string]string{"x": "1"})
	require.NoError(t, err)
	g, err := generation.New()
	require.NoError(t, err)
	fs.Add(faults.Rule{Op: store.OpPut, Key: job.Prefix("j") + job.CommitName, Kind: faults.Latency, Times: 1, Then: func() {
		_, err := s.Put(ctx, job.Prefix("j")+job.CommitName, strings.NewReader(`{"format":1,"job":"j","state":"committed","instance":"earlier","generation":"`+g+`","seq":7}`), store.PutOptions{IfNoneMatch: true})
		require.NoError(t, err)
	}})
	res, err := j.Commit(ctx, job.CommitOptions{})
	require.ErrorIs(t, err, job.ErrCommitted)
	assert.Nil(t, res)
}

// copyObject writes the body of key from under key to, as a forger would.
func copyObject(t *testing.T, s store.Store, from, to string) {
	t.Helper()
	ctx := context.Background()
	rc, _, err := s.Get(ctx, from)
	require.NoError(t, err)
	b, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	_, err = s.Put(ctx, to, bytes.NewReader(b), store.PutOptions{})
	require.NoError(t, err)
}
