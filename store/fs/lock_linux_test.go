package fs_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/fs"
)

// TestLockFollowsReplacedDir: a Delete waits for the lock of the object's
// directory; meanwhile that directory is moved away and the object written
// again in a new directory, whose lock another process holds. The Delete
// must not act on the new directory under the old directory's lock: it
// waits for the new one's. Waiters are seen in /proc/locks.
func TestLockFollowsReplacedDir(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	a := put(t, s, "d/k", "v")
	dir := filepath.Join(s.Root(), "d")
	releaseOld := holdDirLock(t, dir)
	defer releaseOld()
	oldIno := inode(t, dir)

	done := make(chan error, 1)
	go func() { done <- s.Delete(ctx, "d/k", store.DeleteOptions{IfMatch: a.ETag}) }()
	waitForWaiter(t, oldIno, done)

	require.NoError(t, os.Rename(dir, filepath.Join(s.Root(), "moved")))
	b := put(t, s, "d/k", "v")
	require.Equal(t, a.ETag, b.ETag, "the same body, so the Delete's condition holds")
	releaseNew := holdDirLock(t, dir)
	defer releaseNew()
	releaseOld()
	waitForWaiter(t, inode(t, dir), done)

	releaseNew()
	require.NoError(t, <-done)
	_, err := s.Head(ctx, "d/k")
	require.ErrorIs(t, err, store.ErrNotExist)
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Ino
}

// waitForWaiter waits until /proc/locks shows a process blocked on the
// flock of the file with inode ino. It fails if done reports first: the
// call it waits for returned instead of waiting for the lock.
func waitForWaiter(t *testing.T, ino uint64, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-done:
			require.Failf(t, "returned without waiting for the lock", "inode %d, error %v", ino, err)
		default:
		}
		if flockWaiters(t, ino) > 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "no waiter for inode %d in /proc/locks", ino)
		time.Sleep(time.Millisecond)
	}
}

// TestLockQueue: writers of one directory in one process wait for its
// flock one at a time, in the order they came. Another process holds the
// flock while four writers arrive; only the first waits on the flock (one
// waiter in /proc/locks), the others wait their turn in the process, and
// once the flock is free they publish in the order they came.
func TestLockQueue(t *testing.T) {
	const writers = 4
	s := newStore(t)
	put(t, s, "d/k", "0")
	dir := filepath.Join(s.Root(), "d")
	release := holdDirLock(t, dir)
	defer release()
	ino := inode(t, dir)

	type result struct {
		i   int
		a   store.Attrs
		err error
	}
	results := make(chan result, writers)
	for i := 1; i <= writers; i++ {
		go func() {
			a, err := s.Put(context.Background(), "d/k", strings.NewReader(strconv.Itoa(i)), store.PutOptions{})
			results <- result{i, a, err}
		}()
		waitFor(t, results, func() bool { return fs.Queued(dir) == i }, "writer %d joins the queue", i)
		if i == 1 {
			waitForWaiter(t, ino, nil)
		}
	}
	require.Equal(t, 1, flockWaiters(t, ino), "only the first writer waits on the flock")

	release()
	modified := make([]time.Time, writers+1)
	for range writers {
		r := <-results
		require.NoError(t, r.err, "writer %d", r.i)
		modified[r.i] = r.a.LastModified
	}
	for i := 2; i <= writers; i++ {
		assert.False(t, modified[i].Before(modified[i-1]), "writer %d published before writer %d", i, i-1)
	}
	assert.Equal(t, strconv.Itoa(writers), read(t, s, "d/k"), "the last to come publishes last")
	assert.Zero(t, fs.Queued(dir), "the queue is gone with its last writer")
}

// TestLockWaitCoversQueue: the lock wait bounds a write's whole wait, its
// turn in the process's queue included. A writer without a limit waits on
// a flock that another process holds; a writer of a store with a short
// lock wait, queued behind it, gives up with ErrLockWait while the first
// still waits, and leaves the queue.
func TestLockWaitCoversQueue(t *testing.T) {
	patient := newStore(t)
	patient.SetLockWait(0)
	put(t, patient, "d/k", "0")
	dir := filepath.Join(patient.Root(), "d")
	release := holdDirLock(t, dir)
	defer release()
	hasty, err := fs.New(patient.Root())
	require.NoError(t, err)
	hasty.SetLockWait(100 * time.Millisecond)

	first := make(chan error, 1)
	go func() {
		_, err := patient.Put(context.Background(), "d/k", strings.NewReader("1"), store.PutOptions{})
		first <- err
	}()
	waitForWaiter(t, inode(t, dir), first)

	second := make(chan error, 1)
	go func() {
		_, err := hasty.Put(context.Background(), "d/k", strings.NewReader("2"), store.PutOptions{})
		second <- err
	}()
	select {
	case err = <-second:
	case <-time.After(time.Minute):
		require.Fail(t, "the second writer still waits for its turn, a minute past its lock wait")
	}
	require.ErrorIs(t, err, fs.ErrLockWait)
	assert.Contains(t, err.Error(), dir)
	select {
	case err := <-first:
		require.Failf(t, "the first writer returned while the flock was held", "error %v", err)
	default:
	}
	assert.Equal(t, 1, fs.Queued(dir), "the writer that gave up left the queue")

	release()
	require.NoError(t, <-first)
	assert.Equal(t, "1", read(t, patient, "d/k"))
}

// TestLockReleasedBeforeSync: a write fsyncs its directory after it has
// released the directory's lock, so the next writer does not wait for the
// sync, but it reports success only once the sync is done. The sync of a
// Put and of a Delete is held; meanwhile another process takes the flock
// at once, and the write has not returned.
func TestLockReleasedBeforeSync(t *testing.T) {
	s := newStore(t)
	a := put(t, s, "d/k", "0")
	dir := filepath.Join(s.Root(), "d")

	held := make(chan string)
	proceed := make(chan struct{})
	defer fs.SetSyncDir(func(f *os.File) error {
		held <- f.Name()
		<-proceed
		return f.Sync()
	})()

	for _, op := range []struct {
		name  string
		write func() error
	}{
		{"put", func() error {
			_, err := s.Put(context.Background(), "d/k", strings.NewReader("1"), store.PutOptions{IfMatch: a.ETag})
			return err
		}},
		{"delete", func() error { return s.Delete(context.Background(), "d/k", store.DeleteOptions{}) }},
	} {
		done := make(chan error, 1)
		go func() { done <- op.write() }()
		select {
		case name := <-held:
			require.Equal(t, dir, name, op.name)
		case err := <-done:
			require.Failf(t, "returned without syncing its directory", "%s: error %v", op.name, err)
		case <-time.After(time.Minute):
			require.Failf(t, "no sync", op.name)
		}
		f, err := os.Open(dir)
		require.NoError(t, err)
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		f.Close()
		require.NoError(t, err, "%s: the lock is free while the directory syncs", op.name)
		assert.Zero(t, fs.Queued(dir), op.name)
		select {
		case err := <-done:
			require.Failf(t, "returned before its sync was done", "%s: error %v", op.name, err)
		default:
		}
		proceed <- struct{}{}
		require.NoError(t, <-done, op.name)
	}
	_, err := s.Head(context.Background(), "d/k")
	require.ErrorIs(t, err, store.ErrNotExist)
}

// flockWaiters counts the flock waiters of the file with inode ino in
// /proc/locks.
func flockWaiters(t *testing.T, ino uint64) int {
	t.Helper()
	b, err := os.ReadFile("/proc/locks")
	require.NoError(t, err)
	suffix := ":" + strconv.FormatUint(ino, 10)
	n := 0
	for l := range strings.Lines(string(b)) {
		f := strings.Fields(l)
		if len(f) > 6 && f[1] == "->" && f[2] == "FLOCK" && strings.HasSuffix(f[6], suffix) {
			n++
		}
	}
	return n
}

// waitFor polls cond for up to a minute. It fails if a writer reports on
// results first: it returned instead of waiting.
func waitFor[T any](t *testing.T, results <-chan T, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		select {
		case r := <-results:
			require.Failf(t, "a writer returned while the flock was held", "%v", r)
		default:
		}
		require.True(t, time.Now().Before(deadline), append([]any{"timed out: " + msg}, args...)...)
		time.Sleep(time.Millisecond)
	}
}
