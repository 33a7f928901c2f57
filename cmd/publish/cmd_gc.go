package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/gc"
)

type gcOptions struct {
	*globalOptions
	URL       string
	DryRun    bool
	Keep      int
	Grace     time.Duration
	OrphanAge time.Duration
	LeaseTTL  time.Duration
	MaxDelete int
	Budget    time.Duration
	Every     time.Duration
}

func newGCCommand(g *globalOptions) *cobra.Command {
	opts := gcOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "gc URL",
		Short: "Remove superseded and orphaned generations and expired pins",
		Long: `Gc runs one collection of the dataset at URL, under the lease "gc", so only
one collector works at a time; if another holds it, gc exits with status 4
and says who. gc --dry-run takes no lease (see below).

It keeps the current generation, the last --keep ancestors, ancestors
superseded less than --grace ago, and pinned generations, and never deletes
an object any of them references. It deletes the other generations of the
history, and orphans: generations never committed (lost races, crashed or
interrupted writers) whose newest object is older than --orphan-age. Before
deleting orphans it moves the pointer's gc_horizon forward, so that a writer
that stalled longer than --orphan-age cannot commit a generation whose
objects may be gone (it fails with status 6 instead). It also removes what
writes killed mid-upload more than --orphan-age ago left and no listing
shows: temp files on file:// stores, incomplete multipart uploads on S3. The
records of a job ('publish job') begun more than --orphan-age ago and never
committed go too, once the horizon has passed its start, and those a
finished job left, once they are older than --orphan-age. All ages are
judged by the store's clock.

If the pointer or a manifest is corrupt or unreadable, gc deletes nothing
and exits with status 1, naming the key and what is wrong. Before its first
write it checks the pointer against the manifest it names (seq, parent and
the manifest's sha256): a pointer that fails is left as it was found, and gc
writes nothing at all, not even its lease, with --dry-run or without.
--dry-run prints the plan and writes nothing at all: it takes no lease, so
it needs read access only (an auditor's role can run it) and runs even
while another collector holds the lease.
See docs/OPERATIONS.md for choosing --grace and --orphan-age.

A large backlog can be collected in bounded steps: --max-delete N deletes
at most N objects per run, oldest garbage first, and --budget stops sending
deletes once the run has taken that long. What is left is reported, and the
next run continues where this one stopped.

--every DURATION keeps gc running, for a sidecar or a systemd unit: it
collects, sleeps DURATION (give or take a tenth, at random, so that many
collectors spread out), and collects again, printing one line of stats per
run. A run that fails (the lease held elsewhere, a busy dataset, a store
error) is reported on its line and the next one follows as usual. SIGTERM
or SIGINT ends it cleanly, with status 0: a run in progress stops before
its next request and releases its lease.` + exitStatus(exitOK, exitError, exitUsage, exitHeld, exitFenced, exitInterrupted) + `
  (6 when the collector lost its lease mid-run; the next run finishes)`,
		Example: `  publish gc --dry-run s3://bucket/daily
  publish gc --keep 7 --grace 2h --orphan-age 48h s3://bucket/daily
  publish gc --max-delete 100000 --budget 5m s3://bucket/daily
  publish gc --every 15m --budget 5m s3://bucket/daily`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL = args[0]
			return runGC(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.DryRun, "dry-run", false, "print the plan; write nothing, take no lease")
	f.IntVar(&opts.Keep, "keep", gc.DefaultKeep, "ancestors of the current generation to keep")
	f.DurationVar(&opts.Grace, "grace", gc.DefaultGrace, "keep ancestors superseded less than this long ago, for readers still on them")
	f.DurationVar(&opts.OrphanAge, "orphan-age", gc.DefaultOrphanAge, "collect uncommitted generations only when their newest object is older than this; longer than any put takes")
	f.DurationVar(&opts.LeaseTTL, "lease-ttl", gc.DefaultLeaseTTL, "TTL of the collector's lease")
	f.IntVar(&opts.MaxDelete, "max-delete", 0, "delete at most this many objects per run, oldest first; the next run continues (0: no limit)")
	f.DurationVar(&opts.Budget, "budget", 0, "stop sending deletes once a run has taken this long; the next run continues (0: no limit)")
	f.DurationVar(&opts.Every, "every", 0, "keep running: collect, sleep this long (with jitter), repeat, until SIGTERM")
	return cmd
}

func runGC(ctx context.Context, opts gcOptions, stdout, stderr io.Writer) error {
	if opts.Keep < 0 || opts.Grace < 0 || opts.OrphanAge < 0 || opts.LeaseTTL <= 0 {
		return usagef("--keep, --grace and --orphan-age must not be negative, --lease-ttl must be positive")
	}
	if opts.MaxDelete < 0 || opts.Budget < 0 || opts.Every < 0 {
		return usagef("--max-delete, --budget and --every must not be negative")
	}
	s, err := opts.openStore(ctx, opts.URL)
	if err != nil {
		return err
	}
	var (
		mu      sync.Mutex
		bar     *progress
		started bool
		last    int
	)
	gopts := gc.Options{
		Keep:      zeroToNone(opts.Keep),
		Grace:     zeroToNone(opts.Grace),
		OrphanAge: zeroToNone(opts.OrphanAge),
		DryRun:    opts.DryRun,
		LeaseTTL:  opts.LeaseTTL,
		MaxDelete: opts.MaxDelete,
		Budget:    opts.Budget,
		Logger:    opts.log(),
	}
	if opts.Every > 0 {
		return runGCEvery(ctx, s, gopts, opts, stdout)
	}
	gopts.Progress = func(deleted, total int) {
		mu.Lock()
		defer mu.Unlock()
		if !started {
			started = true
			bar = newProgress(stderr, opts.globalOptions, int64(total), 0, "deleting", false)
		}
		bar.Add(int64(deleted - last))
		last = deleted
	}
	rep, err := gc.Run(ctx, s, gopts)
	if bar != nil {
		bar.Finish()
	}
	if rep != nil {
		if opts.JSON {
			if werr := writeJSON(stdout, rep); werr != nil && err == nil {
				err = werr
			}
		} else if werr := rep.WriteText(opts.out(stdout)); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return fmt.Errorf("gc %s: %w", redact(opts.URL), err)
	}
	return nil
}

// zeroToNone maps the CLI's 0 ("none") to the gc package's negative
// values; the package reads 0 as "the default".
func zeroToNone[T int | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}
