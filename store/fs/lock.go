package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// lock takes the exclusive flock that guards every mutation of key, waiting
// until it is free or ctx is done. It returns the function that releases it.
// The lock files are shared by keys whose SHA-256 starts with the same three
// hex digits, which bounds their number; sharing only costs some waiting.
func (s *Store) lock(ctx context.Context, key string) (unlock func(), err error) {
	sum := sha256.Sum256([]byte(key))
	p := filepath.Join(s.root, lockDir, hex.EncodeToString(sum[:2])[:3])
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(filepath.Dir(p), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		f, err = os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	}
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	unlock = func() { f.Close() } // closing the only descriptor releases the flock
	if err := flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		return unlock, nil
	} else if !errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, &os.PathError{Op: "flock", Path: p, Err: err}
	}
	// Contended: block in a goroutine so that ctx can end the wait.
	done := make(chan error, 1)
	go func() { done <- flock(fd, syscall.LOCK_EX) }()
	select {
	case err := <-done:
		if err != nil {
			f.Close()
			return nil, &os.PathError{Op: "flock", Path: p, Err: err}
		}
		return unlock, nil
	case <-ctx.Done():
		go func() {
			<-done
			f.Close()
		}()
		return nil, ctx.Err()
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
