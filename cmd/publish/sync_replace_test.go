package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyncReplacesADirectoryByTheSnapshotsFile: where DEST has a directory
// and the snapshot a file of that name, sync ends with the snapshot's file
// there and exits 0, whether the directory was empty or held files (which
// are reported deleted).
func TestSyncReplacesADirectoryByTheSnapshotsFile(t *testing.T) {
	tg := fileTargets(t)[0]
	url := tg.url(t)
	tg.ok(t, "put", writeTree(t, map[string]string{"x": "snapshot x", "y": "snapshot y"}), url)

	for name, dest := range map[string]func(t *testing.T) string{
		"empty": func(t *testing.T) string {
			dest := t.TempDir()
			require.NoError(t, os.Mkdir(filepath.Join(dest, "x"), 0o755))
			return dest
		},
		"with files": func(t *testing.T) string {
			return writeTree(t, map[string]string{"x/inner": "old", "x/deep/f": "old"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			dest := dest(t)
			r := tg.run(t, "sync", url, dest)
			require.Zero(t, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			assert.Equal(t, map[string]string{"x": "snapshot x", "y": "snapshot y"}, readTree(t, dest))
			if name == "with files" {
				assert.Contains(t, r.stdout, "2 deleted")
			}
		})
	}
}
