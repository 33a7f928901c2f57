package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/store"
)

type pinOptions struct {
	*globalOptions
	URL   string
	Ref   refFlags
	TTL   time.Duration
	Owner string
	List  bool
}

func newPinCommand(g *globalOptions) *cobra.Command {
	opts := pinOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "pin URL",
		Short: "Keep a snapshot from being collected for a while",
		Long: `Pin writes a pin for the current generation (or the retained one that --seq
or --gen names) and prints its key. The collector keeps a pinned generation
until the pin expires, --ttl after it was written, judged by the store's
clock. Run pin again to pin for longer, and 'publish unpin URL KEY' to drop
a pin early. --list lists the pins of the dataset.` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish pin --ttl 24h s3://bucket/daily
  publish pin --seq 41 --ttl 168h s3://bucket/daily
  publish pin --list s3://bucket/daily`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL = args[0]
			return runPin(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	opts.Ref.AddFlags(cmd)
	cmd.Flags().DurationVar(&opts.TTL, "ttl", time.Hour, "how long the pin holds, from now in the store's clock")
	cmd.Flags().StringVar(&opts.Owner, "owner", "", "who holds the pin (informational; default host:pid)")
	cmd.Flags().BoolVar(&opts.List, "list", false, "list the dataset's pins instead of writing one")
	return cmd
}

type pinInfo struct {
	Key        string    `json:"key"`
	Generation string    `json:"generation"`
	TTL        string    `json:"ttl"`
	Written    time.Time `json:"written,omitzero"`
	Expires    time.Time `json:"expires,omitzero"`
	Seq        uint64    `json:"seq,omitempty"`
}

func runPin(ctx context.Context, opts pinOptions, stdout, _ io.Writer) error {
	if opts.List {
		return listPins(ctx, opts, stdout)
	}
	if opts.TTL <= 0 {
		return usagef("--ttl must be positive")
	}
	snap, err := opts.openRef(ctx, opts.URL, opts.Ref)
	if err != nil {
		return err
	}
	owner := opts.Owner
	if owner == "" {
		host, _ := os.Hostname()
		owner = host + ":" + strconv.Itoa(os.Getpid())
	}
	p, err := snap.Pin(ctx, opts.TTL, owner)
	if err != nil {
		return describe(opts.URL, err)
	}
	info := pinInfo{Key: p.Key, Generation: snap.Generation(), Seq: snap.Seq(), TTL: p.TTL.String()}
	if opts.JSON {
		return writeJSON(stdout, info)
	}
	fmt.Fprintf(opts.out(stdout), "pinned seq %d generation %s for %s: %s\n", info.Seq, info.Generation, info.TTL, info.Key)
	return nil
}

func listPins(ctx context.Context, opts pinOptions, stdout io.Writer) error {
	s, err := opts.openStore(ctx, opts.URL)
	if err != nil {
		return err
	}
	pins := []pinInfo{}
	for o, err := range store.List(ctx, s, commit.PinDir, "", "") {
		if err != nil {
			return describe(opts.URL, err)
		}
		gen, ttl, err := commit.ParsePinKey(o.Key)
		if err != nil {
			continue // not a pin; the collector ignores it too
		}
		pins = append(pins, pinInfo{Key: o.Key, Generation: gen, TTL: ttl.String(), Written: o.LastModified, Expires: o.LastModified.Add(ttl)})
	}
	if opts.JSON {
		return writeJSON(stdout, pins)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GENERATION\tTTL\tEXPIRES\tKEY")
	for _, p := range pins {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Generation, p.TTL, formatTime(p.Expires), p.Key)
	}
	return tw.Flush()
}
