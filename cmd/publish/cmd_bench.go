package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/internal/bench"
)

type benchOptions struct {
	*globalOptions
	URL       string
	Scenarios []string
	Files     int
	Size      int
	Commits   int
	Writers   []int
	Duration  time.Duration
	Handoffs  int
	GCGens    int
	GCObjects int
	SVG       string
}

var benchScenarios = []string{"commit", "contention", "lease", "gc"}

func newBenchCommand(g *globalOptions) *cobra.Command {
	opts := benchOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "bench URL",
		Short: "Measure latency, throughput and requests per operation on a store",
		Long: `Bench runs load scenarios against the store at URL and prints, for each,
p50/p99 latency, operations per second and the store requests per operation
by kind. Everything is written under URL's bench/ prefix and left there;
remove it with your usual tools or point bench at a scratch bucket.

Scenarios:
  commit       commits of --files files of --size bytes; the floor is files+3 requests
  contention   --writers concurrent read-modify-write commits of one file for
               --duration each: goodput, attempts per success, p99; fails on livelock
  lease        --handoffs handoffs of a lease between two holders
  gc           one collection of --gc-gens generations of --gc-objects files` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish bench file:///tmp/scratch
  publish bench --scenario contention --writers 1,2,4,8,16,32 --svg contention.svg s3://scratch
  publish bench --json --scenario commit --files 100 s3://scratch`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL = args[0]
			return runBench(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&opts.Scenarios, "scenario", benchScenarios, "scenarios to run: "+strings.Join(benchScenarios, ", "))
	f.IntVar(&opts.Files, "files", 10, "commit: files per commit")
	f.IntVar(&opts.Size, "size", 4096, "commit: bytes per file")
	f.IntVar(&opts.Commits, "commits", 50, "commit: number of commits")
	f.IntSliceVar(&opts.Writers, "writers", []int{1, 2, 4, 8, 16, 32}, "contention: writer counts")
	f.DurationVar(&opts.Duration, "duration", 5*time.Second, "contention: time per writer count")
	f.IntVar(&opts.Handoffs, "handoffs", 50, "lease: number of handoffs")
	f.IntVar(&opts.GCGens, "gc-gens", 200, "gc: generations to collect")
	f.IntVar(&opts.GCObjects, "gc-objects", 10, "gc: files per generation")
	f.StringVar(&opts.SVG, "svg", "", "contention: write the goodput/p99 curve to this SVG file")
	return cmd
}

func runBench(ctx context.Context, opts benchOptions, stdout, stderr io.Writer) error {
	for _, s := range opts.Scenarios {
		if !slices.Contains(benchScenarios, s) {
			return usagef("unknown scenario %q (known: %s)", s, strings.Join(benchScenarios, ", "))
		}
	}
	if opts.Files < 1 || opts.Commits < 1 || opts.Size < 0 || opts.Handoffs < 1 || opts.GCGens < 1 || opts.GCObjects < 1 || opts.Duration <= 0 {
		return usagef("--files, --commits, --handoffs, --gc-gens, --gc-objects and --duration must be positive")
	}
	for _, w := range opts.Writers {
		if w < 1 {
			return usagef("--writers must be positive, got %d", w)
		}
	}
	s, err := opts.openStore(ctx, opts.URL)
	if err != nil {
		return err
	}
	if err := probeStore(ctx, s, opts.URL, stderr); err != nil {
		return probeError(opts.URL, err)
	}
	var results, contention []bench.Result
	run := func(r bench.Result, err error) error {
		if err != nil {
			return fmt.Errorf("bench %s: %w", redact(opts.URL), err)
		}
		results = append(results, r)
		if !opts.JSON {
			fmt.Fprintf(stderr, "done: %s\n", r.Scenario)
		}
		return nil
	}
	for _, sc := range opts.Scenarios {
		var err error
		switch sc {
		case "commit":
			err = run(bench.Commit(ctx, s, opts.Files, opts.Size, opts.Commits))
		case "contention":
			for _, w := range opts.Writers {
				if err = run(bench.Contention(ctx, s, w, opts.Duration)); err != nil {
					break
				}
				contention = append(contention, results[len(results)-1])
			}
		case "lease":
			err = run(bench.LeaseHandoff(ctx, s, opts.Handoffs))
		case "gc":
			err = run(bench.Collect(ctx, s, opts.GCGens, opts.GCObjects))
		}
		if err != nil {
			return err
		}
	}
	if opts.SVG != "" && len(contention) > 0 {
		if err := os.WriteFile(opts.SVG, bench.ContentionSVG(contention), 0o644); err != nil {
			return err
		}
	}
	if opts.JSON {
		return writeJSON(stdout, results)
	}
	bench.WriteTable(stdout, results)
	return nil
}
