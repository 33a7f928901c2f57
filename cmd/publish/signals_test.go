package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// signalsChildEnv makes the test binary, run again by the tests below, a
// process that watches interrupts as main does (see signalsChild).
const signalsChildEnv = "COMMITPTR_SIGNALS_CHILD"

// signalsChildBound bounds how long the child waits for the signals that
// its parent sends; it only ends a child whose signals went astray.
const signalsChildBound = 30 * time.Second

func init() {
	if mode := os.Getenv(signalsChildEnv); mode != "" {
		os.Exit(signalsChild(mode))
	}
}

// signalsChild watches interrupts with watchInterrupts, with a handler of
// later signals set when mode is "handler", and reports on stdout: "ready"
// once it watches, "first" when the first signal cancelled its context,
// and "again" when the handler ran. It exits 3 after the handler ran, and
// 0 if its signals never came.
func signalsChild(mode string) int {
	// Watching goes on until the child exits: a child whose signals went
	// astray must not die of them when it stops watching.
	ctx, _ := watchInterrupts(context.Background())
	again := make(chan struct{}, 1)
	if mode == "handler" {
		defer onInterruptAgain(ctx, func() {
			select {
			case again <- struct{}{}:
			default:
			}
		})()
	}
	fmt.Println("ready")
	select {
	case <-ctx.Done():
	case <-time.After(signalsChildBound):
		return 0
	}
	fmt.Println("first")
	select {
	case <-again:
		fmt.Println("again")
		return 3
	case <-time.After(signalsChildBound):
		return 0
	}
}

// signalled starts the child in mode, sends it first, waits until that
// cancelled its context, sends it second, and returns how it ended and
// the lines it wrote.
func signalled(t *testing.T, mode string, first, second syscall.Signal) (syscall.WaitStatus, []string) {
	t.Helper()
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), signalsChildEnv+"="+mode)
	out, err := c.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, c.Start())
	exited := make(chan error, 1)
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- c.Wait()
	}()
	var seen []string
	next := func(want string) {
		t.Helper()
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the child ended before %q; it wrote %q", want, seen)
			seen = append(seen, l)
			require.Equal(t, want, l)
		case <-time.After(time.Minute):
			c.Process.Kill() //nolint:errcheck // the test fails anyway
			t.Fatalf("no %q from the child; it wrote %q", want, seen)
		}
	}
	next("ready")
	require.NoError(t, c.Process.Signal(first))
	next("first")
	require.NoError(t, c.Process.Signal(second))
	for l := range lines {
		seen = append(seen, l)
	}
	var ws syscall.WaitStatus
	err = <-exited
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ws = ee.Sys().(syscall.WaitStatus)
	} else {
		require.NoError(t, err)
	}
	return ws, seen
}

// TestSecondSignalEndsProcessWithoutHandler: with no handler of later
// signals set (a command before it has anything to protect, or one that
// never sets one), a second SIGINT or SIGTERM ends the process as the
// signal's default action would, at once, so that a command slow to clean
// up can be stopped.
func TestSecondSignalEndsProcessWithoutHandler(t *testing.T) {
	for _, sigs := range [][2]syscall.Signal{{syscall.SIGINT, syscall.SIGINT}, {syscall.SIGINT, syscall.SIGTERM}, {syscall.SIGTERM, syscall.SIGINT}} {
		t.Run(sigs[0].String()+" then "+sigs[1].String(), func(t *testing.T) {
			ws, lines := signalled(t, "none", sigs[0], sigs[1])
			require.True(t, ws.Signaled(), "the child must die of the second signal; status %v, wrote %q", ws, lines)
			assert.Equal(t, sigs[1], ws.Signal())
		})
	}
}

// TestSecondSignalGoesToHandler: with a handler set, a second signal runs
// it and does not end the process (publish run uses it to send SIGKILL to
// CMD's group, and still waits for the group).
func TestSecondSignalGoesToHandler(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			ws, lines := signalled(t, "handler", syscall.SIGINT, sig)
			assert.False(t, ws.Signaled(), "status %v, wrote %q", ws, lines)
			assert.Equal(t, 3, ws.ExitStatus(), "the handler ran and the child went on: wrote %q", lines)
			assert.Equal(t, []string{"ready", "first", "again"}, lines)
		})
	}
}
