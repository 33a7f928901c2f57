//go:build linux

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/mount"
)

// isMounted reports whether dir is a mount point in /proc/self/mounts.
func isMounted(t *testing.T, dir string) bool {
	t.Helper()
	_, ok := mountFlags(t, dir)
	return ok
}

// mountFlags returns the options of the mount at dir, as
// /proc/self/mounts lists them, and whether dir is a mount point.
func mountFlags(t *testing.T, dir string) ([]string, bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[1] == dir {
			return strings.Split(f[3], ","), true
		}
	}
	return nil, false
}

// mountProcess is a publish mount running at dir.
type mountProcess struct {
	dir  string
	cmd  *exec.Cmd
	errb *lockedBuffer
	once sync.Once
	err  error
}

// wait waits for the process to end, once.
func (p *mountProcess) wait() error {
	p.once.Do(func() { p.err = p.cmd.Wait() })
	return p.err
}

// startMount runs publish mount URL at a fresh directory and returns it
// once mounted. When the test ends, failed or not, the mount is ended
// with sig (unless it has ended already), must exit with status 0 and
// leave no mount behind; a mount that outlives its process is detached,
// so none is ever left stale.
func startMount(t *testing.T, tg target, sig syscall.Signal, args ...string) *mountProcess {
	t.Helper()
	dir := t.TempDir()
	cmd := tg.command(t, append(append([]string{"mount"}, args...), dir)...)
	// Should the test process die, the mount still unmounts.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &mountProcess{dir: dir, cmd: cmd, errb: &lockedBuffer{}}
	cmd.Stderr = p.errb
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		defer func() {
			if isMounted(t, dir) {
				_ = syscall.Unmount(dir, syscall.MNT_DETACH)
				t.Errorf("%s was left mounted", dir)
			}
		}()
		if cmd.ProcessState == nil {
			if err := cmd.Process.Signal(sig); !errors.Is(err, os.ErrProcessDone) {
				require.NoError(t, err)
			}
		}
		require.NoError(t, p.wait(), "publish mount on %v; stderr: %s", sig, p.errb.String())
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "publish mount printed nothing; stderr: %s", p.errb.String())
	require.Regexp(t, `^mounted seq \d+ \(generation [0-9a-f-]+\) at `+regexp.QuoteMeta(dir)+`\n$`, line)
	require.True(t, isMounted(t, dir))
	return p
}

// fileTarget is a local store (file://), which needs no server.
func fileTarget() target {
	return target{
		name: "fs",
		url:  func(t *testing.T) string { return "file://" + filepath.Join(t.TempDir(), "store") },
	}
}

func shell(t *testing.T, dir, script string) string {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "%s\nstdout: %s\nstderr: %s", script, out.String(), errb.String())
	return out.String()
}

func TestMountDiffsEmptyAgainstGetAndUnmountsOnSignals(t *testing.T) {
	for _, tg := range []target{fileTarget(), s3Target(t)} {
		t.Run(tg.name, func(t *testing.T) {
			url, _, _ := twoSnapshots(t, tg)
			got := t.TempDir()
			tg.ok(t, "get", url, filepath.Join(got, "current"))
			tg.ok(t, "get", "--seq", "1", url, filepath.Join(got, "1"))
			cur := startMount(t, tg, syscall.SIGTERM, url).dir
			one := startMount(t, tg, syscall.SIGINT, "--ref", "@1", "--allow-other", url).dir
			opts, _ := mountFlags(t, one)
			require.Subset(t, opts, []string{"allow_other", "default_permissions"}, "--allow-other")
			opts, _ = mountFlags(t, cur)
			require.NotContains(t, opts, "allow_other")

			for want, dir := range map[string]string{filepath.Join(got, "current"): cur, filepath.Join(got, "1"): one} {
				require.Empty(t, shell(t, "", fmt.Sprintf("diff -r '%s' '%s'", want, dir)))
				require.Equal(t, shell(t, want, "find . | sort"), shell(t, dir, "find . | sort"))
				sums := filepath.Join(t.TempDir(), "SHA256SUMS")
				shell(t, want, "find . -type f -exec sha256sum {} + > "+sums)
				require.Contains(t, shell(t, dir, "sha256sum -c "+sums), "./dir/b.bin: OK")
			}
			require.Equal(t, "second a\n", shell(t, cur, "cat a.txt"))
			require.Equal(t, "first a\n", shell(t, one, "cat a.txt"))
		})
	}
}

func TestMountFollowShowsTheNextCommitAndKeepsOpenFiles(t *testing.T) {
	tg := fileTarget()
	url := tg.url(t)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"a.txt": "one\n"})
	tg.ok(t, "put", src, url)
	dir := startMount(t, tg, syscall.SIGTERM, "--follow", "--refresh", "20ms", url).dir
	f, err := os.Open(filepath.Join(dir, "a.txt"))
	require.NoError(t, err)
	defer f.Close()

	writeFiles(t, src, map[string]string{"a.txt": "two\n", "b.txt": "new\n"})
	tg.ok(t, "put", src, url)
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := os.ReadFile(filepath.Join(dir, "b.txt"))
		if err == nil {
			require.Equal(t, "new\n", string(b))
			break
		}
		require.ErrorIs(t, err, os.ErrNotExist)
		require.True(t, time.Now().Before(deadline), "the commit did not appear within a minute")
		time.Sleep(10 * time.Millisecond)
	}
	b, err := os.ReadFile(filepath.Join(dir, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "two\n", string(b))
	old := make([]byte, 16)
	n, err := f.Read(old)
	require.NoError(t, err)
	require.Equal(t, "one\n", string(old[:n]), "a file open before the commit stays in its generation")
}

func TestMountEndsWithStatusZeroWhenUnmountedFromOutside(t *testing.T) {
	tg := fileTarget()
	url := tg.url(t)
	tg.ok(t, "put", writeTree(t, map[string]string{"a": "1"}), url)
	p := startMount(t, tg, syscall.SIGTERM, url)
	require.NoError(t, syscall.Unmount(p.dir, 0))
	require.NoError(t, p.wait(), "stderr: %s", p.errb.String())
	require.False(t, isMounted(t, p.dir))
}

func TestMountRefusesBadCommandLines(t *testing.T) {
	u := memURL()
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"mount", "--follow", "--ref", "@1", u, dir}, "--follow shows the current snapshot"},
		{[]string{"mount", "--ref", "yesterday", u, dir}, "none of current"},
		{[]string{"mount", "--cache-size", "lots", u, dir}, "is not a size"},
		{[]string{"mount", "--refresh", "0s", u, dir}, "--refresh must be positive"},
		{[]string{"mount", u}, "accepts 2 arg"},
	} {
		code, _, errs := cli(t, "", c.args...)
		require.Equal(t, exitUsage, code, "%v: %s", c.args, errs)
		require.Contains(t, errs, c.says, c.args)
	}
}

func TestMountOfAMissingMountPointFailsNamingIt(t *testing.T) {
	tg := fileTarget()
	url := tg.url(t)
	tg.ok(t, "put", writeTree(t, map[string]string{"a": "1"}), url)
	missing := filepath.Join(t.TempDir(), "nowhere")
	r := tg.run(t, "mount", url, missing)
	require.Equal(t, exitError, r.code, r.stderr)
	require.Contains(t, r.stderr, missing)
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "256MiB": 256 << 20, "2G": 2 << 30, "64 KiB": 64 << 10} {
		got, err := parseSize(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "-1", "1TB", "MiB", "9999999999GiB"} {
		_, err := parseSize(in)
		require.Error(t, err, in)
	}
}

// The status of a mount where FUSE is missing is its own.
func TestMountWithoutFUSEExitsWithItsStatus(t *testing.T) {
	err := &runError{fmt.Errorf("mount: %w: there is no /dev/fuse", mount.ErrNoFUSE)}
	require.Equal(t, exitNoFUSE, exitCode(t.Context(), err))
	require.True(t, errors.Is(err, mount.ErrNoFUSE))
}
