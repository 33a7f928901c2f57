package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/generation"
)

type diffOptions struct {
	*globalOptions
	URL  string
	A, B string
}

func newDiffCommand(g *globalOptions) *cobra.Command {
	opts := diffOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "diff URL A [B]",
		Short: "Compare two snapshots",
		Long: `Diff compares the snapshots A and B of the dataset, each named by a seq
number, a generation id or tag:NAME; B defaults to the current snapshot. It compares
manifests only (paths, sizes, sha256 and modes), so it reads no data.

Each line is "+ path" (only in B), "- path" (only in A) or "M path" (content
or mode changed), with sizes, and with the modes when they differ
("M bin/run.sh (12 -> 12 bytes, mode 0644 -> 0755)"). A mode is compared only
where both snapshots recorded one. Modification times are not compared. The exit status does not depend on whether the
snapshots differ.` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish diff s3://bucket/daily 41
  publish diff s3://bucket/daily tag:release-2026-11-24
  publish diff --json s3://bucket/daily 40 41`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL, opts.A = args[0], args[1]
			if len(args) == 3 {
				opts.B = args[2]
			}
			return runDiff(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	return cmd
}

// diffEntry is one difference between two snapshots.
type diffEntry struct {
	Op      string `json:"op"` // "+", "-" or "M"
	Path    string `json:"path"`
	OldSize int64  `json:"old_size,omitempty"`
	NewSize int64  `json:"new_size,omitempty"`
	// OldMode and NewMode are set on "M" when the modes differ.
	OldMode string `json:"old_mode,omitempty"`
	NewMode string `json:"new_mode,omitempty"`
}

type diffResult struct {
	A       manifestSummary `json:"a"`
	B       manifestSummary `json:"b"`
	Changes []diffEntry     `json:"changes"`
}

func runDiff(ctx context.Context, opts diffOptions, stdout, _ io.Writer) error {
	for _, ref := range []string{opts.A, opts.B} {
		if ref == "" {
			continue
		}
		if err := checkRef(ref); err != nil {
			return err
		}
	}
	d, err := opts.openDataset(ctx, opts.URL)
	if err != nil {
		return err
	}
	a, err := openSnapshot(ctx, d, opts.URL, opts.A)
	if err != nil {
		return err
	}
	b, err := openSnapshot(ctx, d, opts.URL, opts.B)
	if err != nil {
		return err
	}
	res := diffResult{A: summarize(a.Manifest), B: summarize(b.Manifest), Changes: diffManifests(a.Manifest, b.Manifest)}
	if opts.JSON {
		return writeJSON(stdout, res)
	}
	fmt.Fprintf(stdout, "--- seq %d generation %s\n+++ seq %d generation %s\n", res.A.Seq, res.A.Generation, res.B.Seq, res.B.Generation)
	for _, c := range res.Changes {
		switch c.Op {
		case "+":
			fmt.Fprintf(stdout, "+ %s (%s)\n", c.Path, plural(c.NewSize, "byte"))
		case "-":
			fmt.Fprintf(stdout, "- %s (%s)\n", c.Path, plural(c.OldSize, "byte"))
		default:
			var mode string
			if c.OldMode != c.NewMode {
				mode = fmt.Sprintf(", mode %s -> %s", c.OldMode, c.NewMode)
			}
			fmt.Fprintf(stdout, "M %s (%d -> %d bytes%s)\n", c.Path, c.OldSize, c.NewSize, mode)
		}
	}
	return nil
}

// diffManifests merges two sorted entry lists.
func diffManifests(a, b *generation.Manifest) []diffEntry {
	out := []diffEntry{}
	i, j := 0, 0
	for i < len(a.Entries) || j < len(b.Entries) {
		switch {
		case j == len(b.Entries) || (i < len(a.Entries) && a.Entries[i].Path < b.Entries[j].Path):
			out = append(out, diffEntry{Op: "-", Path: a.Entries[i].Path, OldSize: a.Entries[i].Size})
			i++
		case i == len(a.Entries) || b.Entries[j].Path < a.Entries[i].Path:
			out = append(out, diffEntry{Op: "+", Path: b.Entries[j].Path, NewSize: b.Entries[j].Size})
			j++
		default:
			ea, eb := a.Entries[i], b.Entries[j]
			c := diffEntry{Op: "M", Path: ea.Path, OldSize: ea.Size, NewSize: eb.Size}
			if ea.Mode != "" && eb.Mode != "" && ea.Mode != eb.Mode {
				c.OldMode, c.NewMode = ea.Mode, eb.Mode
			}
			if ea.SHA256 != eb.SHA256 || ea.Size != eb.Size || c.OldMode != "" {
				out = append(out, c)
			}
			i++
			j++
		}
	}
	return out
}
