package main

import "golang.org/x/sys/unix"

// exchange swaps the paths a and b atomically (renamex_np RENAME_SWAP). It
// fails with ENOTSUP (EOPNOTSUPP) where the file system cannot.
func exchange(a, b string) error {
	return unix.RenamexNp(a, b, unix.RENAME_SWAP)
}
