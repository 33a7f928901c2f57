package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

type statusOptions struct {
	*globalOptions
	Src, URL    string
	Concurrency int
	sourceOptions
}

func newStatusCommand(g *globalOptions) *cobra.Command {
	opts := statusOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "status SRC URL",
		Short: "Compare a local directory with the dataset's current generation",
		Long: `Status compares SRC, a directory or a single file, with the current
generation of the dataset at URL, and writes nothing to the store. It
selects the files of SRC as put does (--links, the filters, --into, a local
store inside SRC left out) and compares them as a put would: by path, size
and sha256, hashing only the files whose size matches. Modification times
are not compared.

Each line on stdout is one file that differs, sorted by path:

  A path   in SRC, not in the dataset
  M path   in both, with another size or sha256
  m path   the same content, but put would record another mode
  D path   in the dataset, not in SRC

-v also lists the files that are the same ("= path"). With --into PREFIX/,
SRC stands for the subtree PREFIX/: the paths carry the prefix, and the
files outside it are not compared. Against a dataset without commits every
file of SRC is "A". A one-line summary goes to stderr ("3 added, 1
modified, 2 deleted, 120 unchanged against seq 41 generation ..."), unless
-q or --json; --json writes the lists, the number of files that are the
same, and the seq and generation compared with (none for a dataset without
commits).

Status reads the pointer and the manifest only (s3:GetObject), never the
dataset's data objects. The exit status says whether there is anything to
publish: 0 when SRC and the dataset hold the same files, 8 when they
differ, and 1 only for an error.

` + filterHelp + exitStatus(exitOK, exitError, exitUsage, exitDiffers, exitInterrupted),
		Example: `  publish status ./out s3://bucket/daily
  publish status --into region=eu/ ./out-eu s3://bucket/sales
  publish status --exclude '*.tmp' ./out file:///srv/datasets/app || publish put --exclude '*.tmp' ./out file:///srv/datasets/app
  publish status --json ./out s3://bucket/daily`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Src, opts.URL = args[0], args[1]
			return runStatus(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().IntVar(&opts.Concurrency, "concurrency", 16, "files hashed in parallel")
	opts.sourceOptions.addFlags(cmd, "compare SRC with the subtree `PREFIX/` of the dataset only")
	return cmd
}

// statusResult is what status reports: the files that differ between SRC
// and the current generation (under Into), each list sorted by path.
type statusResult struct {
	// Seq and Generation name the generation compared with; 0 and "" for
	// a dataset without commits.
	Seq        uint64 `json:"seq"`
	Generation string `json:"generation"`
	Into       string `json:"into,omitempty"`
	// Added are in SRC only; Modified in both, with another size or
	// sha256; ModeChanged the same content, but put would record another
	// mode; Deleted in the dataset only.
	Added       []string `json:"added"`
	Modified    []string `json:"modified"`
	ModeChanged []string `json:"mode_changed"`
	Deleted     []string `json:"deleted"`
	// Unchanged counts the files that are the same; with -v
	// UnchangedPaths lists them.
	Unchanged      int      `json:"unchanged"`
	UnchangedPaths []string `json:"unchanged_paths,omitempty"`
}

// differs reports whether SRC and the dataset hold different files.
func (r statusResult) differs() bool {
	return len(r.Added)+len(r.Modified)+len(r.ModeChanged)+len(r.Deleted) > 0
}

func runStatus(ctx context.Context, opts statusOptions, stdout, stderr io.Writer) error {
	if opts.Concurrency < 1 {
		return usagef("--concurrency must be at least 1")
	}
	// Look at SRC before the store, as put does.
	files, err := collectSource(ctx, opts.globalOptions, &opts.sourceOptions, opts.Src, opts.URL, stderr)
	if err != nil {
		return err
	}
	d, err := opts.openDataset(ctx, opts.URL)
	if err != nil {
		return err
	}
	base, err := readPutBase(ctx, d, opts.URL, opts.Into)
	if err != nil {
		return err
	}
	matches, err := base.compare(ctx, files, opts.Concurrency, true)
	if err != nil {
		return err
	}

	res := statusResult{Into: opts.Into, Added: []string{}, Modified: []string{}, ModeChanged: []string{}, Deleted: base.missing(files)}
	if base.snap != nil {
		res.Seq, res.Generation = base.snap.Seq(), base.snap.Generation()
	}
	if res.Deleted == nil {
		res.Deleted = []string{}
	}
	type line struct{ op, path string }
	lines := make([]line, 0, len(files)+len(res.Deleted))
	for i, f := range files {
		m := matches[i]
		switch {
		case !m.inBase:
			res.Added = append(res.Added, f.path)
			lines = append(lines, line{"A", f.path})
		case !m.same:
			res.Modified = append(res.Modified, f.path)
			lines = append(lines, line{"M", f.path})
		case m.modeDiffers:
			res.ModeChanged = append(res.ModeChanged, f.path)
			lines = append(lines, line{"m", f.path})
		default:
			res.Unchanged++
			if opts.Verbose >= 1 {
				res.UnchangedPaths = append(res.UnchangedPaths, f.path)
				lines = append(lines, line{"=", f.path})
			}
		}
	}
	for _, p := range res.Deleted {
		lines = append(lines, line{"D", p})
	}
	for _, l := range [][]string{res.Added, res.Modified, res.ModeChanged, res.UnchangedPaths} {
		slices.Sort(l)
	}
	slices.SortFunc(lines, func(a, b line) int { return strings.Compare(a.path, b.path) })

	if opts.JSON {
		if err := writeJSON(stdout, res); err != nil {
			return err
		}
	} else {
		for _, l := range lines {
			fmt.Fprintf(stdout, "%s %s\n", l.op, l.path)
		}
		at := "a dataset without commits"
		if base.snap != nil {
			at = fmt.Sprintf("seq %d generation %s", res.Seq, res.Generation)
		}
		if opts.Into != "" {
			at += " under " + opts.Into
		}
		var mode string
		if len(res.ModeChanged) > 0 {
			mode = fmt.Sprintf(", %d mode changed", len(res.ModeChanged))
		}
		fmt.Fprintf(opts.out(stderr), "%d added, %d modified%s, %d deleted, %d unchanged against %s\n",
			len(res.Added), len(res.Modified), mode, len(res.Deleted), res.Unchanged, at)
	}
	if res.differs() {
		// A status of its own, and no message: nothing failed.
		return &statusError{code: exitDiffers}
	}
	return nil
}
