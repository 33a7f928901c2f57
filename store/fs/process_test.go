package fs_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/procattr"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/fs"
	"github.com/commitptr/commitptr/store/storetest"
)

// The cross-process tests re-execute the test binary; TestHelperProcess is
// the child's entry point, selected by these environment variables.
const (
	envMode = "COMMITPTR_FS_HELPER" // "create", "cas" or "mutex"
	envRoot = "COMMITPTR_FS_ROOT"
	envKey  = "COMMITPTR_FS_KEY" // the counter's key, for "cas"
	envGo   = "COMMITPTR_FS_GO"  // the file whose creation starts the children
	envID   = "COMMITPTR_FS_ID"
	envN    = "COMMITPTR_FS_N"

	helperTimeout = time.Minute
)

func flockEx(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }

// TestHelperProcess is not a test: it is the body of a child process.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(envMode)
	if mode == "" {
		t.Skip("helper process for the cross-process tests")
	}
	if err := helper(mode); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func helper(mode string) error {
	s, err := fs.New(os.Getenv(envRoot))
	if err != nil {
		return err
	}
	id := os.Getenv(envID)
	n, err := strconv.Atoi(os.Getenv(envN))
	if err != nil {
		return err
	}
	// A helper that cannot finish (the driver is broken) gives up rather
	// than spin forever.
	ctx, cancel := context.WithTimeout(context.Background(), helperTimeout)
	defer cancel()
	// Start together: wait for the parent's go file.
	for {
		if _, err := os.Stat(os.Getenv(envGo)); err == nil {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	switch mode {
	case "create":
		for r := range n {
			key := fmt.Sprintf("race/%d", r)
			_, err := s.Put(ctx, key, strings.NewReader(id), store.PutOptions{IfNoneMatch: true})
			switch {
			case err == nil:
				fmt.Fprintf(out, "win %d %s\n", r, id)
			case errors.Is(err, store.ErrPrecondition):
			default:
				return err
			}
		}
	case "cas":
		return storetest.Increment(ctx, s, os.Getenv(envKey), n, func(v int) { fmt.Fprintf(out, "inc %d\n", v) })
	case "mutex":
		// A lock built from create-if-absent and conditional delete: each
		// holder CASes the key once and deletes it. Were two holders ever
		// admitted at once, a CAS or a read-back would fail.
		for i := 0; i < n; {
			body := fmt.Sprintf("%s-%d", id, i)
			a, err := s.Put(ctx, "mutex", strings.NewReader(body), store.PutOptions{IfNoneMatch: true})
			if errors.Is(err, store.ErrPrecondition) && ctx.Err() == nil {
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				continue
			}
			if err != nil {
				return err
			}
			if got := readString(ctx, s, "mutex"); got != body {
				return fmt.Errorf("holder %s reads %q", body, got)
			}
			a, err = s.Put(ctx, "mutex", strings.NewReader(body+"+"), store.PutOptions{IfMatch: a.ETag})
			if err != nil {
				return fmt.Errorf("holder %s: CAS: %w", body, err)
			}
			if err := s.Delete(ctx, "mutex", store.DeleteOptions{IfMatch: a.ETag}); err != nil {
				return fmt.Errorf("holder %s: release: %w", body, err)
			}
			fmt.Fprintf(out, "held %s\n", body)
			i++
		}
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	return nil
}

// checkIncrements checks the "inc" lines of increment's callers: each
// wrote incs values, no value twice, and the counter ends at their total.
func checkIncrements(t *testing.T, s store.Store, key string, lines [][]string, incs int) {
	t.Helper()
	seen := map[string]bool{}
	for i, ls := range lines {
		assert.Len(t, ls, incs, "writer %d", i)
		for _, l := range ls {
			require.False(t, seen[l], "two writers both wrote %q: a lost update", l)
			seen[l] = true
		}
	}
	assert.Equal(t, strconv.Itoa(len(lines)*incs), read(t, s, key))
}

// spelling names an object: a store root and a key below it.
type spelling struct{ root, key string }

// runProcs starts procs children in mode over a fresh store, lets them go at
// once, and returns the store and each child's output lines.
func runProcs(t *testing.T, mode string, procs, n int, setup func(s *fs.Store)) (*fs.Store, [][]string) {
	t.Helper()
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	require.NoError(t, os.Mkdir(root, 0o700))
	s, err := fs.New(root)
	require.NoError(t, err)
	if setup != nil {
		setup(s)
	}
	names := make([]spelling, procs)
	for i := range names {
		names[i] = spelling{root, "counter"}
	}
	return s, startProcs(t, filepath.Join(parent, "go"), mode, n, names)
}

// startProcs starts one child in mode per spelling, lets them go at once by
// creating the file goFile, and returns each child's output lines.
func startProcs(t *testing.T, goFile, mode string, n int, names []spelling) [][]string {
	t.Helper()
	type child struct {
		cmd    *exec.Cmd
		stdout bytes.Buffer
		stderr bytes.Buffer
	}
	children := make([]*child, len(names))
	for i := range children {
		c := &child{cmd: exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")}
		c.cmd.SysProcAttr = procattr.DieWithParent()
		c.cmd.Env = append(os.Environ(),
			envMode+"="+mode, envRoot+"="+names[i].root, envKey+"="+names[i].key, envGo+"="+goFile,
			envID+"="+strconv.Itoa(i), envN+"="+strconv.Itoa(n))
		c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
		require.NoError(t, c.cmd.Start())
		children[i] = c
	}
	t.Cleanup(func() {
		for _, c := range children {
			if c.cmd.ProcessState == nil {
				c.cmd.Process.Kill()
				c.cmd.Wait()
			}
		}
	})
	require.NoError(t, os.WriteFile(goFile, nil, 0o600))
	lines := make([][]string, len(names))
	for i, c := range children {
		err := c.cmd.Wait()
		require.NoError(t, err, "child %d: %s", i, c.stderr.String())
		for l := range strings.Lines(c.stdout.String()) {
			l = strings.TrimSpace(l)
			if strings.HasPrefix(l, "win ") || strings.HasPrefix(l, "inc ") || strings.HasPrefix(l, "held ") {
				lines[i] = append(lines[i], l)
			}
		}
	}
	return lines
}

func TestCrossProcessCreateRace(t *testing.T) {
	const procs, rounds = 8, 30
	s, lines := runProcs(t, "create", procs, rounds, nil)
	winners := map[int]string{}
	for _, ls := range lines {
		for _, l := range ls {
			var r int
			var id string
			_, err := fmt.Sscanf(l, "win %d %s", &r, &id)
			require.NoError(t, err, l)
			prev, dup := winners[r]
			require.Falsef(t, dup, "round %d won twice: by %s and %s", r, prev, id)
			winners[r] = id
		}
	}
	require.Len(t, winners, rounds, "every round has exactly one winner")
	for r, id := range winners {
		assert.Equal(t, id, read(t, s, fmt.Sprintf("race/%d", r)), "round %d: the object is the winner's", r)
	}
}

func TestCrossProcessCASCounter(t *testing.T) {
	const procs, incs = 8, 25
	s, lines := runProcs(t, "cas", procs, incs, func(s *fs.Store) {
		_, err := s.Put(context.Background(), "counter", strings.NewReader("0"), store.PutOptions{IfNoneMatch: true})
		require.NoError(t, err)
	})
	checkIncrements(t, s, "counter", lines, incs)
}

// TestCrossProcessCASSpellings: processes reach one object through four
// spellings: a root with the key "sub/counter", the root's directory sub
// as a root with the key "counter", and both again through a symlink to the
// root. Every spelling meets the same lock, so no increment is lost.
func TestCrossProcessCASSpellings(t *testing.T) {
	const procs, incs = 8, 25
	root, link := linkedRoot(t)
	s, err := fs.New(root)
	require.NoError(t, err)
	_, err = s.Put(context.Background(), "sub/counter", strings.NewReader("0"), store.PutOptions{IfNoneMatch: true})
	require.NoError(t, err)
	ways := []spelling{
		{root, "sub/counter"},
		{filepath.Join(root, "sub"), "counter"},
		{link, "sub/counter"},
		{filepath.Join(link, "sub"), "counter"},
	}
	names := make([]spelling, procs)
	for i := range names {
		names[i] = ways[i%len(ways)]
	}
	lines := startProcs(t, filepath.Join(filepath.Dir(root), "go"), "cas", incs, names)
	checkIncrements(t, s, "sub/counter", lines, incs)
}

// readString returns the object's body, or the error's text.
func readString(ctx context.Context, s store.Store, key string) string {
	rc, _, err := s.Get(ctx, key)
	if err != nil {
		return err.Error()
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func TestCrossProcessMutex(t *testing.T) {
	const procs, holds = 8, 10
	s, lines := runProcs(t, "mutex", procs, holds, nil)
	for i, ls := range lines {
		assert.Len(t, ls, holds, "child %d", i)
	}
	_, err := s.Head(context.Background(), "mutex")
	require.ErrorIs(t, err, store.ErrNotExist, "the last holder released")
}

// linkedRoot makes a root directory with a directory sub in it, and a
// symbolic link to the root beside it: the spellings of one directory that
// the lock tests reach it by.
func linkedRoot(t *testing.T) (root, link string) {
	t.Helper()
	parent := t.TempDir()
	root = filepath.Join(parent, "root")
	link = filepath.Join(parent, "link")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sub"), 0o700))
	require.NoError(t, os.Symlink(root, link))
	return root, link
}
