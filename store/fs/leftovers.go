package fs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/commitptr/commitptr/store"
)

// SweepLeftovers implements store.LeftoverSweeper: it removes the temp
// files ("#tmp-…") in the directories under prefix whose modification time
// is more than olderThan ago, then the directories that leaves empty. A
// Put writes its temp file as the body arrives and touches it again just
// before publishing it, so only a Put whose body stalls for longer than
// olderThan can lose its temp file; it then fails, and nothing is
// published.
//
// A temp file does not record which key it was for, only its directory. A
// prefix that ends with "/" (or is empty) covers its directory and all
// below; any other prefix covers only the directory that holds it, not the
// directories below: "_pointer" sweeps the temp files next to the pointer.
func (s *Store) SweepLeftovers(ctx context.Context, prefix string, olderThan time.Duration) (store.Leftovers, error) {
	const op = "sweep-leftovers"
	var got store.Leftovers
	dirKey := prefix[:strings.LastIndex(prefix, "/")+1]
	flat := dirKey != prefix
	if flat && checkKey(prefix) != nil {
		return got, store.Wrap(op, prefix, nil, errBadKey)
	}
	top, ok := s.dirPath(dirKey)
	if !ok {
		return got, store.Wrap(op, prefix, nil, errBadKey)
	}
	cutoff := time.Now().Add(-olderThan)
	var emptied []string
	err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist) && path != top:
			return nil // pruned by a concurrent Delete
		case err != nil:
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		case d.IsDir():
			if path != top && (flat || strings.HasPrefix(d.Name(), "#")) {
				return filepath.SkipDir // below a flat prefix, or the lock directory
			}
			return nil
		case !d.Type().IsRegular() || !strings.HasPrefix(d.Name(), tmpPrefix):
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // published or removed meanwhile
		}
		if err != nil || !fi.ModTime().Before(cutoff) {
			return err
		}
		if err := os.Remove(path); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		got.Count++
		got.Bytes += fi.Size()
		emptied = append(emptied, filepath.Dir(path))
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) && dirKey != "" {
		if _, serr := os.Stat(s.root); serr == nil {
			err = nil // nothing was ever written under prefix
		}
	}
	// Deepest first, so that a parent is tried after its children.
	slices.SortFunc(emptied, func(a, b string) int { return strings.Compare(b, a) })
	for _, dir := range slices.Compact(emptied) {
		s.pruneDirs(dir)
	}
	if err != nil {
		return got, s.classify(op, prefix, err)
	}
	return got, nil
}
