package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
)

// startRunPlain starts `publish run` on a file:// store with CMD a sleep
// that writes nothing, stderr going to errw, and returns run, CMD's pid
// (its process group) and a channel closed when run has exited.
func startRunPlain(t *testing.T, errw *os.File) (*exec.Cmd, int, chan struct{}) {
	t.Helper()
	scratch := t.TempDir()
	pidf := filepath.Join(scratch, "pid")
	url := "file://" + filepath.Join(scratch, "store")
	c := exec.Command(testenv.PublishBinary(t), "run", "--lease", "job", "--ttl", "10s", url, "--",
		"sh", "-c", fmt.Sprintf(`echo $$ > %[1]s.tmp; mv %[1]s.tmp %[1]s; exec sleep 300`, pidf))
	c.Stderr = errw
	require.NoError(t, c.Start())
	exited := make(chan struct{})
	go func() { c.Wait(); close(exited) }() //nolint:errcheck // the tests look at CMD's group
	waitFor(t, pidf, 30*time.Second)
	b, err := os.ReadFile(pidf)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	t.Cleanup(func() {
		c.Process.Kill()
		<-exited
		syscall.Kill(-pid, syscall.SIGKILL)
	})
	return c, pid, exited
}

// TestRunStopsCMDOnHangup: SIGHUP (the terminal closed) ends run; CMD's
// group, which is not in the terminal's foreground group, must not outlive
// it, or the lease expires and the next holder's CMD runs beside it.
func TestRunStopsCMDOnHangup(t *testing.T) {
	errs, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer errs.Close()
	c, pid, exited := startRunPlain(t, errs)
	require.NoError(t, c.Process.Signal(syscall.SIGHUP))
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("run did not exit after SIGHUP")
	}
	assert.ErrorIs(t, syscall.Kill(-pid, 0), syscall.ESRCH, "CMD's process group outlived run")
}

// TestRunStopsCMDWhenStderrIsGone: run's stderr is a pipe whose reader is
// gone, as with `publish run ... 2>&1 | tee log` after Ctrl-C, which ends
// tee too. The message run writes when it is interrupted must not end it
// before it has stopped CMD's group.
func TestRunStopsCMDWhenStderrIsGone(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	c, pid, exited := startRunPlain(t, w)
	w.Close()
	r.Close()
	require.NoError(t, c.Process.Signal(syscall.SIGTERM))
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("run did not exit after SIGTERM")
	}
	assert.ErrorIs(t, syscall.Kill(-pid, 0), syscall.ESRCH, "CMD's process group outlived run")
}
