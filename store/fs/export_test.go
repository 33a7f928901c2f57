package fs

import "os"

// Queued returns the number of this process's writers that hold or wait
// for their turn at the flock of the directory dir, or -1 if dir is
// missing.
func Queued(dir string) int {
	fi, err := os.Stat(dir)
	if err != nil {
		return -1
	}
	queues.Lock()
	defer queues.Unlock()
	q := queues.m[idOf(fi)]
	if q == nil {
		return 0
	}
	return 1 + len(q.waiters)
}

// SetSyncDir replaces the fsync of a directory whose lock a write has just
// released, until the returned function restores it.
func SetSyncDir(sync func(*os.File) error) (restore func()) {
	old := syncDirFile
	syncDirFile = sync
	return func() { syncDirFile = old }
}

// SetRootLookedAt runs f in classify between its look at the root and its
// judgement, until the returned function restores it.
func SetRootLookedAt(f func()) (restore func()) {
	old := rootLookedAt
	rootLookedAt = f
	return func() { rootLookedAt = old }
}
