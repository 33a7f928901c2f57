package job_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/job"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// jobCost runs a job of tasks tasks, one file each, and returns what the
// tasks' commits and the job's commit cost, data and opening aside.
func jobCost(t *testing.T, s store.Store, tasks int) (taskCost, commitCost store.Counts) {
	t.Helper()
	ctx := context.Background()
	c := store.Count(s)
	d := commit.New(c)
	j, err := job.Begin(ctx, d, "j", job.Options{})
	require.NoError(t, err)
	for i := range tasks {
		tk, err := j.Task("t"+strconv.Itoa(i), "a", "test")
		require.NoError(t, err)
		require.NoError(t, tk.Tx().PutBytes(ctx, "part-"+strconv.Itoa(i), []byte("v")))
		before := c.Counts()
		_, err = tk.Commit(ctx)
		require.NoError(t, err)
		taskCost = addCounts(taskCost, c.Counts().Sub(before))
	}
	before := c.Counts()
	res, err := j.Commit(ctx, job.CommitOptions{ExpectTasks: tasks, Replace: true})
	require.NoError(t, err)
	require.Equal(t, tasks, res.Files)
	return taskCost, c.Counts().Sub(before)
}

func addCounts(a, b store.Counts) store.Counts {
	for i := range a {
		a[i] += b[i]
	}
	return a
}

// commitWant is the cost of the commit of a job of tasks tasks: 1 LIST page
// per 1,000 records, the task records' GETs, the job record's GET once the
// commit record is in place, and for the commit itself 1 pointer GET, 1
// manifest PUT and 1 pointer PUT, besides the commit record written before
// the pointer ("committing") and after it ("committed") and 1 DeleteMany
// per 1,000 records removed.
func commitWant(tasks int) store.Counts {
	var want store.Counts
	want[store.OpList] = int64((tasks + 2 + 999) / 1000) // the tasks, the job record and no commit record yet
	want[store.OpGet] = int64(tasks) + 2
	want[store.OpPut] = 1 + 1 + 1 + 1
	want[store.OpDeleteMany] = int64((tasks + 1 + 999) / 1000)
	return want
}

// TestJobCostIsOneRecordPerTaskAndOneCommit: a job of T tasks costs T
// task-record PUTs, and its commit 1 LIST page per 1,000 tasks, T+1 GETs,
// 1 manifest PUT and 1 pointer GET and PUT (with the commit record's two
// PUTs and the records' removal), whatever the data.
func TestJobCostIsOneRecordPerTaskAndOneCommit(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		const tasks = 5
		taskCost, commitCost := jobCost(t, s, tasks)
		var want store.Counts
		want[store.OpPut] = tasks
		require.Equal(t, want, taskCost, "the task commits")
		require.Equal(t, commitWant(tasks), commitCost, "the job commit")
	})
}

// The LIST grows by one page per 1,000 tasks, and nothing else but the
// records' GETs grows with the tasks.
func TestJobCostOfManyTasksListsOnePagePerThousand(t *testing.T) {
	const tasks = 1500
	taskCost, commitCost := jobCost(t, mem.New(), tasks)
	var want store.Counts
	want[store.OpPut] = tasks
	require.Equal(t, want, taskCost)
	require.Equal(t, commitWant(tasks), commitCost)
	require.Equal(t, int64(2), commitCost[store.OpList])
}
