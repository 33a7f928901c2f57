//go:build !linux

package mount

import (
	"fmt"
)

var fuseDevice = ""

const directMountFlags = 0

func checkDevice(string) error { return nil }

func mountError(dir string, err error) error {
	return fmt.Errorf("mount: cannot mount %s: %w (is macFUSE installed?)", dir, err)
}

func detach(dir string) error { return fmt.Errorf("mount: %s is busy", dir) }
