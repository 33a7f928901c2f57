package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/generation"
)

// sourceOptions are the flags that select the files of SRC and the
// dataset paths they stand for: put publishes them, status compares them.
type sourceOptions struct {
	Links   string
	Filters filters
	// Into is --into: SRC stands for the subtree PREFIX/ of the dataset,
	// and the files outside it are left alone.
	Into string
}

// addFlags registers --links, --into (described by intoUsage) and the
// filters.
func (o *sourceOptions) addFlags(cmd *cobra.Command, intoUsage string) {
	f := cmd.Flags()
	f.StringVar(&o.Links, "links", "refuse", "what to do with a symbolic link in SRC: refuse, skip, follow (only to a target inside SRC) or follow-any")
	f.StringVar(&o.Into, "into", "", intoUsage)
	o.Filters.AddFlags(cmd, "SRC")
}

// collectSource lists the files of src that o selects, with their dataset
// paths (under --into's prefix), reading nothing of the store. A local
// store at rawURL inside src is left out, and said so with -v.
func collectSource(ctx context.Context, g *globalOptions, o *sourceOptions, src, rawURL string, stderr io.Writer) ([]srcFile, error) {
	links, err := parseLinkMode(o.Links)
	if err != nil {
		return nil, err
	}
	if o.Into != "" {
		if err := checkInto(o.Into); err != nil {
			return nil, err
		}
	}
	files, err := collectExcept(ctx, src, links, &o.Filters, localStoreDir(rawURL), func(local, rel string) {
		g.fileAction(stderr, "excluded", rel+"/ (the store's own directory)")
	})
	if err != nil {
		return nil, err
	}
	for i := range files {
		files[i].path = o.Into + files[i].path
		if o.Into != "" {
			if err := generation.CheckPath(files[i].path); err != nil {
				return nil, fmt.Errorf("SRC %s: %s cannot be published under --into %s: %w", src, files[i].local, o.Into, err)
			}
		}
	}
	return files, nil
}
