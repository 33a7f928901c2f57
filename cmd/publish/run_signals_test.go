package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/quick"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
)

// runningHolder is a `publish run` process A whose CMD traps SIGTERM and
// goes on appending "A <unix ns>" lines to a log after it, as a job that
// cleans up for a long time would.
type runningHolder struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	// log, termed, pid and errs are files in the scratch directory: the
	// log both holders append to, the mark CMD leaves when SIGTERM reaches
	// it, CMD's pid, which is also its process group, and run's stderr (a
	// file, not a pipe that CMD could hold open after run exits).
	log, termed, pid, errs string
}

// startHolder starts A with the given global flags and run flags, and
// returns once its CMD is running.
func startHolder(t *testing.T, tg target, flags []string, url string, runFlags ...string) *runningHolder {
	t.Helper()
	scratch := t.TempDir()
	h := &runningHolder{
		exited: make(chan struct{}),
		log:    filepath.Join(scratch, "log"),
		termed: filepath.Join(scratch, "termed"),
		pid:    filepath.Join(scratch, "pid"),
		errs:   filepath.Join(scratch, "stderr"),
	}
	ready := filepath.Join(scratch, "ready")
	loop := fmt.Sprintf(`while :; do echo "A $(date +%%s%%N)" >> %s; sleep 0.05; done`, h.log)
	script := fmt.Sprintf(`echo $$ > %[1]s.tmp; mv %[1]s.tmp %[1]s; trap 'touch %[2]s; %[3]s' TERM; touch %[4]s; %[3]s`,
		h.pid, h.termed, loop, ready)
	args := append(append(append([]string{}, flags...), "run", "--lease", "job"), runFlags...)
	args = append(args, url, "--", "sh", "-c", script)
	h.cmd = exec.Command(testenv.PublishBinary(t), args...)
	h.cmd.Env = append(os.Environ(), append(tg.env, "AWS_EC2_METADATA_DISABLED=true")...)
	errs, err := os.Create(h.errs)
	require.NoError(t, err)
	defer errs.Close()
	h.cmd.Stderr = errs
	require.NoError(t, h.cmd.Start())
	go func() { h.waitErr = h.cmd.Wait(); close(h.exited) }()
	t.Cleanup(func() {
		// Whatever the test found, nothing of A's outlives it.
		h.cmd.Process.Signal(syscall.SIGCONT)
		h.cmd.Process.Kill()
		<-h.exited
		if pid, err := h.cmdPid(); err == nil {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
	waitFor(t, ready, 30*time.Second)
	return h
}

// stderr returns what A has written to its stderr so far.
func (h *runningHolder) stderr() string {
	b, _ := os.ReadFile(h.errs)
	return string(b)
}

// cmdPid returns the pid of A's CMD.
func (h *runningHolder) cmdPid() (int, error) {
	b, err := os.ReadFile(h.pid)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// wait waits for A to exit (a minute at most, which only reports a hang)
// and returns its exit status, -1 if a signal ended it.
func (h *runningHolder) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-h.exited:
	case <-time.After(time.Minute):
		t.Fatalf("publish run did not exit; stderr:\n%s", h.stderr())
	}
	var ee *exec.ExitError
	if errors.As(h.waitErr, &ee) {
		return ee.ExitCode()
	}
	require.NoError(t, h.waitErr)
	return 0
}

// TestRunSecondSignalKillsGroupBeforeExit: a second SIGTERM or SIGINT,
// while CMD cleans up after the first, sends SIGKILL to CMD's group at
// once, and run exits only after the group is gone and the lease is
// released. The next holder then starts at once, and no line of A's CMD
// comes after its start.
func TestRunSecondSignalKillsGroupBeforeExit(t *testing.T) {
	tg := targets(t)[0]
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			url := tg.url(t)
			// A long TTL, and so a long grace (4 s): the second signal
			// comes well before the SIGKILL that grace would send.
			a := startHolder(t, tg, nil, url, "--ttl", "10s")
			require.NoError(t, a.cmd.Process.Signal(sig))
			waitFor(t, a.termed, 30*time.Second)
			require.NoError(t, a.cmd.Process.Signal(sig))

			code := a.wait(t)
			exitedAt := time.Now()
			assert.Equal(t, exitInterrupted, code, a.stderr())
			assert.Contains(t, a.stderr(), "signalled again; sending SIGKILL")
			pid, err := a.cmdPid()
			require.NoError(t, err)
			assert.ErrorIs(t, syscall.Kill(-pid, 0), syscall.ESRCH, "CMD's process group outlived run")

			b := tg.run(t, "run", "--lease", "job", "--ttl", "10s", url,
				"--", "sh", "-c", fmt.Sprintf(`echo "B $(date +%%s%%N)" >> %s`, a.log))
			require.Equal(t, 0, b.code, "the lease must be released when run exits: %s", b.stderr)
			lastA, bStart := readRunLog(t, a.log)
			assert.True(t, lastA.Before(exitedAt), "A's CMD wrote at %s, after run exited", lastA.Format(time.StampMicro))
			assert.True(t, lastA.Before(bStart), "A's CMD ran until %s, after B's started at %s",
				lastA.Format(time.StampMicro), bStart.Format(time.StampMicro))
		})
	}
}

// TestRunKillsByDeadlineWhenSignalledLate: run is paused right after a
// renewal and resumed, cut off from the store, one second before its
// deadline, well within --grace of it, and signalled at once. SIGKILL
// must go out by the deadline, not --grace after the signal: the next
// holder takes the lease over TTL + 1s after the renewal, and no line of
// A's CMD may come after it starts.
func TestRunKillsByDeadlineWhenSignalledLate(t *testing.T) {
	// The grace (2/5 of the TTL, 6 s) reaches 2.5 s past the takeover if
	// it starts one second before the deadline (TTL − TTL/10).
	const ttl = 15 * time.Second
	tg := targets(t)[0]
	url := tg.url(t)
	aURL, _, cut := cutOffPath(t, tg, url)
	a := startHolder(t, tg, nil, aURL, "--ttl", ttl.String())
	s := tg.open(t, url)
	ctx, started := context.Background(), time.Now()
	first, err := s.Head(ctx, "_lease/job")
	require.NoError(t, err)
	for {
		now, err := s.Head(ctx, "_lease/job")
		require.NoError(t, err)
		if now.ETag != first.ETag {
			break
		}
		require.Less(t, time.Since(started), 2*ttl, "no renewal seen")
		time.Sleep(5 * time.Millisecond)
	}
	renewed := time.Now()
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
	cut()
	deadline := renewed.Add(ttl - ttl/10)
	time.Sleep(time.Until(deadline.Add(-time.Second)))
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))

	b := tg.run(t, "run", "--lease", "job", "--wait", "60s", "--ttl", ttl.String(), url,
		"--", "sh", "-c", fmt.Sprintf(`echo "B $(date +%%s%%N)" >> %s`, a.log))
	require.Equal(t, 0, b.code, "B: %s", b.stderr)
	assert.NotEqual(t, 0, a.wait(t), a.stderr())
	lastA, bStart := readRunLog(t, a.log)
	require.NotZero(t, bStart, "B's CMD must have run")
	assert.True(t, lastA.Before(bStart), "A's CMD ran until %s, after B's started at %s: overlap of %s",
		lastA.Format(time.StampMicro), bStart.Format(time.StampMicro), lastA.Sub(bStart))
}

// TestKillTimeNeverAfterDeadline: SIGKILL goes out grace after SIGTERM,
// or at the holder's deadline if that comes first, whatever the three
// times are.
func TestKillTimeNeverAfterDeadline(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prop := func(nowOff, deadlineOff int64, graceMs uint32) bool {
		now := base.Add(time.Duration(nowOff%1e12) * time.Microsecond)
		deadline := base.Add(time.Duration(deadlineOff%1e12) * time.Microsecond)
		grace := time.Duration(graceMs) * time.Millisecond
		at := killTime(now, grace, deadline)
		return !at.After(deadline) && !at.After(now.Add(grace)) &&
			(at.Equal(deadline) || at.Equal(now.Add(grace)))
	}
	require.NoError(t, quick.Check(prop, &quick.Config{MaxCount: 10000}))
	now := base
	assert.Equal(t, now.Add(time.Second), killTime(now, time.Second, now.Add(time.Minute)), "grace first")
	assert.Equal(t, now.Add(time.Second), killTime(now, time.Minute, now.Add(time.Second)), "deadline first")
	assert.Equal(t, now.Add(-time.Second), killTime(now, time.Minute, now.Add(-time.Second)), "deadline passed: at once")
}
