package procattr

import "syscall"

// DieWithParent makes the kernel kill the child when the process that
// started it dies, even by SIGKILL, so that no helper outlives its test.
func DieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
