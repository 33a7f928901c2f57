package fs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

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

// TestGaveUpWriterLeavesOneFlockRequest: a write that gives up waiting for
// its directory's flock (its context is done; the lock wait runs out the
// same way) leaves its flock request in the kernel, since a blocked
// flock(2) cannot be called off. Such requests must not pile up: if each
// write that gives up against a paused holder left one behind, with an
// open descriptor and a goroutine, the process would have several waiters
// on the flock at once (a herd in which one writer can starve) and leak a
// descriptor per attempt. The request left over keeps the queue's turn
// until it is granted, so the writers after it wait in the queue instead.
//
// Another process holds the flock (a descriptor of this test, as in
// holdDirLock); three writers in turn wait and are cancelled. The process
// never has more than one request on the flock nor more than one
// descriptor of the directory besides the holder's, and once the holder
// lets go, nothing of the writers is left.
func TestGaveUpWriterLeavesOneFlockRequest(t *testing.T) {
	const writers = 3
	s := newStore(t)
	s.SetLockWait(0)
	put(t, s, "d/k", "0")
	dir := filepath.Join(s.Root(), "d")
	release := holdDirLock(t, dir)
	defer release()
	ino := inode(t, dir)
	require.Equal(t, 1, openDescriptors(t, dir), "the holder's")

	for i := 1; i <= writers; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := s.Put(ctx, "d/k", strings.NewReader(strconv.Itoa(i)), store.PutOptions{})
			done <- err
		}()
		if i == 1 {
			waitFor(t, done, func() bool { return flockWaiters(t, ino) == 1 }, "writer 1 waits on the flock")
		} else {
			waitFor(t, done, func() bool { return fs.Queued(dir) == 2 }, "writer %d waits behind the request left over", i)
		}
		cancel()
		require.ErrorIs(t, <-done, context.Canceled, "writer %d", i)
		assert.Equal(t, 1, flockWaiters(t, ino), "after writer %d: one request on the flock, the first writer's", i)
		assert.Equal(t, 2, openDescriptors(t, dir), "after writer %d: the holder's descriptor and the first writer's", i)
	}

	release()
	waitFor[error](t, nil, func() bool { return fs.Queued(dir) == 0 }, "the request left over is granted and leaves the queue")
	assert.Zero(t, flockWaiters(t, ino))
	assert.Zero(t, openDescriptors(t, dir), "nothing of the writers is left")
	put(t, s, "d/k", "after")
	assert.Equal(t, "after", read(t, s, "d/k"))
}

// openDescriptors counts this process's descriptors open on path.
func openDescriptors(t *testing.T, path string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// TestQueuedWritersFollowReplacedDir: writers queued behind one another on
// the flock of a directory that is moved away and made again at its path,
// with the new one's lock held by another process, must all move to the new
// directory's lock: none may act under the old directory's flock or queue.
// Three Deletes with IfMatch queue on the old directory (one on its flock,
// two in the process's queue); the old directory's flock is released only
// once the new one's is held, so each must be seen waiting on the new flock,
// and only then may they run.
func TestQueuedWritersFollowReplacedDir(t *testing.T) {
	const writers = 3
	s := newStore(t)
	s.SetLockWait(0)
	a := put(t, s, "d/k", "v")
	dir := filepath.Join(s.Root(), "d")
	releaseOld := holdDirLock(t, dir)
	defer releaseOld()
	oldIno := inode(t, dir)

	done := make(chan error, writers)
	for i := 1; i <= writers; i++ {
		go func() { done <- s.Delete(context.Background(), "d/k", store.DeleteOptions{IfMatch: a.ETag}) }()
		waitFor(t, done, func() bool { return fs.Queued(dir) == i }, "writer %d joins the queue", i)
	}
	waitForWaiter(t, oldIno, done)

	require.NoError(t, os.Rename(dir, filepath.Join(s.Root(), "moved")))
	b := put(t, s, "d/k", "v")
	require.Equal(t, a.ETag, b.ETag)
	releaseNew := holdDirLock(t, dir)
	defer releaseNew()
	newIno := inode(t, dir)
	releaseOld()
	// All three leave the old directory and queue on the new one.
	waitFor(t, done, func() bool { return fs.Queued(dir) == writers }, "the writers queue on the new directory")
	waitForWaiter(t, newIno, done)
	assert.Zero(t, flockWaiters(t, oldIno), "nobody waits on the old directory")
	assert.Equal(t, 1, flockWaiters(t, newIno), "one writer waits on the new directory's flock")
	select {
	case err := <-done:
		require.Failf(t, "a writer returned while the new directory's flock was held", "error %v", err)
	default:
	}

	releaseNew()
	for range writers {
		require.NoError(t, <-done)
	}
	_, err := s.Head(context.Background(), "d/k")
	require.ErrorIs(t, err, store.ErrNotExist)
	assert.Equal(t, "v", read(t, s, "moved/k"), "the old directory's object is untouched")
}

// TestMutexAcrossSpellingsUnderPruneAndCancel: a mutex built from
// create-if-absent, CAS and conditional delete, whose directory is pruned by
// every release and made again by the next acquire, used at once through
// three spellings (a root, a store rooted at its subdirectory, a symbolic
// link to the root), by patient writers and by writers with a lock wait of a
// millisecond (which fail with ErrLockWait and must then have written
// nothing), while noise writers create and delete a sibling key with
// contexts cancelled at random (which leave flock requests behind, see
// TestGaveUpWriterLeavesOneFlockRequest). Two holders at once, a CAS of a
// holder failing, or a create or delete that reported ErrLockWait yet wrote,
// fail the test (the last as a holder that finds its own create already
// done, or a mutex stuck forever).
func TestMutexAcrossSpellingsUnderPruneAndCancel(t *testing.T) {
	const workers, holds, noise = 6, 30, 3
	root, link := linkedRoot(t)
	outer, err := fs.New(root)
	require.NoError(t, err)
	inner, err := fs.New(filepath.Join(root, "sub"))
	require.NoError(t, err)
	linked, err := fs.New(link)
	require.NoError(t, err)
	// Keep sub, the inner store's root, from being pruned.
	put(t, outer, "sub/keep", "x")

	type way struct {
		s   *fs.Store
		key string
	}
	ways := []way{{outer, "sub/m/mutex"}, {inner, "m/mutex"}, {linked, "sub/m/mutex"}}
	hasty := func(w way) way {
		s, err := fs.New(w.s.Root())
		require.NoError(t, err)
		s.SetLockWait(time.Millisecond)
		return way{s, w.key}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a bound for a loaded machine, not a measure
	defer cancel()
	var holders atomic.Int32
	var lockWaits atomic.Int64
	var stop atomic.Bool
	// retry repeats op while it fails with ErrLockWait.
	retry := func(op func() error) error {
		for {
			err := op()
			if !errors.Is(err, fs.ErrLockWait) || ctx.Err() != nil {
				return err
			}
			lockWaits.Add(1)
			runtime.Gosched()
		}
	}
	var g errgroup.Group
	for w := range workers {
		wy := ways[w%len(ways)]
		if w%2 == 1 {
			wy = hasty(wy)
		}
		g.Go(func() error {
			for i := 0; i < holds; {
				body := fmt.Sprintf("%d-%d", w, i)
				var a store.Attrs
				err := retry(func() error {
					var err error
					a, err = wy.s.Put(ctx, wy.key, strings.NewReader(body), store.PutOptions{IfNoneMatch: true})
					return err
				})
				if errors.Is(err, store.ErrPrecondition) && ctx.Err() == nil {
					if got := readString(ctx, wy.s, wy.key); got == body {
						return fmt.Errorf("worker %d: its create failed, yet the mutex holds its body %q", w, body)
					}
					runtime.Gosched()
					continue
				}
				if err != nil {
					return fmt.Errorf("worker %d: acquire: %w", w, err)
				}
				if n := holders.Add(1); n != 1 {
					return fmt.Errorf("worker %d: %d holders at once", w, n)
				}
				if got := readString(ctx, wy.s, wy.key); got != body {
					return fmt.Errorf("holder %s reads %q", body, got)
				}
				err = retry(func() error {
					var err error
					a, err = wy.s.Put(ctx, wy.key, strings.NewReader(body+"+"), store.PutOptions{IfMatch: a.ETag})
					return err
				})
				if err != nil {
					return fmt.Errorf("holder %s: CAS: %w", body, err)
				}
				holders.Add(-1)
				err = retry(func() error {
					return wy.s.Delete(ctx, wy.key, store.DeleteOptions{IfMatch: a.ETag})
				})
				if err != nil {
					return fmt.Errorf("holder %s: release: %w", body, err)
				}
				i++
			}
			return nil
		})
	}
	var ng errgroup.Group
	for n := range noise {
		wy := ways[n%len(ways)]
		key := strings.TrimSuffix(wy.key, "mutex") + "noise" + strconv.Itoa(n)
		ng.Go(func() error {
			for i := 0; !stop.Load(); i++ {
				cctx, ccancel := context.WithCancel(ctx)
				if i%3 == 0 {
					ccancel() // some writes give up at once, some while they wait
				} else {
					go func() { runtime.Gosched(); ccancel() }()
				}
				_, err := wy.s.Put(cctx, key, strings.NewReader("n"), store.PutOptions{})
				ccancel()
				if err != nil && !errors.Is(err, context.Canceled) {
					return fmt.Errorf("noise %d: put: %w", n, err)
				}
				if err := wy.s.Delete(ctx, key, store.DeleteOptions{}); err != nil {
					return fmt.Errorf("noise %d: delete: %w", n, err)
				}
			}
			return nil
		})
	}
	err = g.Wait()
	stop.Store(true)
	require.NoError(t, err)
	require.NoError(t, ng.Wait())
	t.Logf("%d writes gave up on the lock wait and were retried", lockWaits.Load())
	_, err = outer.Head(context.Background(), "sub/m/mutex")
	require.ErrorIs(t, err, store.ErrNotExist, "the last holder released")
}
