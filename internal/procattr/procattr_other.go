//go:build !linux

package procattr

import "syscall"

// DieWithParent: this system has no parent-death signal, so a child of a
// test process that is killed outright keeps running until stopped by hand;
// tests stop their children in every other case.
func DieWithParent() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
