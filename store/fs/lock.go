package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
)

// A dirLock is the lock of one directory, held: the directory's flock,
// taken through f, and this process's turn in the directory's queue.
type dirLock struct {
	f     *os.File
	leave func() // gives up the turn in the queue
	done  bool
}

// lock takes the exclusive flock that guards every mutation of the keys
// whose object files lie in dir: the flock of dir itself. Every path that
// reaches an object file, through this root, another root above or below
// it, or a symbolic link, reaches the same directory, so every spelling of
// one object meets the same lock, in every process.
//
// The writers of one directory in this process first take turns in a queue
// of their own (see enqueue), so that at most one of them waits for the
// flock at a time. flock(2) wakes every waiter when the lock is released
// and lets the first to run win; without the queue, one writer could lose
// that race round after round on a busy machine.
//
// lock waits until the lock is free or ctx is done, and at most the
// store's lock wait in all: queue and flock together. A directory can be
// pruned (and made again) while a caller waits for its lock, so lock
// checks, once it holds the flock, that dir still names the directory it
// locked, and tries again if not. It fails with an error matching
// fs.ErrNotExist when dir is gone.
func (s *Store) lock(ctx context.Context, dir string) (*dirLock, error) {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if s.lockWait > 0 {
		wctx, cancel = context.WithTimeoutCause(ctx, s.lockWait, errLockWait)
	}
	defer cancel()
	for {
		f, err := os.Open(dir)
		if err != nil {
			return nil, err
		}
		held, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		leave, err := enqueue(wctx, held)
		if err != nil {
			f.Close()
			return nil, s.waitErr(wctx, dir, err)
		}
		if err := flockCtx(wctx, f, leave); err != nil {
			return nil, s.waitErr(wctx, dir, err)
		}
		now, err := os.Stat(dir)
		if err == nil && os.SameFile(held, now) {
			return &dirLock{f: f, leave: leave}, nil
		}
		f.Close()
		leave()
		if err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// release gives the lock up: closing the only descriptor of the flock
// releases it, then the queue's turn goes to the next writer. It does
// nothing on a lock released already.
func (l *dirLock) release() {
	if l.done {
		return
	}
	l.done = true
	l.f.Close()
	l.leave()
}

// releaseSynced gives the lock up, then fsyncs the directory it locked,
// making the entry its holder renamed, linked or removed durable. The
// rename is atomic under the lock, and the sync needs no lock: so the next
// writer of the directory need not wait for it. A write reports success
// only after its own sync, which also covers the entries of writers before
// it.
func (l *dirLock) releaseSynced() error {
	if l.done {
		return nil
	}
	l.done = true
	// Closing f would release the flock too, but f is still needed for
	// the sync. An unlock that fails leaves the flock to the close below.
	_ = flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.leave()
	err := syncDirFile(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDirFile fsyncs an open directory. Tests replace it to hold a sync.
var syncDirFile = (*os.File).Sync

// waitErr turns the error of a wait for the lock of dir, under wctx, into
// the one lock returns: ErrLockWait when the store's lock wait ran out.
func (s *Store) waitErr(wctx context.Context, dir string, err error) error {
	if errors.Is(context.Cause(wctx), errLockWait) {
		return fmt.Errorf("fs: the lock of directory %s is still held after %s, by another process or by a write of this one that waits for it (a process paused or stuck inside a write holds it until it resumes or exits; --timeout sets the wait): %w", dir, s.lockWait, ErrLockWait)
	}
	return err
}

// ErrLockWait is matched by the error of a write that gave up waiting for
// the lock of its object's directory. Nothing was written.
var ErrLockWait = errors.New("fs: lock wait exceeded")

var errLockWait = errors.New("lock wait")

// queues holds this process's queue of writers for each directory that a
// writer holds or waits for, by its device and inode: every spelling of
// one directory is one queue, and a directory made again where one was
// pruned is another. (A writer closes the directory just before it leaves
// the queue, so a new directory can take the inode of a pruned one while
// the old queue is still there; for that moment the writers of the two
// share a turn, which delays them and nothing else: the flock is what
// excludes.)
var queues = struct {
	sync.Mutex
	m map[fileID]*queue
}{m: map[fileID]*queue{}}

type fileID struct{ dev, ino uint64 }

func idOf(fi os.FileInfo) fileID {
	st := fi.Sys().(*syscall.Stat_t)
	return fileID{uint64(st.Dev), st.Ino}
}

// A queue is in queues while a writer has the turn.
type queue struct {
	waiters []chan struct{} // the writers waiting for the turn, in the order they came; closed to hand it over
}

// enqueue waits for this process's turn at the flock of the directory dir,
// first come, first served, or until ctx is done. A writer's place is
// fixed when it joins, under the lock of queues. It returns the function
// that gives the turn up, to the next writer in line.
func enqueue(ctx context.Context, dir os.FileInfo) (leave func(), err error) {
	id := idOf(dir)
	leave = func() { handOver(id) }
	queues.Lock()
	q := queues.m[id]
	if q == nil {
		queues.m[id] = &queue{}
		queues.Unlock()
		return leave, nil
	}
	turn := make(chan struct{})
	q.waiters = append(q.waiters, turn)
	queues.Unlock()
	select {
	case <-turn:
		return leave, nil
	case <-ctx.Done():
	}
	queues.Lock()
	if i := slices.Index(q.waiters, turn); i >= 0 {
		q.waiters = slices.Delete(q.waiters, i, i+1)
		queues.Unlock()
		return nil, ctx.Err()
	}
	queues.Unlock()
	leave() // the turn came as ctx ended: pass it on
	return nil, ctx.Err()
}

// handOver gives the turn at the directory id to the next writer in line,
// or ends the queue if none waits.
func handOver(id fileID) {
	queues.Lock()
	defer queues.Unlock()
	q := queues.m[id]
	if len(q.waiters) > 0 {
		close(q.waiters[0])
		q.waiters = q.waiters[1:]
		return
	}
	delete(queues.m, id)
}

// flockCtx takes an exclusive flock on f, waiting until it is free or ctx
// is done. On failure it closes f and gives up the queue's turn with
// leave.
//
// A flock(2) that blocks cannot be called off: when ctx ends the wait, the
// request stays in the kernel until it is granted. So the turn is given up
// only then, when the request has been granted and f closed: until then,
// the process's next writer of the directory waits in the queue, not on
// the flock beside the request left over, and one directory never has
// more than one of this process's requests waiting, however many writers
// give up against a paused holder.
func flockCtx(ctx context.Context, f *os.File, leave func()) error {
	fd := int(f.Fd())
	if err := flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return nil
	} else if !errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		leave()
		return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
	}
	// Contended: block in a goroutine so that ctx can end the wait.
	done := make(chan error, 1)
	go func() { done <- flock(fd, syscall.LOCK_EX) }()
	select {
	case err := <-done:
		if err != nil {
			f.Close()
			leave()
			return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
		}
		return nil
	case <-ctx.Done():
		go func() {
			<-done //nolint:errcheck // closing f releases the lock if flock took it
			f.Close()
			leave()
		}()
		return ctx.Err()
	}
}

// flock calls flock(2), retrying when a signal interrupts it.
func flock(fd, how int) error {
	for {
		err := syscall.Flock(fd, how)
		if err != syscall.EINTR {
			return err
		}
	}
}
