package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
)

type rollbackOptions struct {
	*globalOptions
	URL     string
	To      string
	Tag     string
	Message string
}

func newRollbackCommand(g *globalOptions) *cobra.Command {
	opts := rollbackOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "rollback URL --to SEQ|GEN|tag:NAME",
		Short: "Commit a retained generation's files again, as a new generation",
		Long: `Rollback makes a new commit whose files are those of a retained older
generation, named by seq number, generation id or tag (--tag NAME). History is not rewritten:
the new commit has the next seq, and the generations in between stay in the
log until the collector removes them.

The new commit references the older generation's objects: nothing is
copied, and a rollback writes one manifest whatever the size of the data.
It first proves that those objects still exist (about one LIST request per
1,000 files); if one is missing or damaged, the rollback fails, naming it,
and nothing changes.
The older generation must still be retained (see 'publish gc --keep/--grace'
and 'publish pin'). Rollback pins it for the commit. The collector publishes
the lowest seq of its retention window as the pointer's gc_floor before it
deletes anything older; a generation below the floor is accepted only if
another live pin held it when the rollback's pin was written (a pinned
generation is kept below the floor). Otherwise, or if a collection moves
the floor past the older generation before the rollback pinned it, the
rollback is refused (status 6) and nothing changes.

A rollback to the files the current generation holds already, in the same
objects (a second rollback to the same version, say), prints "unchanged"
and commits nothing, as put does for an unchanged tree.

Like put, rollback exits with status 3 if another writer commits first.` + exitStatus(exitOK, exitError, exitUsage, exitLost, exitUnknown, exitFenced, exitInterrupted),
		Example: `  publish rollback s3://bucket/daily --to 41
  publish rollback s3://bucket/daily --tag release-2026-11-24
  publish rollback file:///srv/datasets/app --to 0190f0e4-7b7c-7c3e-9a4e-2f1d7a9c1b2e -m "bad release"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL = args[0]
			return runRollback(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&opts.To, "to", "", "the seq number, generation id or tag:NAME to roll back to")
	cmd.Flags().StringVarP(&opts.Message, "message", "m", "", "commit message (default: \"rollback to seq N\")")
	cmd.Flags().StringVar(&opts.Tag, "tag", "", "the tag naming the generation to roll back to")
	cmd.MarkFlagsOneRequired("to", "tag")
	cmd.MarkFlagsMutuallyExclusive("to", "tag")
	return cmd
}

// sameFiles reports whether two generations hold the same files in the
// same objects: the same paths, each with the same object key, encoding,
// size, sha256 and mode. A rollback's commit references the target's
// objects, so the generation it commits is like that; a generation with
// the same content in other objects is not, and the rollback goes ahead
// (proving the target's objects first).
func sameFiles(a, b []generation.Entry) bool {
	return slices.EqualFunc(a, b, func(x, y generation.Entry) bool {
		return x.Path == y.Path && x.Key == y.Key && x.Encoding == y.Encoding &&
			x.Size == y.Size && x.SHA256 == y.SHA256 && x.Mode == y.Mode
	})
}

// rollbackPinTTL is how long the pin that holds a rollback's target lasts
// if the rollback dies before releasing it.
const rollbackPinTTL = 15 * time.Minute

func runRollback(ctx context.Context, opts rollbackOptions, stdout io.Writer) error {
	if opts.Tag != "" {
		opts.To = commit.TagRefPrefix + opts.Tag
	}
	if err := checkRef(opts.To); err != nil {
		return err
	}
	d, err := opts.openDataset(ctx, opts.URL)
	if err != nil {
		return err
	}
	target, err := openSnapshot(ctx, d, opts.URL, opts.To)
	if err != nil {
		return err
	}
	current, err := openSnapshot(ctx, d, opts.URL, "")
	if err != nil {
		return err
	}
	if sameFiles(current.Files(), target.Files()) {
		// As put of an unchanged tree: a commit would change nothing.
		res := putResult{Seq: current.Seq(), Generation: current.Generation(), Parent: current.Pointer.Parent,
			Files: len(target.Files()), Bytes: target.Manifest.TotalSize(), Unchanged: true}
		res.Reused = res.Files
		if opts.JSON {
			return writeJSON(stdout, res)
		}
		fmt.Fprintf(opts.out(stdout), "unchanged: seq %d generation %s already holds the files of seq %d (%s, %s); nothing committed\n",
			res.Seq, res.Generation, target.Seq(), plural(res.Files, "file"), humanBytes(res.Bytes))
		return nil
	}
	// A pin holds the target for the commit: the collector keeps it, and
	// the commit may then reference it even below the collector's floor.
	pin, err := target.Pin(ctx, rollbackPinTTL, "rollback")
	if errors.Is(err, commit.ErrCollected) {
		err = fmt.Errorf("%w: %w", commit.ErrStale, err) // refused by the floor: status 6, as the commit guard
	}
	if err != nil {
		return describe(opts.URL, err)
	}
	defer pin.Release(context.WithoutCancel(ctx)) //nolint:errcheck // best effort; it expires anyway
	tx, err := d.Begin(ctx)
	if err != nil {
		return describe(opts.URL, err)
	}
	tx.KeepFrom(target)
	tx.HoldPin(pin)
	msg := opts.Message
	if msg == "" {
		msg = fmt.Sprintf("rollback to seq %d", target.Seq())
	}
	p, err := tx.Commit(ctx, commit.CommitOptions{
		Message: msg,
		Meta:    map[string]string{"rollback-to-seq": strconv.FormatUint(target.Seq(), 10), "rollback-to-generation": target.Generation()},
	})
	if err != nil {
		if errors.Is(err, commit.ErrCommitUnknown) {
			return fmt.Errorf("%w\ngeneration %s was kept; run 'publish show %s' to see whether it is current", err, tx.Generation(), redact(opts.URL))
		}
		return withLeftover(describe(opts.URL, err), opts.URL, tx)
	}
	res := putResult{Seq: p.Seq, Generation: p.Generation, Parent: p.Parent, Files: len(target.Files()), Bytes: target.Manifest.TotalSize(), Fence: p.Fence}
	res.Reused = res.Files
	if opts.JSON {
		return writeJSON(stdout, res)
	}
	fmt.Fprintf(opts.out(stdout), "committed seq %d generation %s: the files of seq %d (%s, %s, by reference)\n",
		res.Seq, res.Generation, target.Seq(), plural(res.Files, "file"), humanBytes(res.Bytes))
	return nil
}
