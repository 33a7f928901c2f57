package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/commit"
)

type rmOptions struct {
	*globalOptions
	URL     string
	Message string
	Meta    []string
	Into    string
	Missing bool
}

func newRmCommand(g *globalOptions) *cobra.Command {
	opts := rmOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "rm --into PREFIX/ URL",
		Short: "Drop one partition (a subtree) of the dataset in a new generation",
		Long: `Rm --into PREFIX/ commits a new generation of the dataset at URL that holds
every file of the current one except those under PREFIX/. Nothing is
uploaded: the files kept are referenced, as 'publish put' does.

Like 'publish put --into', rm rebases: when another writer commits first and
changed nothing under PREFIX/, rm commits again on top of it, so it can run
beside jobs that publish other partitions. If the other writer changed
something under PREFIX/, rm exits with status 3 and changes nothing.

A PREFIX/ that holds no file in the current generation is an error (status
1), unless --missing-ok, which then commits nothing and exits 0.
` + exitStatus(exitOK, exitError, exitUsage, exitLost, exitUnknown, exitInterrupted),
		Example: `  publish rm --into day=2026-11-01/ s3://bucket/events
  publish rm --into region=eu/ -m "EU data moved" file:///srv/datasets/sales`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL = args[0]
			return runRm(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Into, "into", "", "the partition to drop: every file under `PREFIX/` (required)")
	f.StringVarP(&opts.Message, "message", "m", "", "commit message, kept in the pointer and the manifest")
	f.StringArrayVar(&opts.Meta, "meta", nil, "metadata `key=value` kept with the commit (repeatable)")
	f.BoolVar(&opts.Missing, "missing-ok", false, "exit 0 without a commit when PREFIX/ holds no file")
	return cmd
}

type rmResult struct {
	Seq        uint64 `json:"seq"`
	Generation string `json:"generation"`
	Parent     string `json:"parent,omitempty"`
	Into       string `json:"into"`
	Removed    int    `json:"removed"`
	Kept       int    `json:"kept"`
	Rebased    int    `json:"rebased,omitempty"`
	Carried    bool   `json:"carried,omitempty"` // as putResult's
	// Unchanged: PREFIX/ held nothing (--missing-ok); nothing committed.
	Unchanged bool `json:"unchanged,omitempty"`
}

func runRm(ctx context.Context, opts rmOptions, stdout, stderr io.Writer) error {
	if opts.Into == "" {
		return usagef("rm needs --into PREFIX/: the partition to drop")
	}
	if err := checkInto(opts.Into); err != nil {
		return err
	}
	meta, err := parseMeta(opts.Meta)
	if err != nil {
		return err
	}
	d, err := opts.openDataset(ctx, opts.URL)
	if err != nil {
		return err
	}
	tx, err := d.Begin(ctx)
	if err != nil {
		return describe(opts.URL, err)
	}
	if tx.Base() == nil {
		tx.Discard(context.WithoutCancel(ctx)) //nolint:errcheck // nothing was staged
		return describe(opts.URL, commit.ErrNoCommits)
	}
	removed, kept, err := tx.ReplacePrefix(ctx, opts.Into)
	if err != nil {
		tx.Discard(context.WithoutCancel(ctx)) //nolint:errcheck // nothing was staged
		return describe(opts.URL, err)
	}
	base := tx.Base()
	if len(removed) == 0 {
		tx.Discard(context.WithoutCancel(ctx)) //nolint:errcheck // nothing was staged
		if !opts.Missing {
			return fmt.Errorf("dataset %s: seq %d holds no file under %s; nothing committed (--missing-ok exits 0)", redact(opts.URL), base.Seq, opts.Into)
		}
		res := rmResult{Seq: base.Seq, Generation: base.Generation, Parent: base.Parent, Into: opts.Into, Kept: kept, Unchanged: true}
		if opts.JSON {
			return writeJSON(stdout, res)
		}
		fmt.Fprintf(opts.out(stdout), "unchanged: seq %d generation %s holds no file under %s; nothing committed\n", res.Seq, res.Generation, res.Into)
		return nil
	}
	p, err := tx.Commit(ctx, commit.CommitOptions{Message: opts.Message, Meta: meta})
	if err != nil {
		if errors.Is(err, commit.ErrCommitUnknown) {
			gen := tx.Generation()
			if a := tx.Attempted(); a != nil {
				gen = a.Generation
			}
			return fmt.Errorf("%w\ngeneration %s may still be committed; run 'publish show %s' to see whether it is current", err, gen, redact(opts.URL))
		}
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "publish: interrupted while committing")
		}
		return withLeftover(describe(opts.URL, err), opts.URL, tx)
	}
	res := rmResult{Seq: p.Seq, Generation: p.Generation, Parent: p.Parent, Into: opts.Into, Removed: len(removed), Kept: kept, Rebased: tx.Rebased(), Carried: tx.CarriedBy() != ""}
	if opts.JSON {
		return writeJSON(stdout, res)
	}
	rebased := rebaseNote(res.Rebased, res.Carried)
	fmt.Fprintf(opts.out(stdout), "committed seq %d generation %s: removed %s under %s, kept %s%s\n",
		res.Seq, res.Generation, plural(res.Removed, "file"), res.Into, plural(res.Kept, "file"), rebased)
	return nil
}

// rebaseNote is what a commit's line says of its rebases and of a commit
// of another writer that carried it.
func rebaseNote(rebased int, carried bool) string {
	var note string
	if rebased > 0 {
		note = fmt.Sprintf("; rebased %s on other writers' commits", plural(rebased, "time"))
	}
	if carried {
		note += "; committed within another writer's commit (group commit)"
	}
	return note
}
