package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/commit"
)

type logOptions struct {
	*globalOptions
	URL   string
	Limit int
}

func newLogCommand(g *globalOptions) *cobra.Command {
	opts := logOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "log URL",
		Short: "Show the history through the parent chain",
		Long: `Log walks from the current generation back through its parents, newest
first, and prints one line per commit: seq, generation, when staging started
(server time), writer, files, bytes and message. Each step costs one
manifest GET and is verified against the checksum its child recorded.

The walk ends at the first commit, or where the collector has removed older
generations ("older history collected"), which is not an error.` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish log s3://bucket/daily
  publish log -n 5 --json file:///srv/datasets/app`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL = args[0]
			return runLog(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().IntVarP(&opts.Limit, "max-count", "n", 0, "show at most this many commits (0: all)")
	return cmd
}

type logResult struct {
	Commits []manifestSummary `json:"commits"`
	// Collected is true when the walk ended where the collector removed
	// older history.
	Collected bool `json:"collected"`
}

func runLog(ctx context.Context, opts logOptions, stdout, _ io.Writer) error {
	if opts.Limit < 0 {
		return usagef("-n/--max-count %d: want a count, or 0 for all", opts.Limit)
	}
	d, err := opts.openDataset(ctx, opts.URL)
	if err != nil {
		return err
	}
	snap, err := openSnapshot(ctx, d, opts.URL, "")
	if err != nil {
		return err
	}
	res := logResult{Commits: []manifestSummary{}}
	for m, err := range d.History(ctx, snap) {
		if errors.Is(err, commit.ErrCollected) {
			res.Collected = true
			break
		}
		if err != nil {
			return describe(opts.URL, err)
		}
		res.Commits = append(res.Commits, summarize(m))
		if opts.Limit > 0 && len(res.Commits) == opts.Limit {
			break
		}
	}
	if opts.JSON {
		return writeJSON(stdout, res)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tGENERATION\tSTAGED\tWRITER\tFILES\tSIZE\tMESSAGE")
	for _, c := range res.Commits {
		writer := c.Writer
		if len(c.Carried) > 0 {
			writer += fmt.Sprintf(" +%d carried", len(c.Carried))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", c.Seq, c.Generation, formatTime(c.StagingStart), writer, c.Files, humanBytes(c.Bytes), c.Message)
	}
	if res.Collected {
		fmt.Fprintln(tw, "...\t(older history collected)")
	}
	return tw.Flush()
}
