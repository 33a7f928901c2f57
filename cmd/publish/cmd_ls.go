package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/generation"
)

type lsOptions struct {
	*globalOptions
	URL    string
	Prefix string
	Long   bool
	Ref    refFlags
}

func newLsCommand(g *globalOptions) *cobra.Command {
	opts := lsOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "ls URL [PREFIX]",
		Short: "List the files of the current snapshot",
		Long: `Ls lists the files of the current snapshot (or of the retained one that --seq
or --gen names), optionally only those whose path starts with PREFIX.
It costs one pointer GET and one manifest GET; it never lists the store.

The columns are the size in bytes and the path; -l adds the sha256 and the
object key (which may belong to an older generation when a put reused an
unchanged file). --json writes the manifest entries.` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish ls s3://bucket/daily
  publish ls -l --seq 41 s3://bucket/daily reports/`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL = args[0]
			if len(args) > 1 {
				opts.Prefix = args[1]
			}
			return runLs(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVarP(&opts.Long, "long", "l", false, "also show each file's sha256 and object key")
	opts.Ref.AddFlags(cmd)
	return cmd
}

func runLs(ctx context.Context, opts lsOptions, stdout, _ io.Writer) error {
	snap, err := opts.openRef(ctx, opts.URL, opts.Ref)
	if err != nil {
		return err
	}
	entries := []generation.Entry{}
	for _, e := range snap.Files() {
		if strings.HasPrefix(e.Path, opts.Prefix) {
			entries = append(entries, e)
		}
	}
	if opts.JSON {
		return writeJSON(stdout, entries)
	}
	width := 1
	for _, e := range entries {
		width = max(width, len(strconv.FormatInt(e.Size, 10)))
	}
	for _, e := range entries {
		if opts.Long {
			fmt.Fprintf(stdout, "%*d  %s  %s  %s\n", width, e.Size, e.SHA256, e.Key, e.Path)
		} else {
			fmt.Fprintf(stdout, "%*d  %s\n", width, e.Size, e.Path)
		}
	}
	return nil
}
