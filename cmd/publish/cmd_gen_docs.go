package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

func newGenDocsCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-docs DIR",
		Short:  "Write the CLI reference as Markdown into DIR",
		Long:   "Gen-docs writes one Markdown page per command into DIR, replacing the pages there (docs/cli in the repository).",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return genDocs(cmd.Root(), args[0])
		},
	}
}

// genDocs writes the reference pages of root and its visible subcommands.
func genDocs(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "publish*.md"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	pages := docPages(root)
	for name, body := range pages {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// docPages renders a page per visible command, keyed by file name.
func docPages(root *cobra.Command) map[string][]byte {
	pages := map[string][]byte{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !documented(c) {
			return
		}
		pages[docFile(c)] = docPage(c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return pages
}

func documented(c *cobra.Command) bool {
	return c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand() || c == c.Root()
}

func docFile(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
}

func docPage(c *cobra.Command) []byte {
	c.InitDefaultHelpFlag()
	var b bytes.Buffer
	fmt.Fprintf(&b, "## %s\n\n%s\n\n", c.CommandPath(), c.Short)
	if c.Long != "" {
		fmt.Fprintf(&b, "### Synopsis\n\n```\n%s\n```\n\n", c.Long)
	}
	if c.Runnable() {
		fmt.Fprintf(&b, "```\n%s\n```\n\n", c.UseLine())
	}
	if c.Example != "" {
		fmt.Fprintf(&b, "### Examples\n\n```\n%s\n```\n\n", c.Example)
	}
	if f := c.NonInheritedFlags(); f.HasAvailableFlags() {
		fmt.Fprintf(&b, "### Options\n\n```\n%s```\n\n", f.FlagUsages())
	}
	if f := c.InheritedFlags(); f.HasAvailableFlags() {
		fmt.Fprintf(&b, "### Options inherited from parent commands\n\n```\n%s```\n\n", f.FlagUsages())
	}
	var see []string
	if p := c.Parent(); p != nil {
		see = append(see, fmt.Sprintf("* [%s](%s) - %s", p.CommandPath(), docFile(p), p.Short))
	}
	for _, sub := range c.Commands() {
		if documented(sub) {
			see = append(see, fmt.Sprintf("* [%s](%s) - %s", sub.CommandPath(), docFile(sub), sub.Short))
		}
	}
	if len(see) > 0 {
		fmt.Fprintf(&b, "### See also\n\n%s\n", strings.Join(see, "\n"))
	}
	return append(bytes.TrimRight(b.Bytes(), "\n"), '\n')
}
