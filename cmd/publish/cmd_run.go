package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
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
	// graceSet is whether --grace was given.
	graceSet bool
	stdin    io.Reader
}

func newRunCommand(g *globalOptions) *cobra.Command {
	opts := runOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "run --lease NAME URL -- CMD [ARG...]",
		Short: "Run a command while holding a lease (flock for object stores)",
		Long: `Run acquires the lease NAME of the dataset at URL, runs CMD while keeping the
lease alive, and releases it when CMD exits. Only one 'publish run' with the
same URL and NAME runs its CMD at a time, on any number of machines (see
"What run guarantees" below for exactly what that covers).

If the lease is held, run fails at once with status 4, or waits up to --wait
for it. CMD gets the lease's fencing token in COMMITPTR_FENCE, the lease's
identity in COMMITPTR_LEASE_ID (its store without credentials, plus its key,
e.g. s3://bucket/jobs/_lease/nightly) and its name in COMMITPTR_LEASE. A
'publish put' run by CMD registers that token in the dataset before it
stages and commits with it, so a CMD that lost its lease cannot overwrite
the work of the next holder's puts.

CMD runs in a process group of its own, so that signals reach the processes
it starts too. The lease is renewed every --ttl/3. Run has its own deadline:
TTL − TTL/10 after its last successful renewal was sent, by its own clock;
others can take the lease over only TTL + 1s after that renewal, by the
store's clock. If no renewal succeeds, run sends SIGTERM to CMD's process
group at the deadline − --grace and SIGKILL at the deadline, waits until no
process of the group is left, and exits with status 6. If the lease is
taken over, run does the same at once (SIGKILL after --grace, or at the
deadline if that comes first). On SIGINT, SIGTERM, SIGHUP or SIGQUIT, run
does the same and exits with 130. A second such signal sends SIGKILL to
the group at once; run still waits until no process of the group is
left, releases the lease and exits with 130, and further signals change
nothing. A stderr whose reader is gone does not end run, and Ctrl-Z
(SIGTSTP) does not stop it while it holds the lease. SIGKILL or SIGSTOP
of run itself stops only run: CMD keeps running, and the lease expires
under it. If CMD exits and leaves processes in its
group, run stops them the same way before it releases the lease. The lease
is released at exit in every case but one: if the group is still there a
while after SIGKILL (a process stuck in the kernel), run says so, exits 1
and leaves the lease to expire.

--grace must fit the TTL: at most 2/5 of --ttl (TTL/2 − TTL/10), so that
the renewal due TTL/3 after the last one, and its retries, get TTL/6 before
SIGTERM. A larger --grace is refused with status 2. Without --grace, it is
10s or 2/5 of --ttl, whichever is less.

What run guarantees. CMD's whole process group is killed (SIGKILL sent, and
run has seen that no process of the group is left) before the lease can be
taken over by the store's clock, as long as run's clock does not run slower
than the store's by more than TTL/10 over a TTL. So no two CMDs run at once.

What it does not. Work that CMD handed to other systems before it was
killed can still take effect later, after the next holder started: a request
it sent to a database, an API or the store itself, a job it queued. Side
effects that must not land late have to carry the fencing token from
COMMITPTR_FENCE, and their receiver has to refuse a token lower than one it
has seen, as 'publish put' does. Processes that CMD moves out of its process
group (setsid, daemons) are not stopped. If run itself dies (SIGKILL, the
OOM killer) or is paused past its deadline (a stopped VM), nothing stops
CMD; only the fencing token protects then.

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
				return usagef("want URL -- CMD, got %s before --", plural(len(before), "argument"))
			}
			opts.URL, opts.Command, opts.stdin = before[0], command, cmd.InOrStdin()
			opts.graceSet = cmd.Flags().Changed("grace")
			return runRun(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Lease, "lease", "", "the lease `NAME` (required)")
	f.DurationVar(&opts.Wait, "wait", 0, "wait up to this long for a held lease (0: fail at once with status 4)")
	f.DurationVar(&opts.TTL, "ttl", 30*time.Second, "lease TTL; the lease is renewed every TTL/3, and others can take it TTL+1s after the last renewal")
	f.DurationVar(&opts.Grace, "grace", defaultGrace, "time between SIGTERM and SIGKILL when CMD must stop; at most 2/5 of --ttl")
	f.Lookup("grace").DefValue = "10s or 2/5 of --ttl, whichever is less"
	f.StringVar(&opts.Owner, "owner", "", "owner name written into the lease (default host:pid)")
	cmd.MarkFlagRequired("lease") //nolint:errcheck // the flag exists
	return cmd
}

// maxGrace returns the longest --grace that fits the TTL. SIGTERM goes out
// at the holder's deadline − grace, and the deadline is TTL − margin after
// the last successful renewal was sent; the next renewal goes TTL/3 after
// that one. Grace may take what is left after the renewal and TTL/6 for
// its round trip and retries: TTL/2 − margin, 2/5 of the TTL.
func maxGrace(ttl time.Duration) time.Duration {
	return ttl/2 - lease.DefaultMargin(ttl)
}

// runGrace returns the grace to use: --grace if it fits the TTL (else a
// usage error), or by default the smaller of 10 s and what fits.
func runGrace(opts runOptions) (time.Duration, error) {
	most := maxGrace(opts.TTL)
	switch {
	case !opts.graceSet:
		return min(defaultGrace, most), nil
	case opts.Grace > most:
		return 0, usagef("--grace %s does not fit --ttl %s; use --grace %s or less, or a longer --ttl (SIGKILL must reach CMD by the holder's deadline, and SIGTERM must leave the renewals their chance)", opts.Grace, opts.TTL, most)
	}
	return opts.Grace, nil
}

func runRun(ctx context.Context, opts runOptions, stdout, stderr io.Writer) error {
	if opts.TTL <= 0 || opts.Grace < 0 {
		return usagef("--ttl must be positive and --grace not negative")
	}
	grace, err := runGrace(opts)
	if err != nil {
		return err
	}
	if err := lease.CheckName(opts.Lease); err != nil {
		return &usageError{err}
	}
	s, err := opts.openStore(ctx, opts.URL)
	if err != nil {
		return err
	}
	if err := probeNewLease(ctx, s, opts.URL, opts.Lease, stderr); err != nil {
		return err
	}
	l, err := acquireLease(ctx, s, opts.Lease, opts.TTL, opts.Wait, opts.Owner)
	if err != nil {
		return err
	}
	// From now on a second signal must not end run before CMD's group is
	// gone and the lease released: it escalates to SIGKILL of the group
	// (see procGroup.stop) and is otherwise ignored.
	again := make(chan struct{}, 1)
	defer onInterruptAgain(ctx, func() {
		select {
		case again <- struct{}{}:
		default:
		}
	})()
	// Nor may a stderr whose reader is gone (SIGPIPE), or a Ctrl-Z that
	// would stop run and leave CMD, in a group of its own, running.
	held := make(chan os.Signal, 1)
	signal.Notify(held, syscall.SIGPIPE, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	defer signal.Stop(held)
	release := true
	defer func() {
		if release {
			releaseLease(l, opts.globalOptions)
		}
	}()
	opts.log().Info("lease acquired", "name", opts.Lease, "token", l.Token())

	kctx, stopKeep := context.WithCancel(ctx)
	defer stopKeep()
	l.KeepAlive(kctx)

	name := opts.Command[0]
	if left := time.Until(l.Deadline()); left <= grace {
		return fmt.Errorf("%w: lease %q (token %d): acquired with %s left before the holder's deadline, not more than --grace %s; not starting %s",
			lease.ErrLost, opts.Lease, l.Token(), left.Round(time.Millisecond), grace, name)
	}
	// Orphans of CMD's processes become our children, so that we can reap
	// them and know that the group is gone.
	if err := becomeSubreaper(); err != nil {
		opts.log().Warn("cannot become a subreaper; processes that CMD leaves behind are reaped by init", "error", err)
	}
	c := exec.Command(name, opts.Command[1:]...)
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
	// Output copying must not outlive CMD by much if it leaves processes
	// behind, outside its group, that hold its stdout open.
	c.WaitDelay = grace + time.Second
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w; %s not started", err, name)
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	g := &procGroup{c: c, pgid: c.Process.Pid, done: make(chan error, 1), again: again}
	go func() { g.done <- c.Wait() }()

	// Until CMD exits, stop it when the lease is lost, when run is
	// interrupted, or when no renewal has succeeded by the holder's
	// deadline − grace.
	term := time.NewTimer(time.Until(l.Deadline().Add(-grace)))
	defer term.Stop()
	var why error
wait:
	for {
		select {
		case g.waitErr = <-g.done:
			g.exited = true
			break wait
		case <-l.Done():
			why = fmt.Errorf("%w; stopped %s", l.Err(), name)
			fmt.Fprintf(stderr, "publish: lease %q lost (%v); stopping %s\n", opts.Lease, l.Err(), name)
			break wait
		case <-ctx.Done():
			why = fmt.Errorf("%w; stopped %s", ctx.Err(), name)
			fmt.Fprintf(stderr, "publish: interrupted; stopping %s\n", name)
			break wait
		case <-term.C:
			if left := time.Until(l.Deadline()); left > grace {
				term.Reset(left - grace) // renewed meanwhile
				continue
			}
			why = fmt.Errorf("%w: lease %q (token %d): not renewed in time; stopped %s before the holder's deadline", lease.ErrLost, opts.Lease, l.Token(), name)
			fmt.Fprintf(stderr, "publish: lease %q could not be renewed; its deadline is in %s; stopping %s\n",
				opts.Lease, time.Until(l.Deadline()).Round(time.Millisecond), name)
			break wait
		}
	}
	if err := g.stop(killTime(time.Now(), grace, l.Deadline()), stderr); err != nil {
		// It may still run: let the lease expire instead of handing it
		// over now.
		release = false
		stopKeep()
		return err
	}
	stopKeep()
	if why != nil {
		return why
	}
	var ee *exec.ExitError
	switch waitErr := g.waitErr; {
	case waitErr == nil:
		return nil
	case errors.As(waitErr, &ee):
		code := ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		return &statusError{code: code}
	default:
		return fmt.Errorf("%s: %w", name, waitErr)
	}
}

// killTime returns when SIGKILL goes out to CMD's group, if it is still
// there, after SIGTERM at now: grace later, but never after the holder's
// deadline, past which another node may take the lease over.
func killTime(now time.Time, grace time.Duration, deadline time.Time) time.Time {
	if at := now.Add(grace); at.Before(deadline) {
		return at
	}
	return deadline
}

// defaultGrace is --grace when the flag is not given and it fits the TTL.
const defaultGrace = 10 * time.Second

// reapPoll is how often stop looks whether CMD's process group is gone.
const reapPoll = 10 * time.Millisecond

// killWait bounds how long stop waits for the group to be gone after
// SIGKILL, beyond the command's WaitDelay: a process in an uninterruptible
// sleep dies only when the sleep ends.
const killWait = 5 * time.Second

// procGroup is CMD and the process group it leads.
type procGroup struct {
	c       *exec.Cmd
	pgid    int
	done    chan error // c.Wait's result
	exited  bool       // done has been received: the leader is reaped
	waitErr error
	again   <-chan struct{} // a second signal: SIGKILL at once
}

// gone reports whether the leader is reaped and no process is left in the
// group. It reaps the members that became our children.
func (g *procGroup) gone() bool {
	if !g.exited {
		select {
		case g.waitErr = <-g.done:
			g.exited = true
		default:
			return false
		}
	}
	// Only now: before the leader is reaped, this could reap it under
	// c.Wait's feet.
	var ws syscall.WaitStatus
	for {
		pid, err := syscall.Wait4(-g.pgid, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			break
		}
	}
	return errors.Is(syscall.Kill(-g.pgid, 0), syscall.ESRCH)
}

// stop ends what is left of the group: nothing if it is gone, else SIGTERM
// at once and SIGKILL at killAt, or at once on a second signal. It returns
// once the group is gone, or an error naming it if it is still there
// killWait after the SIGKILL.
func (g *procGroup) stop(killAt time.Time, stderr io.Writer) error {
	if g.gone() {
		return nil
	}
	name := g.c.Args[0]
	if g.exited {
		fmt.Fprintf(stderr, "publish: %s exited and left processes in its group; stopping them\n", name)
	}
	syscall.Kill(-g.pgid, syscall.SIGTERM) //nolint:errcheck // it may be gone
	kill := time.NewTimer(time.Until(killAt))
	defer kill.Stop()
	tick := time.NewTicker(reapPoll)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if g.gone() {
				return nil
			}
		case <-g.again:
			fmt.Fprintf(stderr, "publish: signalled again; sending SIGKILL to %s's process group\n", name)
			return g.kill()
		case <-kill.C:
			fmt.Fprintf(stderr, "publish: %s's process group did not exit after SIGTERM; sending SIGKILL\n", name)
			return g.kill()
		}
	}
}

// kill sends SIGKILL to the group and returns once it is gone, or an error
// if it is still there killWait after that.
func (g *procGroup) kill() error {
	syscall.Kill(-g.pgid, syscall.SIGKILL) //nolint:errcheck // it may be gone
	tick := time.NewTicker(reapPoll)
	defer tick.Stop()
	give := time.NewTimer(g.c.WaitDelay + killWait)
	defer give.Stop()
	for !g.gone() {
		select {
		case <-tick.C:
		case <-give.C:
			return fmt.Errorf("process group %d of %s is still there %s after SIGKILL; the lease is not released and expires after its TTL",
				g.pgid, g.c.Args[0], g.c.WaitDelay+killWait)
		}
	}
	return nil
}
