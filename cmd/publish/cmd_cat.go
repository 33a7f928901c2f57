package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

type catOptions struct {
	*globalOptions
	URL, Path string
	Ref       refFlags
}

func newCatCommand(g *globalOptions) *cobra.Command {
	opts := catOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "cat URL PATH",
		Short: "Print one file of the current snapshot",
		Long: `Cat writes the file PATH of the current snapshot (or of the retained one that
--seq or --gen names) to stdout.

The file is verified against its manifest entry while it streams. A
mismatch is only known at the end, after the bytes have been written: the
exit status is then 1 and the output must not be used.` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish cat s3://bucket/daily report.csv
  publish cat --seq 41 file:///srv/datasets/app config/app.json | jq .`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL, opts.Path = args[0], args[1]
			return runCat(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	opts.Ref.AddFlags(cmd)
	return cmd
}

func runCat(ctx context.Context, opts catOptions, stdout, _ io.Writer) error {
	snap, err := opts.openRef(ctx, opts.URL, opts.Ref)
	if err != nil {
		return err
	}
	rc, err := snap.Open(ctx, opts.Path)
	if err != nil {
		return describe(opts.URL, err)
	}
	defer rc.Close()
	if _, err := io.Copy(stdout, rc); err != nil {
		return fmt.Errorf("cat %q of seq %d: %w", opts.Path, snap.Seq(), err)
	}
	return nil
}
