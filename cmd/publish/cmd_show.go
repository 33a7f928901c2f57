package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
)

type showOptions struct {
	*globalOptions
	URL string
	Ref refFlags
}

func newShowCommand(g *globalOptions) *cobra.Command {
	opts := showOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "show URL",
		Short: "Show the pointer and a summary of the current generation's manifest",
		Long: `Show prints the dataset's pointer (seq, generation, parent, fencing token,
the collector's horizon, who committed and when) and a summary of the
manifest it names (files, bytes, how many files are reused from older
generations). With --seq or --gen it summarises that retained generation
instead; the pointer shown is still the current one.

After a put ended with status 5 (outcome unknown), show tells whether its
generation is the current one.` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish show s3://bucket/daily
  publish show --json file:///srv/datasets/app | jq .pointer.seq`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL = args[0]
			return runShow(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	opts.Ref.AddFlags(cmd)
	return cmd
}

// manifestSummary is what show, log and put report about a generation.
type manifestSummary struct {
	Generation   string            `json:"generation"`
	Seq          uint64            `json:"seq"`
	Parent       string            `json:"parent,omitempty"`
	StagingStart time.Time         `json:"staging_start"`
	Writer       string            `json:"writer,omitempty"`
	Message      string            `json:"message,omitempty"`
	Meta         map[string]string `json:"meta,omitempty"`
	Files        int               `json:"files"`
	Bytes        int64             `json:"bytes"`
	Reused       int               `json:"reused"`
	// Carried are the other writers whose changes this generation applied
	// with its own (group commit).
	Carried []generation.Carried `json:"carried,omitempty"`
}

func summarize(m *generation.Manifest) manifestSummary {
	s := manifestSummary{
		Generation: m.Generation, Seq: m.Seq, Parent: m.Parent, StagingStart: m.StagingStart,
		Writer: m.Writer, Message: m.Message, Meta: m.Meta, Files: len(m.Entries), Bytes: m.TotalSize(),
		Carried: m.Carried,
	}
	for _, e := range m.Entries {
		if generation.FromKey(e.Key) != m.Generation {
			s.Reused++
		}
	}
	return s
}

type showResult struct {
	Pointer  *pointer.Pointer `json:"pointer"`
	Manifest manifestSummary  `json:"manifest"`
}

func runShow(ctx context.Context, opts showOptions, stdout, _ io.Writer) error {
	snap, err := opts.openRef(ctx, opts.URL, opts.Ref)
	if err != nil {
		return err
	}
	res := showResult{Pointer: snap.Pointer, Manifest: summarize(snap.Manifest)}
	if opts.JSON {
		return writeJSON(stdout, res)
	}
	p, m := res.Pointer, res.Manifest
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "dataset\t%s\n", redact(opts.URL))
	fmt.Fprintf(tw, "pointer\t%s (format %d)\n", pointer.Key, p.Format)
	fmt.Fprintf(tw, "seq\t%d\n", p.Seq)
	fmt.Fprintf(tw, "generation\t%s\n", p.Generation)
	if p.Parent != "" {
		fmt.Fprintf(tw, "parent\t%s\n", p.Parent)
	}
	fmt.Fprintf(tw, "committed\t%s by %s\n", formatTime(p.CommittedAt), p.Writer)
	if p.Message != "" {
		fmt.Fprintf(tw, "message\t%s\n", p.Message)
	}
	if len(p.Meta) > 0 {
		fmt.Fprintf(tw, "meta\t%s\n", formatMeta(p.Meta))
	}
	if p.Fence != 0 {
		fmt.Fprintf(tw, "fence\t%d (unnamed lease)\n", p.Fence)
	}
	for _, id := range slices.Sorted(maps.Keys(p.Fences)) {
		fmt.Fprintf(tw, "fence\t%d (%s)\n", p.Fences[id], id)
	}
	if p.FencedOnly {
		fmt.Fprintf(tw, "fenced only\tcommits without a fencing token are refused\n")
	}
	if !p.GCHorizon.IsZero() {
		fmt.Fprintf(tw, "gc horizon\t%s\n", formatTime(p.GCHorizon))
	}
	fmt.Fprintf(tw, "manifest\t%s (sha256 %s)\n", p.Manifest, p.ManifestSHA256)
	if m.Generation != p.Generation {
		fmt.Fprintf(tw, "showing\tseq %d generation %s (%s)\n", m.Seq, m.Generation, m.Message)
	}
	fmt.Fprintf(tw, "files\t%d, %s (%d reused from older generations)\n", m.Files, humanBytes(m.Bytes), m.Reused)
	fmt.Fprintf(tw, "staged\t%s by %s\n", formatTime(m.StagingStart), m.Writer)
	if len(m.Carried) > 0 {
		fmt.Fprintf(tw, "carried\tthe changes of %s with its own (group commit)\n", plural(len(m.Carried), "other writer"))
	}
	return tw.Flush()
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func formatMeta(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, " ")
}
