package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/store"
)

// Shell completion (`publish completion bash|zsh|fish|powershell`)
// completes flag values that are fixed words, and, from the store, what is
// cheap to read there: seqs and generation ids of the recent history (one
// pointer GET and a manifest GET per generation, at most completeHistory),
// tag names (one LIST) and lease names (one LIST). A store that cannot be
// reached within completeTimeout completes nothing.
const (
	completeHistory = 20
	completeTimeout = 5 * time.Second
)

// fixedValues are the flags whose values are a fixed set of words.
var fixedValues = map[string][]string{
	"compress": {"none\tstore files as they are", "zstd\tcompress files with zstd"},
	"links": {
		"refuse\tfail on a symbolic link (the default)",
		"skip\tleave symbolic links out",
		"follow\tpublish what links inside SRC point to",
		"follow-any\tpublish what links point to, also outside SRC",
	},
}

// urlArg is the position of the dataset URL among each command's
// arguments, where it is not the first.
var urlArg = map[string]int{"put": 1}

// registerCompletions adds the completion functions to every command
// below root.
func registerCompletions(g *globalOptions, root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for name, words := range fixedValues {
			if c.Flags().Lookup(name) != nil {
				c.RegisterFlagCompletionFunc(name, func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) { //nolint:errcheck // the flag exists
					var out []cobra.Completion
					for _, w := range words {
						if strings.HasPrefix(w, toComplete) {
							out = append(out, w)
						}
					}
					return out, cobra.ShellCompDirectiveNoFileComp
				})
			}
		}
		from := func(list func(ctx context.Context, s store.Store, d *commit.Dataset) []string) cobra.CompletionFunc {
			return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return g.completeFrom(cmd, args, toComplete, list), cobra.ShellCompDirectiveNoFileComp
			}
		}
		flagFuncs := map[string]func(context.Context, store.Store, *commit.Dataset) []string{
			"seq":   seqs,
			"gen":   gens,
			"tag":   tags,
			"lease": leases,
			"to":    refs,
			"ref":   namedRefs,
		}
		for name, list := range flagFuncs {
			if c.Flags().Lookup(name) != nil {
				c.RegisterFlagCompletionFunc(name, from(list)) //nolint:errcheck // the flag exists
			}
		}
		var args func(context.Context, store.Store, *commit.Dataset) []string
		switch c.CommandPath() {
		case "publish lease acquire", "publish lease release", "publish lease status":
			args = leases
		case "publish tag":
			args = tags
		case "publish diff":
			args = refs
		}
		if args != nil && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = func(cmd *cobra.Command, a []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(a) == 0 {
					return nil, cobra.ShellCompDirectiveDefault // the URL: a local path, perhaps
				}
				return g.completeFrom(cmd, a, toComplete, args), cobra.ShellCompDirectiveNoFileComp
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completeFrom opens the dataset the command's arguments name and returns
// what list finds there that starts with toComplete.
func (g *globalOptions) completeFrom(cmd *cobra.Command, args []string, toComplete string, list func(context.Context, store.Store, *commit.Dataset) []string) []cobra.Completion {
	i := urlArg[cmd.Name()]
	if len(args) <= i {
		return nil
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
	defer cancel()
	if g.fromEnv() != nil {
		return nil
	}
	s, err := g.openStore(ctx, args[i])
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, c := range list(ctx, s, commit.New(s)) {
		if strings.HasPrefix(c, toComplete) {
			out = append(out, c)
		}
	}
	return out
}

// history yields the recent manifests, newest first.
func history(ctx context.Context, d *commit.Dataset, yield func(seq uint64, gen, msg string)) {
	snap, err := d.Open(ctx)
	if err != nil {
		return
	}
	n := 0
	for m, err := range d.History(ctx, snap) {
		if err != nil || n == completeHistory {
			return
		}
		yield(m.Seq, m.Generation, m.Message)
		n++
	}
}

func describeGen(msg string) string {
	if msg == "" {
		return ""
	}
	return "\t" + msg
}

func seqs(ctx context.Context, _ store.Store, d *commit.Dataset) []string {
	var out []string
	history(ctx, d, func(seq uint64, gen, msg string) {
		out = append(out, strconv.FormatUint(seq, 10)+describeGen(fmt.Sprintf("generation %s %s", gen, msg)))
	})
	return out
}

func gens(ctx context.Context, _ store.Store, d *commit.Dataset) []string {
	var out []string
	history(ctx, d, func(seq uint64, gen, msg string) {
		out = append(out, gen+describeGen(fmt.Sprintf("seq %d %s", seq, msg)))
	})
	return out
}

func tags(ctx context.Context, s store.Store, _ *commit.Dataset) []string {
	var out []string
	for o, err := range store.List(ctx, s, commit.TagDir, "", "") {
		if err != nil {
			return out
		}
		if name := strings.TrimPrefix(o.Key, commit.TagDir); commit.ValidTagName(name) == nil {
			out = append(out, name)
		}
	}
	return out
}

// refs are what diff and rollback --to take: seqs and tag:NAME.
func refs(ctx context.Context, s store.Store, d *commit.Dataset) []string {
	out := seqs(ctx, s, d)
	for _, t := range tags(ctx, s, d) {
		out = append(out, commit.TagRefPrefix+t)
	}
	return out
}

// namedRefs are what mount --ref takes, in commit.ParseRef's forms:
// current, @SEQ and tag:NAME.
func namedRefs(ctx context.Context, s store.Store, d *commit.Dataset) []string {
	out := []string{commit.Current.String()}
	for _, seq := range seqs(ctx, s, d) {
		out = append(out, "@"+seq)
	}
	for _, t := range tags(ctx, s, d) {
		out = append(out, commit.TagRefPrefix+t)
	}
	return out
}

// leases lists the names of the leases and epoch locks of the store.
func leases(ctx context.Context, s store.Store, _ *commit.Dataset) []string {
	seen := map[string]bool{}
	var out []string
	page := store.ListRequest{Prefix: lease.Dir, Delimiter: "/"}
	for {
		p, err := s.List(ctx, page)
		if err != nil {
			return out
		}
		names := make([]string, 0, len(p.Objects)+len(p.Prefixes))
		for _, o := range p.Objects {
			names = append(names, o.Key)
		}
		names = append(names, p.Prefixes...)
		for _, k := range names {
			name := strings.TrimSuffix(strings.TrimPrefix(k, lease.Dir), "/")
			if lease.CheckName(name) == nil && !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
		if p.Next == "" {
			return out
		}
		page.Token = p.Next
	}
}
