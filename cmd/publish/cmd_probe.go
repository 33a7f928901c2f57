package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/store"
)

type probeOptions struct {
	*globalOptions
	URL string
}

func newProbeCommand(g *globalOptions) *cobra.Command {
	opts := probeOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "probe URL",
		Short: "Check that the store enforces conditional writes",
		Long: `Probe proves that the store behind URL enforces the two conditions commitptr
relies on. It creates a scratch object under _probe/, sends a
create-if-absent (If-None-Match: *) that must be refused, replaces the object
by a compare-and-swap (If-Match) on its version token (an ETag; on gs:// a
generation), sends a compare-and-swap on the now stale first token that must
be refused, and deletes the object again: five requests, and on S3 one more
to ask whether the bucket keeps versions.

It also says whether the bucket keeps versions. On one that does, every
delete of commitptr removes all versions of the key, and the probe leaves
none of its scratch object behind; see OPERATIONS.md for the lifecycle
rules that such a bucket needs for the versions of the pointer and leases.

Some S3-compatible stores accept these headers and silently ignore them;
on such a store concurrent commits would overwrite each other. put runs this
check before the first commit of a dataset and refuses to write if it fails.` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted) + `
  (1 also when the store does not enforce the conditions)`,
		Example: `  publish probe s3://bucket
  publish probe gs://bucket
  publish probe --endpoint https://s3.example.com --path-style s3://bucket/prefix`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL = args[0]
			return runProbe(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	return cmd
}

func runProbe(ctx context.Context, opts probeOptions, stdout, stderr io.Writer) error {
	s, err := opts.openStore(ctx, opts.URL)
	if err != nil {
		return err
	}
	if err := probeStore(ctx, s, opts.URL, stderr); err != nil {
		return probeError(opts.URL, err)
	}
	versioning, verr := "unknown", error(nil)
	if v, err := store.BucketVersioning(ctx, s); err != nil {
		verr = err
	} else {
		versioning = v.String()
	}
	if opts.JSON {
		out := map[string]any{"url": redact(opts.URL), "enforced": true, "versioning": versioning}
		if verr != nil {
			out["versioning_error"] = verr.Error()
		}
		return writeJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "ok: %s enforces If-None-Match and If-Match\n", redact(opts.URL))
	switch {
	case verr != nil:
		fmt.Fprintf(stdout, "versioning: unknown: %v\n", verr)
	case versioning == store.VersioningOn.String():
		fmt.Fprintf(stdout, "versioning: on: deletes remove every version of a key; the pointer and leases keep theirs until a lifecycle rule expires them\n")
	default:
		fmt.Fprintf(stdout, "versioning: off\n")
	}
	return nil
}
