//go:build !linux

package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// syncAll makes everything written below dir durable with an fsync of each
// file and directory: there is no syncfs(2) here.
func syncAll(dir string) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", p, err)
		}
		return nil
	})
}

// becomeSubreaper does nothing: this system has no subreapers, and the
// orphans of our descendants go to init, which reaps them.
func becomeSubreaper() error { return nil }
