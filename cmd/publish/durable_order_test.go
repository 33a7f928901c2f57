package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tmpSyncName matches the temporary names of get and sync, to be replaced
// by the names they are renamed to.
var tmpSyncName = regexp.MustCompile(`(^|/)\.([^/]+)\.publish-(get|sync)-[0-9a-f]+`)

// syncedState is what a file or directory was like when it was synced.
type syncedState struct {
	name  string
	mode  fs.FileMode
	mtime time.Time
	// destExisted says whether the path watched by watchSyncs existed.
	destExisted bool
}

// watchSyncs makes fsync record, for the rest of the test, the state of
// each file and directory it syncs, and whether dest existed then.
func watchSyncs(t *testing.T, dest string) (synced func() []syncedState) {
	var mu sync.Mutex
	var got []syncedState
	real := fsync
	fsync = func(f *os.File) error {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		_, derr := os.Lstat(dest)
		mu.Lock()
		got = append(got, syncedState{tmpSyncName.ReplaceAllString(filepath.Clean(f.Name()), "$1$2"), fi.Mode(), fi.ModTime(), derr == nil})
		mu.Unlock()
		return real(f)
	}
	t.Cleanup(func() { fsync = real })
	return func() []syncedState {
		mu.Lock()
		defer mu.Unlock()
		return append([]syncedState(nil), got...)
	}
}

// failSyncOf makes fsync fail with EIO, for the rest of the test, on the
// file or directory name (temporary names counting as the final ones).
func failSyncOf(t *testing.T, name string) {
	real := fsync
	fsync = func(f *os.File) error {
		if tmpSyncName.ReplaceAllString(filepath.Clean(f.Name()), "$1$2") == name {
			return syscall.EIO
		}
		return real(f)
	}
	t.Cleanup(func() { fsync = real })
}

func syncedNames(states []syncedState) []string {
	var names []string
	for _, s := range states {
		names = append(names, s.name)
	}
	return names
}

// TestGetAndSyncSyncEveryDirectoryTheyCreateAboveDest: the parents of DEST
// that get or sync create, however many, are each made durable by a sync
// of the directory they were created in.
func TestGetAndSyncSyncEveryDirectoryTheyCreateAboveDest(t *testing.T) {
	u := memURL()
	ok(t, "put", writeTree(t, map[string]string{"d/e/f": "1"}), u)
	for _, cmd := range []string{"get", "sync"} {
		t.Run(cmd, func(t *testing.T) {
			base := t.TempDir()
			dest := filepath.Join(base, "new", "deeper", "dest")
			synced := watchSyncs(t, dest)
			ok(t, cmd, u, dest)
			want := []string{base, filepath.Join(base, "new"), filepath.Join(base, "new", "deeper"), dest}
			for _, p := range []string{"d", "d/e", "d/e/f"} {
				want = append(want, filepath.Join(dest, p))
			}
			assert.ElementsMatch(t, want, syncedNames(synced()))
		})
	}
}

// TestGetSyncsItsDownloadBeforeRenamingItToDest: every file and directory
// of get's download is synced before the download appears as DEST, DEST's
// own with its final mode, and the directory DEST appears in after.
func TestGetSyncsItsDownloadBeforeRenamingItToDest(t *testing.T) {
	u := memURL()
	ok(t, "put", writeTree(t, map[string]string{"a": "1", "d/b": "2", "d/e/c": "3"}), u)
	base := t.TempDir()
	dest := filepath.Join(base, "dest")
	synced := watchSyncs(t, dest)
	ok(t, "get", u, dest)
	states := synced()
	require.NotEmpty(t, states)
	for _, s := range states[:len(states)-1] {
		assert.False(t, s.destExisted, "%s was synced after the download was renamed to DEST", s.name)
		if s.name == dest {
			assert.Equal(t, fs.FileMode(0o755), s.mode.Perm(), "DEST was synced before its mode was set")
		}
	}
	last := states[len(states)-1]
	assert.Equal(t, base, last.name)
	assert.True(t, last.destExisted, "DEST's directory was synced before the rename")
}

// TestGetAndSyncSyncEachFileWithItsModeAndTime: a file is synced after it
// was given its recorded mode and modification time, so that they are
// durable too; for sync, both a file it downloads and a file whose content
// it keeps.
func TestGetAndSyncSyncEachFileWithItsModeAndTime(t *testing.T) {
	u := memURL()
	src := writeTree(t, map[string]string{"new": "n", "kept": "k"})
	when := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, p := range []string{"new", "kept"} {
		require.NoError(t, os.Chmod(filepath.Join(src, p), 0o640))
		require.NoError(t, os.Chtimes(filepath.Join(src, p), when, when))
	}
	ok(t, "put", src, u)

	check := func(t *testing.T, dest string, states []syncedState, files ...string) {
		t.Helper()
		for _, p := range files {
			full := filepath.Join(dest, p)
			var found bool
			for _, s := range states {
				if s.name == full {
					found = true
					assert.Equal(t, fs.FileMode(0o640), s.mode.Perm(), "%s was synced before its mode was set", p)
					assert.True(t, s.mtime.Equal(when), "%s was synced before its time was set: %v", p, s.mtime)
				}
			}
			assert.True(t, found, "%s was not synced", p)
		}
	}
	t.Run("get", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "dest")
		synced := watchSyncs(t, dest)
		ok(t, "get", u, dest)
		check(t, dest, synced(), "new", "kept")
	})
	t.Run("sync", func(t *testing.T) {
		dest := writeTree(t, map[string]string{"new": "old content", "kept": "k"})
		synced := watchSyncs(t, dest)
		ok(t, "sync", u, dest)
		check(t, dest, synced(), "new", "kept")
	})
}

// TestGetAndSyncFailWhenAFileOrDirectoryCannotBeSynced: when a sync of a
// file or directory fails, get and sync exit 1 naming it, as their result
// is not durable; get leaves no DEST and no temporary directory behind if
// the failure came before the rename, and sync deletes nothing if it came
// before the renames.
func TestGetAndSyncFailWhenAFileOrDirectoryCannotBeSynced(t *testing.T) {
	u := memURL()
	v1 := map[string]string{"keep": "k", "mode": "m", "chg/c": "c1", "ex/k": "k", "ex/gone": "g"}
	ok(t, "put", writeTree(t, v1), u)
	u2 := memURL()
	v2 := map[string]string{"keep": "k", "mode": "m", "chg/c": "c2", "ex/k": "k"}
	src := writeTree(t, v2)
	require.NoError(t, os.Chmod(filepath.Join(src, "mode"), 0o600))
	ok(t, "put", src, u2)

	for _, tc := range []struct {
		cmd, fail, says string
		// untouched: get leaves no DEST; sync leaves DEST as it was.
		untouched bool
	}{
		{"get", "dest/chg/c", `sync "chg/c": `, true},
		{"get", "dest/chg", "sync DEST/chg: ", true},
		{"get", "dest", "sync DEST: ", true},
		{"get", ".", "sync BASE: ", false},
		{"get", "..", "create its parent directory: sync TOP: ", true},
		{"sync", "dest/chg/c", `sync "chg/c": `, true},
		{"sync", "dest/mode", "sync DEST/mode: ", false},
		{"sync", "dest/ex", "sync DEST/ex: ", false},
		{"sync", "..", "sync TOP: ", false},
	} {
		t.Run(tc.cmd+" "+tc.fail, func(t *testing.T) {
			base := filepath.Join(t.TempDir(), "base")
			dest := filepath.Join(base, "dest")
			if tc.cmd == "sync" {
				if tc.fail == ".." {
					dest = filepath.Join(base, "new", "dest")
				} else {
					ok(t, "sync", u, dest)
				}
			}
			failSyncOf(t, filepath.Join(base, tc.fail))
			code, out, errs := cli(t, "", tc.cmd, u2, dest)
			require.Equal(t, exitError, code, "stdout: %s\nstderr: %s", out, errs)
			errs = tmpSyncName.ReplaceAllString(errs, "$1$2")
			says := strings.NewReplacer("DEST", dest, "BASE", base, "TOP", filepath.Dir(base)).Replace(tc.says)
			assert.Contains(t, errs, says+syscall.EIO.Error())
			if !tc.untouched {
				return
			}
			if tc.cmd == "get" {
				_, err := os.Lstat(dest)
				assert.True(t, errors.Is(err, fs.ErrNotExist), "DEST exists after get failed: %v", err)
				if des, err := os.ReadDir(base); err == nil {
					for _, de := range des {
						assert.NotContains(t, de.Name(), ".publish-get-", "get left its download behind")
					}
				}
			} else {
				assert.Equal(t, v1, readTree(t, dest))
			}
		})
	}
}
