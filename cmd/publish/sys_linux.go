package main

import "golang.org/x/sys/unix"

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
