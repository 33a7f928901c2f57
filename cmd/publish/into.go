package main

import (
	"context"
	"strings"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
)

// checkInto refuses an --into prefix that is not a relative dataset path
// ending in "/".
func checkInto(prefix string) error {
	dir, ok := strings.CutSuffix(prefix, "/")
	if !ok {
		return usagef("--into %q: a prefix must end in '/' (did you mean %q?)", prefix, prefix+"/")
	}
	if err := generation.CheckPath(dir); err != nil {
		return usagef("--into %q: not a valid dataset path prefix: %v", prefix, err)
	}
	return nil
}

// intoPartition starts a put or rm --into prefix: it keeps every file of
// the base generation, removes those under prefix, and sets the commit to
// rebase within prefix. It returns the entries it removed and how many
// files it kept.
func intoPartition(ctx context.Context, tx *commit.Tx, prefix string) (map[string]generation.Entry, int, error) {
	if err := tx.KeepAll(ctx); err != nil {
		return nil, 0, err
	}
	removed := map[string]generation.Entry{}
	kept := 0
	for _, e := range tx.Entries() {
		if strings.HasPrefix(e.Path, prefix) {
			removed[e.Path] = e
			tx.Remove(e.Path)
		} else {
			kept++
		}
	}
	if err := tx.EnableRebase(commit.Rebase{Scope: prefix}); err != nil {
		return nil, 0, err
	}
	return removed, kept, nil
}
