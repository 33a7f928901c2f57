package main

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
)

// fileTargets are the local store and S3 (versitygw), for the tests of
// how files are taken and given back.
func fileTargets(t *testing.T) []target {
	tgs := targets(t)[:2]
	require.Equal(t, []string{"fs", "s3"}, []string{tgs[0].name, tgs[1].name})
	return tgs
}

func modeOf(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	return fi.Mode().Perm()
}

func mtimeOf(t *testing.T, p string) time.Time {
	t.Helper()
	fi, err := os.Lstat(p)
	require.NoError(t, err)
	return fi.ModTime()
}

func umask() fs.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return fs.FileMode(m)
}

// TestModesAndTimes: get gives back each file's mode and modification
// time (unless --no-perms, --no-times); a mode change alone is a change
// that reuses the object and shows in diff; a time change alone is not.
func TestModesAndTimes(t *testing.T) {
	for _, tg := range fileTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			src := writeTree(t, map[string]string{"bin/run.sh": "#!/bin/sh\necho hi\n", "secret": "s3cr3t", "data.csv": "a,b\n"})
			run, secret := filepath.Join(src, "bin", "run.sh"), filepath.Join(src, "secret")
			require.NoError(t, os.Chmod(run, 0o755))
			require.NoError(t, os.Chmod(secret, 0o600))
			when := time.Date(2026, 11, 24, 9, 30, 0, 123456789, time.UTC)
			require.NoError(t, os.Chtimes(secret, when, when))
			tg.ok(t, "put", src, url)

			dest := filepath.Join(t.TempDir(), "a", "b", "out") // parents are created
			tg.ok(t, "get", url, dest)
			assert.Equal(t, fs.FileMode(0o755), modeOf(t, filepath.Join(dest, "bin", "run.sh")))
			assert.Equal(t, fs.FileMode(0o600), modeOf(t, filepath.Join(dest, "secret")))
			assert.True(t, when.Equal(mtimeOf(t, filepath.Join(dest, "secret"))), "mtime %v", mtimeOf(t, filepath.Join(dest, "secret")))
			assert.True(t, mtimeOf(t, run).Equal(mtimeOf(t, filepath.Join(dest, "bin", "run.sh"))))

			plain := filepath.Join(t.TempDir(), "plain")
			tg.ok(t, "get", "--no-perms", "--no-times", url, plain)
			assert.Equal(t, 0o644&^umask(), modeOf(t, filepath.Join(plain, "bin", "run.sh")))
			assert.Equal(t, 0o644&^umask(), modeOf(t, filepath.Join(plain, "secret")))
			assert.False(t, when.Equal(mtimeOf(t, filepath.Join(plain, "secret"))), "--no-times keeps the time of writing")

			// A new time alone: unchanged, nothing committed.
			later := when.Add(time.Hour)
			require.NoError(t, os.Chtimes(secret, later, later))
			var res putResult
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "--json", "put", src, url)), &res))
			assert.True(t, res.Unchanged, "a modification time alone is not a change")

			// A new mode alone: a change; the object is reused.
			require.NoError(t, os.Chmod(run, 0o700))
			res = putResult{}
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "--json", "put", src, url)), &res))
			assert.False(t, res.Unchanged, "a mode change is a change")
			assert.Equal(t, uint64(2), res.Seq)
			assert.Equal(t, 3, res.Reused, "the same content is not uploaded again")

			out := tg.ok(t, "diff", url, "1")
			assert.Contains(t, out, "M bin/run.sh (18 -> 18 bytes, mode 0755 -> 0700)")
			assert.NotContains(t, out, "secret", "times are not compared")
			var d diffResult
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "--json", "diff", url, "1", "2")), &d))
			require.Len(t, d.Changes, 1)
			assert.Equal(t, diffEntry{Op: "M", Path: "bin/run.sh", OldSize: 18, NewSize: 18, OldMode: "0755", NewMode: "0700"}, d.Changes[0])

			dest2 := filepath.Join(t.TempDir(), "out")
			tg.ok(t, "get", url, dest2)
			assert.Equal(t, fs.FileMode(0o700), modeOf(t, filepath.Join(dest2, "bin", "run.sh")))
			assert.True(t, later.Equal(mtimeOf(t, filepath.Join(dest2, "secret"))), "a commit records the files' current times")
		})
	}
}

// TestSymlinks: a link stops put by default, naming it and the flag;
// --links skip leaves links out; --links follow publishes what links point
// to inside SRC and refuses one leading outside it unless follow-any; loops
// and dangling links are refused, naming the link, and never hang.
func TestSymlinks(t *testing.T) {
	for _, tg := range fileTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			src := writeTree(t, map[string]string{"real/a.txt": "a", "top.txt": "top"})
			require.NoError(t, os.Symlink("../top.txt", filepath.Join(src, "real", "to-top")))
			require.NoError(t, os.Symlink("real", filepath.Join(src, "alias")))

			r := tg.run(t, "put", src, url)
			require.Equal(t, exitError, r.code, r.stderr)
			assert.Contains(t, r.stderr, filepath.Join(src, "alias")+" is a symbolic link (to real)")
			assert.Contains(t, r.stderr, "--links skip")
			assert.Contains(t, r.stderr, "--links follow")

			tg.ok(t, "put", "--links", "skip", src, url)
			got := filepath.Join(t.TempDir(), "skip")
			tg.ok(t, "get", url, got)
			assert.Equal(t, map[string]string{"real/a.txt": "a", "top.txt": "top"}, readTree(t, got))

			tg.ok(t, "put", "--links", "follow", src, url)
			got = filepath.Join(t.TempDir(), "follow")
			tg.ok(t, "get", url, got)
			assert.Equal(t, map[string]string{"real/a.txt": "a", "real/to-top": "top", "alias/a.txt": "a", "alias/to-top": "top", "top.txt": "top"}, readTree(t, got))

			outside := writeTree(t, map[string]string{"secret": "outside"})
			require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(src, "out")))
			r = tg.run(t, "put", "--links", "follow", src, url)
			require.Equal(t, exitError, r.code, r.stderr)
			assert.Contains(t, r.stderr, filepath.Join(src, "out")+" is a symbolic link to "+filepath.Join(outside, "secret")+", outside SRC")
			assert.Contains(t, r.stderr, "--links follow-any")
			tg.ok(t, "put", "--links", "follow-any", src, url)
			got = filepath.Join(t.TempDir(), "any")
			tg.ok(t, "get", url, got)
			assert.Equal(t, "outside", readTree(t, got)["out"])
			require.NoError(t, os.Remove(filepath.Join(src, "out")))

			// A link back to a directory being walked is a loop.
			require.NoError(t, os.Symlink("..", filepath.Join(src, "real", "up")))
			r = tg.run(t, "put", "--links", "follow-any", src, url)
			require.Equal(t, exitError, r.code, r.stderr)
			assert.Regexp(t, `SRC .*/up: symbolic link loop: it leads back to `, r.stderr)
			require.NoError(t, os.Remove(filepath.Join(src, "real", "up")))

			// A link to itself cannot be resolved; nor can a dangling one.
			for _, bad := range []struct{ name, target string }{{"self", "self"}, {"dangling", "nowhere"}} {
				p := filepath.Join(src, bad.name)
				require.NoError(t, os.Symlink(bad.target, p))
				r = tg.run(t, "put", "--links", "follow", src, url)
				require.Equal(t, exitError, r.code, r.stderr)
				assert.Contains(t, r.stderr, "SRC "+p+": symbolic link", bad.name)
				require.NoError(t, os.Remove(p))
			}
		})
	}
}

// TestFilters: --exclude, --include and --exclude-from select what put
// publishes, in the order given, first match deciding (with an --include,
// a file no rule matches is left out: hence the final "**"); get takes
// them too.
func TestFilters(t *testing.T) {
	for _, tg := range fileTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			src := writeTree(t, map[string]string{
				"app.log": "l", "keep.log": "k", "data/x.csv": "x", "data/tmp/y": "y",
				"tmp/z": "z", "build/out.bin": "b", "src/build/main.go": "m",
			})
			from := filepath.Join(t.TempDir(), "excludes")
			require.NoError(t, os.WriteFile(from, []byte("# generated files\n/build/**\n"), 0o644))
			tg.ok(t, "put", "--include", "keep.log", "--exclude", "*.log", "--exclude", "/tmp/**", "--exclude-from", from, "--include", "**", src, url)
			got := filepath.Join(t.TempDir(), "all")
			tg.ok(t, "get", url, got)
			assert.Equal(t, map[string]string{"keep.log": "k", "data/x.csv": "x", "data/tmp/y": "y", "src/build/main.go": "m"}, readTree(t, got))

			got = filepath.Join(t.TempDir(), "some")
			tg.ok(t, "get", "--include", "data/**", url, got)
			assert.Equal(t, map[string]string{"data/x.csv": "x", "data/tmp/y": "y"}, readTree(t, got))

			r := tg.run(t, "put", "--exclude", "a[b", src, url)
			assert.Equal(t, exitUsage, r.code, r.stderr)
			assert.Contains(t, r.stderr, `filter "a[b"`)
			r = tg.run(t, "put", "--exclude", "**", src, url)
			assert.Equal(t, exitError, r.code, r.stderr)
			assert.Contains(t, r.stderr, "holds no files")
		})
	}
}

// TestSync: sync creates DEST and its parents, downloads only what changed,
// deletes what the snapshot lacks (but not what the filters leave out),
// sets modes, and never writes through a symbolic link in DEST.
func TestSync(t *testing.T) {
	for _, tg := range fileTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			files := map[string]string{"a.txt": "a", "sub/b.txt": "b", "sub/deep/c.txt": "c", "run.sh": "#!"}
			src := writeTree(t, files)
			require.NoError(t, os.Chmod(filepath.Join(src, "run.sh"), 0o755))
			tg.ok(t, "put", src, url)

			dest := filepath.Join(t.TempDir(), "x", "y", "dest")
			var res syncResult
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "--json", "sync", url, dest)), &res))
			assert.Equal(t, []string{"a.txt", "run.sh", "sub/b.txt", "sub/deep/c.txt"}, res.Added)
			assert.Equal(t, files, readTree(t, dest))
			assert.Equal(t, fs.FileMode(0o755), modeOf(t, filepath.Join(dest, "run.sh")))

			// Nothing changed: nothing downloaded.
			res = syncResult{}
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "--json", "sync", url, dest)), &res))
			assert.Equal(t, 4, res.Unchanged)
			assert.Zero(t, res.Bytes)
			assert.Empty(t, res.Added)
			assert.Empty(t, res.Updated)
			assert.Empty(t, res.Deleted)

			// Local damage: a changed file, a changed mode, extra files, an
			// excluded file, and a link where the snapshot has a directory,
			// leading outside DEST.
			outside := writeTree(t, map[string]string{"victim": "untouched"})
			require.NoError(t, os.WriteFile(filepath.Join(dest, "a.txt"), []byte("local edit"), 0o644))
			require.NoError(t, os.Chmod(filepath.Join(dest, "run.sh"), 0o600))
			require.NoError(t, os.WriteFile(filepath.Join(dest, "extra.txt"), []byte("x"), 0o644))
			require.NoError(t, os.MkdirAll(filepath.Join(dest, "old", "dir"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dest, "old", "dir", "f"), []byte("f"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dest, "notes.local"), []byte("mine"), 0o644))
			require.NoError(t, os.RemoveAll(filepath.Join(dest, "sub", "deep")))
			require.NoError(t, os.Symlink(outside, filepath.Join(dest, "sub", "deep")))

			r := tg.run(t, "-v", "sync", "--exclude", "*.local", url, dest)
			require.Zero(t, r.code, r.stderr)
			assert.Contains(t, r.stderr, "M a.txt\n")
			assert.Contains(t, r.stderr, "m run.sh\n")
			assert.Contains(t, r.stderr, "- extra.txt\n")
			assert.Contains(t, r.stderr, "- old/dir/f\n")
			assert.Contains(t, r.stderr, "- sub/deep\n")
			assert.Contains(t, r.stderr, "+ sub/deep/c.txt\n")
			assert.Contains(t, r.stdout, "1 added, 1 updated, 3 deleted")
			want := map[string]string{"notes.local": "mine"}
			for p, b := range files {
				want[p] = b
			}
			assert.Equal(t, want, readTree(t, dest))
			assert.Equal(t, fs.FileMode(0o755), modeOf(t, filepath.Join(dest, "run.sh")))
			assert.NoDirExists(t, filepath.Join(dest, "old"), "directories left empty are removed")
			assert.Equal(t, map[string]string{"victim": "untouched"}, readTree(t, outside), "nothing is written through a link in DEST")
			fi, err := os.Lstat(filepath.Join(dest, "sub", "deep"))
			require.NoError(t, err)
			assert.True(t, fi.IsDir(), "the link was replaced by a directory")

			// Without the filter, the excluded file goes too.
			r = tg.run(t, "-v", "sync", url, dest)
			require.Zero(t, r.code, r.stderr)
			assert.Contains(t, r.stderr, "- notes.local\n")
			assert.Equal(t, files, readTree(t, dest))

			// A DEST that is a link is refused.
			link := filepath.Join(t.TempDir(), "link")
			require.NoError(t, os.Symlink(outside, link))
			r = tg.run(t, "sync", url, link)
			assert.Equal(t, exitError, r.code)
			assert.Contains(t, r.stderr, "DEST "+link+" is a symbolic link")
		})
	}
}

// TestFormat1Dataset: a generation whose manifest records no modes or
// times (format 1, as written before they were recorded, and still by a
// library Put from a stream) reads, gets and syncs as before; the next put
// records modes, which is a change.
func TestFormat1Dataset(t *testing.T) {
	for _, tg := range fileTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := context.Background()
			url := tg.url(t)
			d := commit.New(tg.open(t, url))
			tx, err := d.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.PutBytes(ctx, "a.txt", []byte("a")))
			_, err = tx.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
			snap, err := d.Open(ctx)
			require.NoError(t, err)
			require.Equal(t, generation.FormatV1, snap.Manifest.Format)

			dest := filepath.Join(t.TempDir(), "out")
			tg.ok(t, "get", url, dest)
			assert.Equal(t, 0o644&^umask(), modeOf(t, filepath.Join(dest, "a.txt")))
			tg.ok(t, "sync", url, filepath.Join(t.TempDir(), "synced"))

			src := writeTree(t, map[string]string{"a.txt": "a"})
			var res putResult
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "--json", "put", src, url)), &res))
			assert.False(t, res.Unchanged, "recording modes for the first time is a change")
			assert.Equal(t, 1, res.Reused)
		})
	}
}
