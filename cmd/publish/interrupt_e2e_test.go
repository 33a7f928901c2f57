package main

import (
	"bytes"
	"errors"
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
)

// cpuTicks returns the CPU time pid has used, in clock ticks (Linux).
func cpuTicks(t *testing.T, pid int) (int, bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return utime + stime, true
}

// waitExit waits for cmd, at most d, and returns its exit code; it kills
// the process and fails the test when d passes.
func waitExit(t *testing.T, cmd *exec.Cmd, d time.Duration, what string, stderr *lockedBuffer) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		require.NoError(t, err)
		return 0
	case <-time.After(d):
		cmd.Process.Kill() //nolint:errcheck // the test fails anyway
		<-done             //nolint:errcheck // the test fails anyway
		t.Fatalf("%s: still running %s after the signal\nstderr: %s", what, d, stderr.String())
		return -1
	}
}

// TestInterruptedListing: SIGTERM ends a put that is still listing SRC,
// here a tree of links that --links follow would walk for a very long
// time, with the interrupted status and nothing written. The limit on the
// wait only matters when the walk ignores the signal, which then takes far
// longer or ends with another error.
func TestInterruptedListing(t *testing.T) {
	for _, tg := range targets(t)[:2] {
		t.Run(tg.name, func(t *testing.T) {
			src := linkDAG(t, 26)
			url := tg.url(t)
			cmd := tg.command(t, "put", "--links", "follow", src, url)
			var stderr lockedBuffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			// Signal once the walk has run for a while: 30 ticks of CPU.
			for {
				n, ok := cpuTicks(t, cmd.Process.Pid)
				require.True(t, ok, "put exited before it was signalled: %s", stderr.String())
				if n >= 30 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			code := waitExit(t, cmd, time.Minute, "put", &stderr)
			assert.Equal(t, exitInterrupted, code, stderr.String())
			assert.Contains(t, stderr.String(), "listing SRC")
			assert.NotContains(t, stderr.String(), "more files than")
			r := tg.run(t, "show", url)
			assert.NotEqual(t, 0, r.code, "nothing was committed: %s", r.stdout)
		})
	}
}

// TestInterruptedRunQuiet: Ctrl-C on run while CMD runs ends both, with
// the interrupted status and no stray "context canceled".
func TestInterruptedRunQuiet(t *testing.T) {
	for _, tg := range targets(t)[:2] {
		t.Run(tg.name, func(t *testing.T) {
			url, scratch := tg.url(t), t.TempDir()
			started := filepath.Join(scratch, "started")
			cmd := tg.command(t, "run", "--lease", "job", url, "--", "sh", "-c", "touch "+started+"; exec sleep 300")
			var stderr lockedBuffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			waitFor(t, started, time.Minute)
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
			code := waitExit(t, cmd, time.Minute, "run", &stderr)
			assert.Equal(t, exitInterrupted, code, stderr.String())
			assert.NotContains(t, strings.ToLower(stderr.String()), "context canceled")
			st := tg.ok(t, "--json", "lease", "status", url, "job")
			assert.Contains(t, st, `"state": "released"`)
		})
	}
}
