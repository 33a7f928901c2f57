package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/store"
)

type unpinOptions struct {
	*globalOptions
	URL  string
	Keys []string
	Gen  string
}

func newUnpinCommand(g *globalOptions) *cobra.Command {
	opts := unpinOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "unpin URL [KEY...]",
		Short: "Remove pins",
		Long: `Unpin removes the pins named by their keys (as printed by 'publish pin'), or
with --gen every pin of one generation. Removing a pin that is already gone
is not an error: unpin says so and exits 0. Keys that are not pin keys are refused, so unpin cannot
remove anything else.` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish unpin s3://bucket/daily _pin/0190f0e4-7b7c-7c3e-9a4e-2f1d7a9c1b2e/86400000-6f1c...
  publish unpin --gen 0190f0e4-7b7c-7c3e-9a4e-2f1d7a9c1b2e s3://bucket/daily`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL, opts.Keys = args[0], args[1:]
			return runUnpin(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&opts.Gen, "gen", "", "remove every pin of this generation")
	return cmd
}

func runUnpin(ctx context.Context, opts unpinOptions, stdout, _ io.Writer) error {
	switch {
	case len(opts.Keys) == 0 && opts.Gen == "":
		return usagef("name the pins to remove: their keys (as 'publish pin --list %s' prints them) or --gen GENERATION", redact(opts.URL))
	case len(opts.Keys) > 0 && opts.Gen != "":
		return usagef("name pin keys or --gen, not both")
	}
	for _, k := range opts.Keys {
		if _, _, err := commit.ParsePinKey(k); err != nil {
			return &usageError{err}
		}
	}
	if opts.Gen != "" {
		if err := generation.Valid(opts.Gen); err != nil {
			return &usageError{err}
		}
	}
	s, err := opts.openStore(ctx, opts.URL)
	if err != nil {
		return err
	}
	// A pin already gone is reported, not an error: it may have expired
	// and been collected, or an earlier unpin removed it. A pin whose HEAD
	// fails otherwise (a policy without s3:GetObject) is deleted unchecked.
	keys, gone := []string{}, []string{}
	for _, k := range opts.Keys {
		if _, err := s.Head(ctx, k); errors.Is(err, store.ErrNotExist) {
			gone = append(gone, k)
			continue
		}
		keys = append(keys, k)
	}
	if opts.Gen != "" {
		for o, err := range store.List(ctx, s, commit.PinDir+opts.Gen+"/", "", "") {
			if err != nil {
				return describe(opts.URL, err)
			}
			if _, _, err := commit.ParsePinKey(o.Key); err == nil {
				keys = append(keys, o.Key)
			}
		}
	}
	if len(keys) > 0 {
		if err := s.DeleteMany(ctx, keys); err != nil {
			return describe(opts.URL, err)
		}
	}
	if opts.JSON {
		return writeJSON(stdout, map[string]any{"removed": keys, "already_gone": gone})
	}
	out := opts.out(stdout)
	for _, k := range gone {
		fmt.Fprintf(out, "pin %s was already gone\n", k)
	}
	if opts.Gen != "" && len(keys) == 0 {
		fmt.Fprintf(out, "generation %s has no pins\n", opts.Gen)
	}
	fmt.Fprintf(out, "removed %s\n", plural(len(keys), "pin"))
	return nil
}
