package job_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/job"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// runTask stages files (path → content) as one attempt of task and
// commits the task.
func runTask(t *testing.T, j *job.Job, task, attempt string, files map[string]string) (*job.Task, error) {
	t.Helper()
	ctx := context.Background()
	tk, err := j.Task(task, attempt, "test")
	require.NoError(t, err)
	for p, c := range files {
		require.NoError(t, tk.Tx().PutBytes(ctx, p, []byte(c)))
	}
	_, err = tk.Commit(ctx)
	return tk, err
}

func keysUnder(t *testing.T, s store.Store, prefix string) []string {
	t.Helper()
	var keys []string
	for o, err := range store.List(context.Background(), s, prefix, "", "") {
		require.NoError(t, err)
		keys = append(keys, o.Key)
	}
	return keys
}

func readAll(t *testing.T, d *commit.Dataset) map[string]string {
	t.Helper()
	ctx := context.Background()
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	out := map[string]string{}
	for _, e := range snap.Files() {
		b, err := snap.ReadFile(ctx, e.Path)
		require.NoError(t, err, "I1: file %q", e.Path)
		out[e.Path] = string(b)
	}
	return out
}

func TestJobCommitPublishesEveryTaskAtOnce(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		j, err := job.Begin(ctx, d, "run-1", job.Options{})
		require.NoError(t, err)
		for _, task := range []string{"t0", "t1", "t2"} {
			_, err := runTask(t, j, task, "a1", map[string]string{"part-" + task: "data " + task})
			require.NoError(t, err)
		}
		_, err = d.Open(ctx)
		require.ErrorIs(t, err, commit.ErrNoCommits, "no part is visible before the job commit")

		res, err := j.Commit(ctx, job.CommitOptions{ExpectTasks: 3, Message: "job"})
		require.NoError(t, err)
		assert.False(t, res.Recovered)
		assert.Equal(t, 3, res.Tasks)
		assert.Equal(t, map[string]string{"part-t0": "data t0", "part-t1": "data t1", "part-t2": "data t2"}, readAll(t, d))
		snap, err := d.Open(ctx)
		require.NoError(t, err)
		assert.Equal(t, res.Generation, snap.Generation())
		assert.Equal(t, "run-1", snap.Manifest.Meta[job.MetaKey])
		assert.Equal(t, []string{job.Prefix("run-1") + "commit"}, keysUnder(t, s, job.Dir), "only the commit record is left of the job's records")
	})
}

func TestJobCommitMergesIntoReplacesOrAdds(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.PutBytes(ctx, "keep", []byte("k")))
		require.NoError(t, tx.PutBytes(ctx, "out/old", []byte("o")))
		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)

		commitJob := func(id string, opts job.CommitOptions) {
			j, err := job.Begin(ctx, d, id, job.Options{})
			require.NoError(t, err)
			_, err = runTask(t, j, "t", "a", map[string]string{"p": id})
			require.NoError(t, err)
			_, err = j.Commit(ctx, opts)
			require.NoError(t, err)
		}
		commitJob("into", job.CommitOptions{Into: "out/"})
		assert.Equal(t, map[string]string{"keep": "k", "out/p": "into"}, readAll(t, d), "Into replaces the subtree")
		commitJob("add", job.CommitOptions{})
		assert.Equal(t, map[string]string{"keep": "k", "out/p": "into", "p": "add"}, readAll(t, d), "without Into or Replace the files are added")
		commitJob("replace", job.CommitOptions{Replace: true})
		assert.Equal(t, map[string]string{"p": "replace"}, readAll(t, d), "Replace publishes the job's files alone")
	})
}

func TestSecondAttemptOfATaskLosesAndDeletesOnlyItsOwnObjects(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		first, err := runTask(t, j, "t", "a1", map[string]string{"x": "first"})
		require.NoError(t, err)
		second, err := runTask(t, j, "t", "a2", map[string]string{"x": "second"})
		var lost *job.TaskLostError
		require.ErrorAs(t, err, &lost)
		assert.Equal(t, "a1", lost.Winner)
		assert.Empty(t, keysUnder(t, s, generation.Prefix(second.Generation())), "the loser deleted its objects")
		assert.NotEmpty(t, keysUnder(t, s, generation.Prefix(first.Generation())), "the winner's objects stay")

		again, err := runTask(t, j, "t", "a1", map[string]string{"x": "rerun"})
		require.NoError(t, err, "a rerun of the attempt that won is told it won")
		assert.Empty(t, keysUnder(t, s, generation.Prefix(again.Generation())), "the rerun's own objects are deleted: the task is the first run's")

		_, err = j.Commit(ctx, job.CommitOptions{ExpectTaskIDs: []string{"t"}})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"x": "first"}, readAll(t, d))
	})
}

func TestConcurrentAttemptsOfATaskCommitExactlyOne(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		const n = 4
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				tk, err := j.Task("t", "a"+string(rune('0'+i)), "test")
				if err == nil {
					err = tk.Tx().PutBytes(ctx, "x", []byte{byte('0' + i)})
				}
				if err == nil {
					_, err = tk.Commit(ctx)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			if err == nil {
				won++
			} else {
				require.ErrorIs(t, err, job.ErrTaskLost)
			}
		}
		assert.Equal(t, 1, won)
		_, err = j.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
		require.NoError(t, err)
		assert.Len(t, readAll(t, d), 1)
		assert.Len(t, keysUnder(t, s, generation.Dir), 2, "the winner's object and the job's manifest: the losers' objects are gone")
	})
}

func TestExpectTasksRefusesBeforeWritingAnything(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		_, err = j.Commit(ctx, job.CommitOptions{Replace: true})
		require.ErrorIs(t, err, job.ErrTasks, "a job without tasks")
		_, err = runTask(t, j, "t0", "a", map[string]string{"x0": "0"})
		require.NoError(t, err)
		_, err = j.Commit(ctx, job.CommitOptions{ExpectTasks: 2})
		require.ErrorIs(t, err, job.ErrTasks)
		_, err = j.Commit(ctx, job.CommitOptions{ExpectTaskIDs: []string{"t0", "t1"}})
		require.ErrorIs(t, err, job.ErrTasks)
		require.ErrorContains(t, err, "t1")
		_, err = runTask(t, j, "t1", "a", map[string]string{"x0": "clash"})
		require.NoError(t, err)
		_, err = j.Commit(ctx, job.CommitOptions{ExpectTasks: 2})
		require.ErrorIs(t, err, job.ErrTasks, "two tasks staged one path")
		_, _, err = pointer.Read(ctx, s)
		require.ErrorIs(t, err, store.ErrNotExist, "nothing was committed")
		state, _, _, err := job.State(ctx, s, "j")
		require.NoError(t, err)
		assert.Equal(t, "open", state, "no commit was started: the job can still be aborted")
		require.NoError(t, j.Abort(ctx))
	})
}

func TestCommitOfACommittedJobReturnsItsGeneration(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		_, err = runTask(t, j, "t", "a", map[string]string{"x": "1"})
		require.NoError(t, err)
		first, err := j.Commit(ctx, job.CommitOptions{})
		require.NoError(t, err)
		again, err := j.Commit(ctx, job.CommitOptions{})
		require.NoError(t, err)
		assert.True(t, again.Recovered)
		assert.Equal(t, first.Generation, again.Generation)
		p, _, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		assert.Equal(t, first.Seq, p.Seq, "committed once")
		_, err = job.Begin(ctx, d, "j", job.Options{})
		require.ErrorIs(t, err, job.ErrCommitted, "a committed job is not begun again")
		require.ErrorIs(t, j.Abort(ctx), job.ErrCommitted)
	})
}

// hookStore runs hook before each request it names; a hook that returns
// an error fails the request instead, after sending it when after is set.
type hookStore struct {
	store.Store
	mu   sync.Mutex
	put  func(key string, body []byte) (after bool, err error)
	get  func(key string) error
	list func(prefix string) error
}

func (h *hookStore) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	h.mu.Lock()
	hook := h.put
	h.mu.Unlock()
	if hook == nil {
		return h.Store.Put(ctx, key, body, opts)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return store.Attrs{}, err
	}
	after, herr := hook(key, b)
	if herr == nil {
		return h.Store.Put(ctx, key, bytes.NewReader(b), opts)
	}
	if after {
		if _, err := h.Store.Put(ctx, key, bytes.NewReader(b), opts); err != nil {
			return store.Attrs{}, err
		}
	}
	return store.Attrs{}, herr
}

func (h *hookStore) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	h.mu.Lock()
	hook := h.get
	h.mu.Unlock()
	if hook != nil {
		if err := hook(key); err != nil {
			return nil, store.Attrs{}, err
		}
	}
	return h.Store.Get(ctx, key)
}

func (h *hookStore) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	h.mu.Lock()
	hook := h.list
	h.mu.Unlock()
	if hook != nil {
		if err := hook(req.Prefix); err != nil {
			return store.ListPage{}, err
		}
	}
	return h.Store.List(ctx, req)
}

func (h *hookStore) set(fn func(*hookStore)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn(h)
}

var errCrash = errors.New("driver crashed")

// failPointerReadsAfterFirst is a get hook under which the commit reads
// its base pointer and cannot read the pointer again.
func failPointerReadsAfterFirst() func(key string) error {
	var n int
	return func(key string) error {
		if key != pointer.Key {
			return nil
		}
		n++
		if n > 1 {
			return errCrash
		}
		return nil
	}
}

// A driver killed at each step of the job commit, and restarted, commits
// the job exactly once.
func TestDriverKilledAtEachStepCommitsExactlyOnce(t *testing.T) {
	steps := []struct {
		name string
		arm  func(h *hookStore)
	}{
		{"before the list", func(h *hookStore) {
			h.list = func(prefix string) error {
				if strings.HasPrefix(prefix, job.Dir) {
					return errCrash
				}
				return nil
			}
		}},
		{"after the manifest put", func(h *hookStore) {
			h.put = func(key string, _ []byte) (bool, error) {
				if strings.HasSuffix(key, generation.ManifestName) {
					return true, errCrash
				}
				if key == pointer.Key {
					return false, errCrash
				}
				return false, nil
			}
			// The crash: the pointer cannot be read back either.
			h.get = failPointerReadsAfterFirst()
		}},
		{"after the pointer put, its response lost", func(h *hookStore) {
			h.put = func(key string, body []byte) (bool, error) {
				if key == pointer.Key || (strings.HasSuffix(key, "/commit") && bytes.Contains(body, []byte(`"committed"`))) {
					return true, errCrash
				}
				return false, nil
			}
		}},
		{"after the pointer put, before the commit record", func(h *hookStore) {
			h.put = func(key string, body []byte) (bool, error) {
				if strings.HasSuffix(key, "/commit") && bytes.Contains(body, []byte(`"committed"`)) {
					return false, errCrash
				}
				return false, nil
			}
		}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			testenv.EachStore(t, func(t *testing.T, s store.Store) {
				ctx := context.Background()
				h := &hookStore{Store: s}
				d := commit.New(h)
				tx, err := d.Begin(ctx)
				require.NoError(t, err)
				require.NoError(t, tx.PutBytes(ctx, "base", []byte("b")))
				base, err := tx.Commit(ctx, commit.CommitOptions{})
				require.NoError(t, err)
				j, err := job.Begin(ctx, d, "j", job.Options{})
				require.NoError(t, err)
				for _, task := range []string{"t0", "t1"} {
					_, err := runTask(t, j, task, "a", map[string]string{task: task})
					require.NoError(t, err)
				}
				h.set(step.arm)
				_, err = j.Commit(ctx, job.CommitOptions{ExpectTasks: 2})
				require.Error(t, err, "the first driver fails at its step")
				h.set(func(h *hookStore) { h.put, h.get, h.list = nil, nil, nil })

				restarted, err := job.Open(ctx, d, "j")
				if err != nil {
					// The first driver got as far as removing the job record.
					require.ErrorIs(t, err, job.ErrNoJob)
					restarted = j
				}
				res, err := restarted.Commit(ctx, job.CommitOptions{ExpectTasks: 2})
				require.NoError(t, err)
				p, _, err := pointer.Read(ctx, s)
				require.NoError(t, err)
				assert.Equal(t, base.Seq+1, p.Seq, "committed exactly once")
				assert.Equal(t, p.Generation, res.Generation)
				assert.Equal(t, map[string]string{"base": "b", "t0": "t0", "t1": "t1"}, readAll(t, d))
				again, err := restarted.Commit(ctx, job.CommitOptions{ExpectTasks: 2})
				require.NoError(t, err)
				assert.True(t, again.Recovered)
				assert.Equal(t, res.Generation, again.Generation)
			})
		})
	}
}

// A commit of the job that lands late, after a restarted driver read the
// pointer, is found by the restarted driver when its own write loses: it
// never commits the job a second time.
func TestLateCommitOfAnEarlierDriverIsNotDoubled(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		h := &hookStore{Store: s}
		d := commit.New(h)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		_, err = runTask(t, j, "t", "a", map[string]string{"x": "1"})
		require.NoError(t, err)
		// The first driver's pointer write is held until the second
		// driver has read the pointer.
		held := make(chan struct{})
		release := make(chan struct{})
		var once sync.Once
		h.set(func(h *hookStore) {
			h.put = func(key string, _ []byte) (bool, error) {
				if key == pointer.Key {
					once.Do(func() { close(held); <-release })
				}
				return false, nil
			}
		})
		firstDone := make(chan error, 1)
		go func() {
			_, err := j.Commit(ctx, job.CommitOptions{})
			firstDone <- err
		}()
		<-held
		second, err := job.Open(ctx, d, "j")
		require.NoError(t, err)
		var reads int
		h.set(func(h *hookStore) {
			h.get = func(key string) error {
				if key == pointer.Key {
					reads++
					if reads == 1 {
						// The second driver has read the pointer: let the
						// first one's write land before the second sends.
						close(release)
						require.NoError(t, <-firstDone)
					}
				}
				return nil
			}
		})
		res, err := second.Commit(ctx, job.CommitOptions{})
		require.NoError(t, err)
		assert.True(t, res.Recovered)
		p, _, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		assert.Equal(t, uint64(1), p.Seq, "committed exactly once")
		assert.Equal(t, p.Generation, res.Generation)
	})
}

func TestAbortDeletesTheJobAndRefusesACommit(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		tk, err := runTask(t, j, "t", "a", map[string]string{"x": "1"})
		require.NoError(t, err)
		require.NoError(t, j.Abort(ctx))
		assert.Empty(t, keysUnder(t, s, generation.Prefix(tk.Generation())))
		assert.Equal(t, []string{job.Prefix("j") + "commit"}, keysUnder(t, s, job.Dir))
		_, err = j.Commit(ctx, job.CommitOptions{})
		require.ErrorIs(t, err, job.ErrAborted)
		require.NoError(t, j.Abort(ctx), "abort again is a no-op")
	})
}

func TestAbortOfACommitWhoseOutcomeIsUnknownDeletesNothing(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		h := &hookStore{Store: s}
		d := commit.New(h)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		tk, err := runTask(t, j, "t", "a", map[string]string{"x": "1"})
		require.NoError(t, err)
		h.set(func(h *hookStore) {
			h.put = func(key string, _ []byte) (bool, error) {
				if key == pointer.Key {
					return false, errCrash
				}
				return false, nil
			}
			h.get = failPointerReadsAfterFirst()
		})
		_, err = j.Commit(ctx, job.CommitOptions{})
		require.ErrorIs(t, err, commit.ErrCommitUnknown)
		h.set(func(h *hookStore) { h.put = nil })
		err = j.Abort(ctx)
		require.ErrorIs(t, err, commit.ErrCommitUnknown)
		h.set(func(h *hookStore) { h.get = nil })
		err = j.Abort(ctx)
		require.ErrorIs(t, err, commit.ErrCommitUnknown, "a pointer write of the commit may still land")
		assert.NotEmpty(t, keysUnder(t, s, generation.Prefix(tk.Generation())), "nothing deleted")
		res, err := j.Commit(ctx, job.CommitOptions{})
		require.NoError(t, err, "commit settles it")
		assert.Equal(t, map[string]string{"x": "1"}, readAll(t, d))
		assert.False(t, res.Recovered)
	})
}

func TestTaskCommitWhoseOutcomeIsUnknownDeletesNothing(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		h := &hookStore{Store: s}
		d := commit.New(h)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		h.set(func(h *hookStore) {
			h.put = func(key string, _ []byte) (bool, error) {
				if strings.Contains(key, "/task/") {
					return true, errCrash
				}
				return false, nil
			}
			h.get = func(key string) error {
				if strings.Contains(key, "/task/") {
					return errCrash
				}
				return nil
			}
		})
		tk, err := runTask(t, j, "t", "a", map[string]string{"x": "1"})
		require.ErrorIs(t, err, commit.ErrCommitUnknown)
		assert.NotEmpty(t, keysUnder(t, s, generation.Prefix(tk.Generation())), "nothing deleted")
		h.set(func(h *hookStore) { h.put, h.get = nil, nil })
		_, err = j.Commit(ctx, job.CommitOptions{ExpectTasks: 1})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"x": "1"}, readAll(t, d), "the write had landed")
	})
}

// A forged task record that names an object outside its attempt's
// generation is refused: a job never adopts another generation's key.
func TestTaskRecordNamingAnotherGenerationsKeyIsRefused(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		g1, err := generation.New()
		require.NoError(t, err)
		g2, err := generation.New()
		require.NoError(t, err)
		rec := job.TaskRecord{Format: 1, Job: "j", Instance: j.Instance(), Task: "t", Attempt: "a", Generation: g1,
			Entries: []generation.Entry{{Path: "x", Key: generation.DataKey(g2, "x"), Size: 1, SHA256: strings.Repeat("0", 64)}}}
		b, err := json.Marshal(rec)
		require.NoError(t, err)
		_, err = s.Put(ctx, j.TaskKey("t"), bytes.NewReader(b), store.PutOptions{})
		require.NoError(t, err)
		_, err = j.Commit(ctx, job.CommitOptions{})
		require.ErrorIs(t, err, job.ErrCorrupt)
		_, _, err = pointer.Read(ctx, s)
		require.ErrorIs(t, err, store.ErrNotExist)
	})
}

func TestTaskOfAJobNeverBegunIsRefused(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		_, err := job.Open(context.Background(), commit.New(s), "nope")
		require.ErrorIs(t, err, job.ErrNoJob)
	})
}

// The job's staging start, not its commit's, is held against the
// collector's horizon: once the horizon reaches it, the tasks' objects may
// have been collected, and the commit is refused.
func TestJobCommitIsRefusedOnceTheHorizonPassesTheJobsStart(t *testing.T) {
	testenv.EachStoreAtOnce(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.PutBytes(ctx, "base", []byte("b")))
		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		_, err = runTask(t, j, "t", "a", map[string]string{"x": "1"})
		require.NoError(t, err)
		// Wait until the store's clock is past the job's start, so that a
		// commit's own staging start would be past the horizon below.
		for {
			_, attrs, err := pointer.Read(ctx, s)
			require.NoError(t, err)
			if attrs.ServerTime.After(j.StagingStart().Add(time.Second)) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		p, attrs, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		p.GCHorizon = j.StagingStart()
		p.WriteID = "horizon-moved"
		_, err = pointer.Write(ctx, s, p, attrs.ETag)
		require.NoError(t, err)
		_, err = j.Commit(ctx, job.CommitOptions{})
		require.ErrorIs(t, err, commit.ErrStale)
	})
}

// An abort that lands after a commit read the job's records, and before
// it starts its pointer writes, wins: the commit is refused, and no
// generation references the objects the abort deleted.
func TestAbortDuringACommitRefusesTheCommit(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		h := &hookStore{Store: s}
		d := commit.New(h)
		j, err := job.Begin(ctx, d, "j", job.Options{})
		require.NoError(t, err)
		_, err = runTask(t, j, "t", "a", map[string]string{"x": "1"})
		require.NoError(t, err)
		var once sync.Once
		h.set(func(h *hookStore) {
			h.get = func(key string) error {
				if key == pointer.Key {
					once.Do(func() { require.NoError(t, job.Abort(ctx, commit.New(s), "j")) })
				}
				return nil
			}
		})
		_, err = j.Commit(ctx, job.CommitOptions{})
		require.ErrorIs(t, err, job.ErrAborted)
		_, _, err = pointer.Read(ctx, s)
		require.ErrorIs(t, err, store.ErrNotExist, "nothing was committed")
	})
}

// noLastModified hides the Last-Modified of every object it returns.
type noLastModified struct{ store.Store }

func (n noLastModified) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	rc, attrs, err := n.Store.Get(ctx, key)
	attrs.LastModified = time.Time{}
	return rc, attrs, err
}

// A job whose record has no Last-Modified has no staging start to hold
// against the collector's horizon, and is refused.
func TestJobWithoutAStagingStartIsRefused(t *testing.T) {
	ctx := context.Background()
	s := noLastModified{testenv.LocalStores()[0].New(t)}
	_, err := job.Begin(ctx, commit.New(s), "j", job.Options{})
	require.ErrorContains(t, err, "staging start")
}
