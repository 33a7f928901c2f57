package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// syncAll makes everything written below dir durable with one syncfs(2) of
// its file system, instead of an fsync per file.
func syncAll(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// exchange swaps the paths a and b atomically (renameat2 RENAME_EXCHANGE).
// It fails with EINVAL, ENOSYS or EOPNOTSUPP where the kernel or the file
// system cannot.
func exchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// becomeSubreaper makes the orphans of our descendants our children
// (PR_SET_CHILD_SUBREAPER), so that we can reap them.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}
