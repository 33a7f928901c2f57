//go:build linux

package mount

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commitptr/commitptr/internal/testenv"
)

// TestMain first detaches the mounts of this package's tests that a test
// process which died (killed, or timed out) left behind: a FUSE mount
// whose server is gone answers ENOTCONN, and stays in the mount table
// until it is unmounted. It runs the tests through testenv.Main, which
// stops the test servers they started.
func TestMain(m *testing.M) {
	if err := detachDead(os.TempDir()); err != nil {
		fmt.Fprintln(os.Stderr, "detaching dead mounts:", err)
	}
	os.Exit(testenv.Main(m))
}

func detachDead(under string) error {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[2] != "fuse.commitptr" || !strings.HasPrefix(f[1], under+"/") {
			continue
		}
		if errors.Is(statWithin(f[1], 10*time.Second), syscall.ENOTCONN) {
			errs = append(errs, syscall.Unmount(f[1], syscall.MNT_DETACH))
		}
	}
	return errors.Join(errs...)
}

// statWithin stats path, giving up after d: a mount whose server hangs
// (rather than died) would block the stat, and is left alone.
func statWithin(path string, d time.Duration) error {
	done := make(chan error, 1)
	go func() {
		_, err := os.Stat(path)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return nil
	}
}
