//go:build linux

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
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/fs"
)

// Adversarial tests of the fs driver's directory lock (commit 3dfcb10: the
// per-process queue, the lock wait over queue and flock, and the sync after
// release).

// TestAdversaryGaveUpWriterLeavesFlock: a write that gives up waiting for
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
func TestAdversaryGaveUpWriterLeavesFlock(t *testing.T) {
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

// TestAdversaryQueueOnReplacedDir (regression; holds): writers queued
// behind one another on the flock of a directory that is moved away and
// made again at its path, with the new one's lock held by another process,
// must all move to the new directory's lock: none may act under the old
// directory's flock or queue. Three Deletes with IfMatch queue on the old
// directory (one on its flock, two in the process's queue); the old
// directory's flock is released only once the new one's is held, so each
// must be seen waiting on the new flock, and only then may they run.
func TestAdversaryQueueOnReplacedDir(t *testing.T) {
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

// TestAdversaryMutexSpellingsPruneCancel (regression stress; holds): a
// mutex built from create-if-absent, CAS and conditional delete, whose
// directory is pruned by every release and made again by the next
// acquire, used at once through three spellings (a root, a store rooted at
// its subdirectory, a symbolic link to the root), by patient writers and
// by writers with a lock wait of a millisecond (which fail with
// ErrLockWait and must then have written nothing), while noise writers
// create and delete a sibling key with contexts cancelled at random (which
// leave flock requests behind, see TestAdversaryGaveUpWriterLeavesFlock).
// Two holders at once, a CAS of a holder failing, or a create or delete
// that reported ErrLockWait yet wrote, fail the test (the last as a holder
// that finds its own create already done, or a mutex stuck forever).
func TestAdversaryMutexSpellingsPruneCancel(t *testing.T) {
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
