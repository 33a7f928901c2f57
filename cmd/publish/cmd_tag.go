package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/commit"
)

type tagOptions struct {
	*globalOptions
	URL    string
	Name   string
	Ref    refFlags
	Force  bool
	List   bool
	Delete bool
}

func newTagCommand(g *globalOptions) *cobra.Command {
	opts := tagOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "tag URL NAME",
		Short: "Name a snapshot durably",
		Long: `Tag names the current generation (or the retained one that --seq, --gen or
--tag names) NAME, stored as _tag/NAME. The collector keeps a tagged
generation, like a pin without a TTL, until the tag is deleted or moved.
get, ls, cat, show and pin read it with --tag NAME; diff and rollback take
tag:NAME (rollback also --tag NAME).

A tag never moves by accident: tagging with a name that exists is refused
unless --force, which moves the tag with a compare-and-swap against the
tag it read. --list lists the tags; --delete removes one.` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish tag s3://bucket/daily release-2026-11-24
  publish tag --seq 41 s3://bucket/daily audit
  publish tag --force s3://bucket/daily release-2026-11-24
  publish tag --list s3://bucket/daily
  publish tag --delete s3://bucket/daily audit`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL = args[0]
			if len(args) == 2 {
				opts.Name = args[1]
			}
			return runTag(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	opts.Ref.AddFlags(cmd)
	cmd.Flags().BoolVar(&opts.Force, "force", false, "move the tag if it exists")
	cmd.Flags().BoolVar(&opts.List, "list", false, "list the dataset's tags")
	cmd.Flags().BoolVar(&opts.Delete, "delete", false, "delete the tag NAME")
	cmd.MarkFlagsMutuallyExclusive("list", "delete", "force")
	return cmd
}

type tagInfo struct {
	Name       string    `json:"name"`
	Generation string    `json:"generation"`
	Seq        uint64    `json:"seq"`
	CreatedAt  time.Time `json:"created_at"`
}

func runTag(ctx context.Context, opts tagOptions, stdout io.Writer) error {
	switch {
	case opts.List && opts.Name != "":
		return usagef("--list takes no NAME")
	case !opts.List && opts.Name == "":
		return usagef("name the tag")
	case opts.Name != "":
		if err := commit.ValidTagName(opts.Name); err != nil {
			return &usageError{err}
		}
	}
	if (opts.List || opts.Delete) && (opts.Ref != refFlags{}) {
		return usagef("--seq, --gen and --tag select what to tag; they do not go with --list or --delete")
	}
	d, err := opts.openDataset(ctx, opts.URL)
	if err != nil {
		return err
	}
	switch {
	case opts.List:
		tags, err := d.Tags(ctx)
		if err != nil {
			return describe(opts.URL, err)
		}
		infos := []tagInfo{}
		for _, t := range tags {
			infos = append(infos, tagInfo{Name: t.Name, Generation: t.Generation, Seq: t.Seq, CreatedAt: t.CreatedAt})
		}
		if opts.JSON {
			return writeJSON(stdout, infos)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSEQ\tGENERATION\tCREATED")
		for _, t := range infos {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", t.Name, t.Seq, t.Generation, formatTime(t.CreatedAt))
		}
		return tw.Flush()
	case opts.Delete:
		if err := d.DeleteTag(ctx, opts.Name); err != nil {
			return describe(opts.URL, err)
		}
		fmt.Fprintf(opts.out(stdout), "deleted tag %s\n", opts.Name)
		return nil
	}
	ref, err := opts.Ref.ref()
	if err != nil {
		return err
	}
	snap, err := openSnapshot(ctx, d, opts.URL, ref)
	if err != nil {
		return err
	}
	t, err := snap.Tag(ctx, opts.Name, opts.Force)
	if err != nil {
		return describe(opts.URL, err)
	}
	info := tagInfo{Name: t.Name, Generation: t.Generation, Seq: t.Seq, CreatedAt: t.CreatedAt}
	if opts.JSON {
		return writeJSON(stdout, info)
	}
	fmt.Fprintf(opts.out(stdout), "tagged seq %d generation %s: %s\n", info.Seq, info.Generation, info.Name)
	return nil
}
