package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

type fencesOptions struct {
	*globalOptions
	URL                    string
	Require, AllowUnfenced bool
	// Forget is the lease identity whose fence to remove, if forget is set.
	Forget string
	forget bool
}

func newFencesCommand(g *globalOptions) *cobra.Command {
	opts := fencesOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "fences URL",
		Short: "Show the fencing tokens the dataset has seen, or take fenced writers only",
		Long: `Fences prints, per lease, the highest fencing token that has committed to the
dataset at URL or was registered by a writer that acquired the lease, and
whether the dataset takes fenced writers only.

A token means something only for the lease that issued it, named by the
lease's identity: its store without credentials plus its key, as
'publish run' exports it in COMMITPTR_LEASE_ID. A commit carrying a lower
token of the same lease is refused (status 6); tokens of different leases
are never compared. A commit without a token is not fenced, unless
--require made the dataset take fenced writers only; --allow-unfenced
undoes that. Either change is one conditional write of the pointer and
changes nothing else.

The pointer keeps the fences of at most 100 leases, of identities up to 512
bytes; a commit or a registration of another lease is then refused.
--forget ID removes the fence of lease ID ('' for the unnamed lease), one
conditional write too. It is your call, not the tool's: it re-admits that
lease's lower tokens, so a former holder paused past its TTL could commit
again. Forget only leases that no writer holds or will wake up holding.` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish fences s3://bucket/daily
  publish fences --require s3://bucket/daily
  publish fences --forget s3://bucket/jobs/_lease/nightly-0412 s3://bucket/daily`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL = args[0]
			if opts.Require && opts.AllowUnfenced {
				return usagef("--require and --allow-unfenced exclude each other")
			}
			opts.forget = cmd.Flags().Changed("forget")
			return runFences(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&opts.Require, "require", false, "refuse commits that carry no fencing token from now on")
	cmd.Flags().BoolVar(&opts.AllowUnfenced, "allow-unfenced", false, "take commits without a fencing token again")
	cmd.Flags().StringVar(&opts.Forget, "forget", "", "remove the fence of the lease with this identity (re-admits its lower tokens)")
	return cmd
}

type fencesResult struct {
	// Fences maps a lease identity to its highest token; "" is the unnamed
	// lease (tokens given without an identity, and pointers of older
	// versions).
	Fences     map[string]uint64 `json:"fences"`
	FencedOnly bool              `json:"fenced_only"`
}

func runFences(ctx context.Context, opts fencesOptions, stdout io.Writer) error {
	d, err := opts.openDataset(ctx, opts.URL)
	if err != nil {
		return err
	}
	if opts.Require || opts.AllowUnfenced {
		if err := d.SetFencedOnly(ctx, opts.Require); err != nil {
			return describe(opts.URL, err)
		}
	}
	if opts.forget {
		if err := d.ForgetFence(ctx, opts.Forget); err != nil {
			return describe(opts.URL, err)
		}
	}
	p, _, err := pointer.Read(ctx, d.Store())
	if errors.Is(err, store.ErrNotExist) {
		err = commit.ErrNoCommits
	}
	if err != nil {
		return describe(opts.URL, err)
	}
	res := fencesResult{Fences: maps.Clone(p.Fences), FencedOnly: p.FencedOnly}
	if res.Fences == nil {
		res.Fences = map[string]uint64{}
	}
	if p.Fence != 0 {
		res.Fences[""] = p.Fence
	}
	if opts.JSON {
		return writeJSON(stdout, res)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOKEN\tLEASE")
	for _, id := range slices.Sorted(maps.Keys(res.Fences)) {
		name := id
		if name == "" {
			name = "(unnamed lease)"
		}
		fmt.Fprintf(tw, "%d\t%s\n", res.Fences[id], name)
	}
	if res.FencedOnly {
		fmt.Fprintln(tw, "fenced writers only: commits without a token are refused")
	} else {
		fmt.Fprintln(tw, "commits without a token are taken")
	}
	return tw.Flush()
}
