package fs_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
)

// TestLockFollowsReplacedDir: a Delete waits for the lock of the object's
// directory; meanwhile that directory is moved away and the object written
// again in a new directory, whose lock another process holds. The Delete
// must not act on the new directory under the old directory's lock: it
// waits for the new one's. Waiters are seen in /proc/locks.
func TestLockFollowsReplacedDir(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	a := put(t, s, "d/k", "v")
	dir := filepath.Join(s.Root(), "d")
	releaseOld := holdDirLock(t, dir)
	defer releaseOld()
	oldIno := inode(t, dir)

	done := make(chan error, 1)
	go func() { done <- s.Delete(ctx, "d/k", store.DeleteOptions{IfMatch: a.ETag}) }()
	waitForWaiter(t, oldIno, done)

	require.NoError(t, os.Rename(dir, filepath.Join(s.Root(), "moved")))
	b := put(t, s, "d/k", "v")
	require.Equal(t, a.ETag, b.ETag, "the same body, so the Delete's condition holds")
	releaseNew := holdDirLock(t, dir)
	defer releaseNew()
	releaseOld()
	waitForWaiter(t, inode(t, dir), done)

	releaseNew()
	require.NoError(t, <-done)
	_, err := s.Head(ctx, "d/k")
	require.ErrorIs(t, err, store.ErrNotExist)
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Ino
}

// waitForWaiter waits until /proc/locks shows a process blocked on the
// flock of the file with inode ino. It fails if done reports first: the
// call it waits for returned instead of waiting for the lock.
func waitForWaiter(t *testing.T, ino uint64, done <-chan error) {
	t.Helper()
	suffix := ":" + strconv.FormatUint(ino, 10)
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-done:
			require.Failf(t, "returned without waiting for the lock", "inode %d, error %v", ino, err)
		default:
		}
		b, err := os.ReadFile("/proc/locks")
		require.NoError(t, err)
		for l := range strings.Lines(string(b)) {
			f := strings.Fields(l)
			if len(f) > 6 && f[1] == "->" && f[2] == "FLOCK" && strings.HasSuffix(f[6], suffix) {
				return
			}
		}
		require.True(t, time.Now().Before(deadline), "no waiter for inode %d in /proc/locks", ino)
		time.Sleep(time.Millisecond)
	}
}
