//go:build !linux && !darwin

package main

import "syscall"

// exchange reports that this system has no atomic swap of two paths; the
// caller renames the old one aside instead.
func exchange(a, b string) error { return syscall.ENOSYS }
