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
	Object    bool
}

func newCatCommand(g *globalOptions) *cobra.Command {
	opts := catOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "cat URL PATH | cat --object URL [KEY]",
		Short: "Print one file of the current snapshot, or one shared object",
		Long: `Cat writes the file PATH of the current snapshot (or of the retained one that
--seq or --gen names) to stdout.

With --object, cat writes the object KEY of the store at URL itself, as
'publish update' manages it, not a file of a dataset. Without KEY, the last
path element of URL is the key. A key or URL path with a segment named like
a dataset's own objects is refused, as update refuses it.

The file is verified against its manifest entry while it streams. A
mismatch is only known at the end, after the bytes have been written: the
exit status is then 1 and the output must not be used.` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish cat s3://bucket/daily report.csv
  publish cat --seq 41 file:///srv/datasets/app config/app.json | jq .
  publish cat --object s3://bucket/state.json`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Object {
				var err error
				if len(args) == 1 {
					opts.URL, opts.Path, err = splitObjectURL(args[0])
				} else {
					opts.URL, opts.Path = args[0], args[1]
				}
				if err != nil {
					return err
				}
				return runCatObject(cmd.Context(), opts, cmd.OutOrStdout())
			}
			if len(args) != 2 {
				return usagef("want URL PATH, or --object URL [KEY]")
			}
			opts.URL, opts.Path = args[0], args[1]
			return runCat(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	opts.Ref.AddFlags(cmd)
	cmd.Flags().BoolVar(&opts.Object, "object", false, "print the object KEY of the store (one that 'publish update' manages), not a dataset file")
	cmd.MarkFlagsMutuallyExclusive("object", "seq")
	cmd.MarkFlagsMutuallyExclusive("object", "gen")
	cmd.MarkFlagsMutuallyExclusive("object", "tag")
	return cmd
}

// runCatObject writes the object opts.Path of the store at opts.URL to stdout.
func runCatObject(ctx context.Context, opts catOptions, stdout io.Writer) error {
	if err := checkObjectKey(opts.URL, opts.Path, "cat --object"); err != nil {
		return err
	}
	s, err := opts.openStore(ctx, opts.URL)
	if err != nil {
		return err
	}
	rc, _, err := s.Get(ctx, opts.Path)
	if err == nil {
		defer rc.Close()
		_, err = io.Copy(stdout, rc)
	}
	if err != nil {
		return fmt.Errorf("object %q in %s: %w", opts.Path, redact(opts.URL), err)
	}
	return nil
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
