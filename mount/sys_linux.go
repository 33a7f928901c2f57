package mount

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// fuseDevice is the kernel's FUSE device.
var fuseDevice = "/dev/fuse"

// directMountFlags mount read-only, without setuid or device files.
const directMountFlags = syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_RDONLY

// checkDevice says, with ErrNoFUSE, why FUSE cannot be used when its
// device is missing or cannot be opened.
func checkDevice(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	switch {
	case err == nil:
		return f.Close()
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("mount: %w: there is no %s (load the fuse kernel module; in a container, run it with --device /dev/fuse --cap-add SYS_ADMIN)", ErrNoFUSE, dev)
	default:
		return fmt.Errorf("mount: %w: %v", ErrNoFUSE, err)
	}
}

// mountError names the mount point, and marks with ErrNoFUSE a mount this
// process may not make.
func mountError(dir string, err error) error {
	msg := err.Error()
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) ||
		strings.Contains(msg, "fusermount") || strings.Contains(msg, "executable file not found") {
		return fmt.Errorf("mount: %w: cannot mount %s: %v (mount as root, or install fusermount3, Debian's package fuse3)", ErrNoFUSE, dir, err)
	}
	return fmt.Errorf("mount: cannot mount %s: %w", dir, err)
}

// detach unmounts dir lazily: it leaves the mount table at once, and goes
// away when no process uses it any more.
func detach(dir string) error { return syscall.Unmount(dir, syscall.MNT_DETACH) }
