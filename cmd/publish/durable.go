package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/generation"
)

// fsync makes what one open file or directory holds durable. Tests
// replace it to see what get and sync make durable.
var fsync = (*os.File).Sync

// syncPaths fsyncs each file or directory named below root ("." is root
// itself), at most limit at a time. A file's fsync makes its content, mode
// and times durable; a directory's makes the names created, renamed or
// removed in it durable. Only what is named is synced, not the whole file
// system, so another writer's data on it does not slow this down.
func syncPaths(root *os.Root, names []string, limit int) error {
	var g errgroup.Group
	g.SetLimit(limit)
	for _, n := range names {
		g.Go(func() error {
			f, err := root.Open(n)
			if err != nil {
				return fmt.Errorf("sync %s: %w", filepath.Join(root.Name(), n), unwrapPathError(err))
			}
			defer f.Close()
			if err := fsync(f); err != nil {
				return fmt.Errorf("sync %s: %w", filepath.Join(root.Name(), n), err)
			}
			return nil
		})
	}
	return g.Wait()
}

// syncTree is syncPaths below the directory dir.
func syncTree(dir string, names []string, limit int) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return syncPaths(root, names, limit)
}

// syncDir fsyncs the directory dir, making the names in it durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := fsync(f); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// mkdirAll is os.MkdirAll that makes the directories it creates durable:
// it syncs the parent of each.
func mkdirAll(dir string) error {
	var created []string
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		created = append(created, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range created {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// treeDirs returns the directories that hold the entries' files, with
// every directory above them, "." included.
func treeDirs(entries []generation.Entry) []string {
	seen := map[string]bool{".": true}
	for _, e := range entries {
		for d := path.Dir(e.Path); d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
