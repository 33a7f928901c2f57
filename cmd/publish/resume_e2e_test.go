//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// interruptAfter runs publish with args and sends it SIGINT once its
// stderr has shown n lines starting with prefix. Its stderr is a pipe of
// one page, so the command gets at most a page of lines ahead of the
// test. It returns the exit status and stderr.
func interruptAfter(t *testing.T, tg target, n int, prefix string, args ...string) (int, string) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	_, err = unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, os.Getpagesize())
	require.NoError(t, err)
	cmd := tg.command(t, args...)
	cmd.Stderr = w
	require.NoError(t, cmd.Start())
	w.Close()
	var log strings.Builder
	seen := 0
	sc := bufio.NewScanner(r)
	for seen < n && sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), prefix) {
			seen++
		}
	}
	require.Equal(t, n, seen, "publish %v ended early:\n%s", args, log.String())
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, log.String())
	return ee.ExitCode(), log.String()
}

// withCache gives the binary a cache directory of its own, and returns it.
func withCache(t *testing.T, tg target) (target, string) {
	dir := t.TempDir()
	tg.env = append(slices.Clone(tg.env), "XDG_CACHE_HOME="+dir)
	return tg, dir
}

// dataRequests counts the requests of kind op ("put", "get") that -vv
// logged on a file's object (not a manifest) under _gen/.
func dataRequests(stderr, op string) int {
	re := regexp.MustCompile(`msg=request op=` + op + ` key=_gen/[^/ ]+/(\S+)`)
	n := 0
	for _, line := range strings.Split(stderr, "\n") {
		if m := re.FindStringSubmatch(line); m != nil && m[1] != "_manifest" {
			n++
		}
	}
	return n
}

// resumeTree is n small files in directories of 100.
func resumeTree(n int) map[string]string {
	tree := map[string]string{}
	for i := range n {
		tree[fmt.Sprintf("f/%03d/%04d", i/100, i)] = strings.Repeat(strconv.Itoa(i), 40)
	}
	return tree
}

// Ctrl-C during a put of 800 files keeps what it staged, and says so; the
// next put of the same source uploads only the rest (the requests it
// logs prove it), resumes the others, and removes its journal once it
// has committed. On every driver.
func TestInterruptedPutResumes(t *testing.T) {
	const files = 800
	tree := resumeTree(files)
	src := writeTree(t, tree)
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			tg, cache := withCache(t, tg)
			url := tg.url(t)
			code, log := interruptAfter(t, tg, 100, "uploaded ", "-v", "put", "--concurrency", "4", src, url)
			assert.Equal(t, exitInterrupted, code, log)
			m := regexp.MustCompile(`kept (\d+) files staged so far under (_gen/[^/ ]+/) of `).FindStringSubmatch(log)
			require.NotNil(t, m, log)
			kept, _ := strconv.Atoi(m[1])
			require.GreaterOrEqual(t, kept, 100, log)
			require.Less(t, kept, files, log)
			assert.Contains(t, log, "putting "+src+" there again resumes from them")

			r := tg.run(t, "-vv", "--json", "put", src, url)
			require.Zero(t, r.code, r.stderr)
			var res putResult
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
			assert.Equal(t, kept, res.Resumed)
			assert.Equal(t, files-kept, res.Summary.Transferred)
			assert.Equal(t, files-kept, dataRequests(r.stderr, "put"), "the files the interrupted put had not staged, uploaded once each")

			out := filepath.Join(t.TempDir(), "out")
			tg.ok(t, "get", url, out)
			assert.Equal(t, tree, readTree(t, out))
			journals, err := os.ReadDir(filepath.Join(cache, "publish", "resume"))
			require.NoError(t, err)
			assert.Empty(t, journals, "the journal is removed once its put committed")
		})
	}
}

// put --no-resume uploads every file again, however much an interrupted
// put staged, and forgets its journal.
func TestPutNoResumeStartsOver(t *testing.T) {
	tg, cache := withCache(t, targets(t)[0])
	url := tg.url(t)
	src := writeTree(t, resumeTree(800))
	code, log := interruptAfter(t, tg, 100, "uploaded ", "-v", "put", "--concurrency", "4", src, url)
	require.Equal(t, exitInterrupted, code, log)
	require.Contains(t, log, "files staged so far under")

	r := tg.run(t, "-vv", "--json", "put", "--no-resume", src, url)
	require.Zero(t, r.code, r.stderr)
	var res putResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	assert.Zero(t, res.Resumed)
	assert.Equal(t, 800, dataRequests(r.stderr, "put"))
	journals, err := os.ReadDir(filepath.Join(cache, "publish", "resume"))
	require.NoError(t, err)
	assert.Empty(t, journals)
}

// Ctrl-C during a sync of 800 files keeps every file it downloaded and
// verified, in place, and says how many; the next sync downloads only the
// rest (the requests it logs prove it). On every driver.
func TestInterruptedSyncResumes(t *testing.T) {
	const files = 800
	tree := resumeTree(files)
	src := writeTree(t, tree)
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			url := tg.url(t)
			tg.ok(t, "put", src, url)
			dest := filepath.Join(t.TempDir(), "dest")
			// -vv logs each request, so the pipe holds only a few files'
			// worth of lines.
			code, log := interruptAfter(t, tg, 100, "time=", "-vv", "sync", "--concurrency", "4", url, dest)
			assert.Equal(t, exitInterrupted, code, log)
			m := regexp.MustCompile(`interrupted; (\d+) of the 800 files to download are in place in `).FindStringSubmatch(log)
			require.NotNil(t, m, log)
			placed, _ := strconv.Atoi(m[1])
			require.Greater(t, placed, 0, log)
			require.Less(t, placed, files, log)
			assert.Contains(t, log, "a sync again downloads only the rest")
			assert.Len(t, readTree(t, dest), placed, "the files in place, and no temporary file")
			for p, body := range readTree(t, dest) {
				assert.Equal(t, tree[p], body, p)
			}

			r := tg.run(t, "-vv", "--json", "sync", url, dest)
			require.Zero(t, r.code, r.stderr)
			var res syncResult
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
			assert.Len(t, res.Added, files-placed)
			assert.Equal(t, placed, res.Unchanged+len(res.Attrs))
			assert.Equal(t, files-placed, dataRequests(r.stderr, "get"), "the files not in place, downloaded once each")
			assert.Equal(t, tree, readTree(t, dest))
		})
	}
}
