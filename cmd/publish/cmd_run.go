package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/lease"
)

type runOptions struct {
	*globalOptions
	URL     string
	Command []string
	Lease   string
	Wait    time.Duration
	TTL     time.Duration
	Grace   time.Duration
	Owner   string
	stdin   io.Reader
}

func newRunCommand(g *globalOptions) *cobra.Command {
	opts := runOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "run --lease NAME URL -- CMD [ARG...]",
		Short: "Run a command while holding a lease (flock for object stores)",
		Long: `Run acquires the lease NAME of the dataset at URL, runs CMD while keeping the
lease alive, and releases it when CMD exits. Only one 'publish run' with the
same URL and NAME runs its CMD at a time, on any number of machines.

If the lease is held, run fails at once with status 4, or waits up to --wait
for it. CMD gets the lease's fencing token in COMMITPTR_FENCE, the lease's
identity in COMMITPTR_LEASE_ID (its store without credentials, plus its key,
e.g. s3://bucket/jobs/_lease/nightly) and its name in COMMITPTR_LEASE. A
'publish put' run by CMD registers that token in the dataset before it
stages and commits with it, so a CMD that lost its lease cannot overwrite
the work of the next holder's puts.

The lease is renewed every --ttl/3. If it is lost (taken over after renewals
failed for longer than the TTL, or its holder's own deadline passed), run
sends SIGTERM to CMD's process group, then SIGKILL after --grace, and exits
with status 6. On SIGINT or SIGTERM, run does the same and exits with 130.
CMD runs in a process group of its own, so that signals reach the
processes it starts too. The lease is released at exit in every case.

Before the first use of a lease name, run checks that the store enforces
conditional writes (see 'publish probe').

Otherwise run exits with CMD's status (128+N if a signal N ended it).` + exitStatus(exitError, exitUsage, exitHeld, exitFenced, exitInterrupted) + `
  *    otherwise, the exit status of CMD (1 from run itself means CMD did not start)`,
		Example: `  publish run --lease nightly s3://bucket/jobs -- ./job.sh
  publish run --lease nightly --wait 10m --ttl 1m file:///srv/locks -- make deploy
  # in crontab, on every node; one of them runs it:
  0 3 * * * publish run --lease nightly s3://bucket/daily -- sh -c './build.sh && publish put ./out s3://bucket/daily'`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			before, command, err := splitDash(cmd, args, 1)
			if err != nil {
				return err
			}
			if len(before) != 1 {
				return usagef("want URL -- CMD, got %d arguments before --", len(before))
			}
			opts.URL, opts.Command, opts.stdin = before[0], command, cmd.InOrStdin()
			return runRun(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Lease, "lease", "", "the lease `NAME` (required)")
	f.DurationVar(&opts.Wait, "wait", 0, "wait up to this long for a held lease (0: fail at once with status 4)")
	f.DurationVar(&opts.TTL, "ttl", 30*time.Second, "lease TTL; the lease is renewed every TTL/3, and others can take it TTL+1s after the last renewal")
	f.DurationVar(&opts.Grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL when the lease is lost or run is interrupted")
	f.StringVar(&opts.Owner, "owner", "", "owner name written into the lease (default host:pid)")
	cmd.MarkFlagRequired("lease") //nolint:errcheck // the flag exists
	return cmd
}

func runRun(ctx context.Context, opts runOptions, stdout, stderr io.Writer) error {
	if opts.TTL <= 0 || opts.Grace < 0 {
		return usagef("--ttl must be positive and --grace not negative")
	}
	if err := lease.CheckName(opts.Lease); err != nil {
		return &usageError{err}
	}
	s, err := opts.openStore(ctx, opts.URL)
	if err != nil {
		return err
	}
	if err := probeNewLease(ctx, s, opts.URL, opts.Lease); err != nil {
		return err
	}
	l, err := acquireLease(ctx, s, opts.Lease, opts.TTL, opts.Wait, opts.Owner)
	if err != nil {
		return err
	}
	defer releaseLease(l, opts.globalOptions)
	opts.log().Info("lease acquired", "name", opts.Lease, "token", l.Token())

	kctx, stopKeep := context.WithCancel(ctx)
	defer stopKeep()
	l.KeepAlive(kctx)

	c := exec.Command(opts.Command[0], opts.Command[1:]...)
	c.Stdin, c.Stdout, c.Stderr = opts.stdin, stdout, stderr
	id, err := lease.Identity(opts.URL, opts.Lease)
	if err != nil {
		return err
	}
	c.Env = append(os.Environ(),
		"COMMITPTR_FENCE="+strconv.FormatUint(l.Token(), 10),
		"COMMITPTR_LEASE="+opts.Lease,
		"COMMITPTR_LEASE_ID="+id,
	)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Output copying must not outlive CMD by much if it leaves children
	// behind that hold its stdout open.
	c.WaitDelay = opts.Grace + time.Second
	if err := c.Start(); err != nil {
		return fmt.Errorf("start %s: %w", opts.Command[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()

	var waitErr error
	var why error
	select {
	case waitErr = <-done:
	case <-l.Done():
		why = fmt.Errorf("%w; sent SIGTERM to %s", l.Err(), opts.Command[0])
		fmt.Fprintf(stderr, "publish: lease %q lost (%v); stopping %s\n", opts.Lease, l.Err(), opts.Command[0])
		waitErr = terminate(c, done, opts.Grace, stderr)
	case <-ctx.Done():
		why = ctx.Err()
		fmt.Fprintf(stderr, "publish: interrupted; stopping %s\n", opts.Command[0])
		waitErr = terminate(c, done, opts.Grace, stderr)
	}
	stopKeep()
	if why != nil {
		return why
	}
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
		return nil
	case errors.As(waitErr, &ee):
		code := ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		return &statusError{code: code}
	default:
		return fmt.Errorf("%s: %w", opts.Command[0], waitErr)
	}
}

// terminate sends SIGTERM to the command's process group, then SIGKILL
// after grace, and returns the command's wait error.
func terminate(c *exec.Cmd, done <-chan error, grace time.Duration, stderr io.Writer) error {
	pgid := c.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM) //nolint:errcheck // it may have exited
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		fmt.Fprintf(stderr, "publish: %s did not exit within %s; sending SIGKILL\n", c.Path, grace)
		syscall.Kill(-pgid, syscall.SIGKILL) //nolint:errcheck // it may have exited
		return <-done
	}
}
