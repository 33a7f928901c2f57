package fs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lock takes the exclusive flock that guards every mutation of the keys
// whose object files lie in dir: the flock of dir itself. Every path that
// reaches an object file, through this root, another root above or below
// it, or a symbolic link, reaches the same directory, so every spelling of
// one object meets the same lock, in every process. It waits until the
// lock is free or ctx is done, and returns the function that releases it.
//
// A directory can be pruned (and made again) while a caller waits for its
// lock, so lock checks, once it holds the flock, that dir still names the
// directory it locked, and tries again if not. It fails with an error
// matching fs.ErrNotExist when dir is gone.
func (s *Store) lock(ctx context.Context, dir string) (unlock func(), err error) {
	for {
		f, err := os.Open(dir)
		if err != nil {
			return nil, err
		}
		if err := s.flockBounded(ctx, f, dir); err != nil {
			return nil, err
		}
		held, err := f.Stat()
		if err == nil {
			var now os.FileInfo
			now, err = os.Stat(dir)
			if err == nil && os.SameFile(held, now) {
				return func() { f.Close() }, nil // closing the only descriptor releases the flock
			}
		}
		f.Close()
		if err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// flockBounded takes the flock of dir through f like flockCtx, waiting at
// most the store's lock wait.
func (s *Store) flockBounded(ctx context.Context, f *os.File, dir string) error {
	if s.lockWait <= 0 {
		return flockCtx(ctx, f)
	}
	wctx, cancel := context.WithTimeoutCause(ctx, s.lockWait, errLockWait)
	defer cancel()
	err := flockCtx(wctx, f)
	if err != nil && errors.Is(context.Cause(wctx), errLockWait) {
		return fmt.Errorf("fs: the lock of directory %s is still held by another process after %s (a process paused or stuck inside a write holds it until it resumes or exits; --timeout sets the wait): %w", dir, s.lockWait, ErrLockWait)
	}
	return err
}

// ErrLockWait is matched by the error of a write that gave up waiting for
// the lock of its object's directory. Nothing was written.
var ErrLockWait = errors.New("fs: lock wait exceeded")

var errLockWait = errors.New("lock wait")

// flockCtx takes an exclusive flock on f, waiting until it is free or ctx
// is done. On failure it closes f.
func flockCtx(ctx context.Context, f *os.File) error {
	fd := int(f.Fd())
	if err := flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return nil
	} else if !errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
	}
	// Contended: block in a goroutine so that ctx can end the wait.
	done := make(chan error, 1)
	go func() { done <- flock(fd, syscall.LOCK_EX) }()
	select {
	case err := <-done:
		if err != nil {
			f.Close()
			return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
		}
		return nil
	case <-ctx.Done():
		go func() {
			<-done
			f.Close()
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
