//go:build linux

package mount

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// commitDir commits the files of dir as d's next generation.
func commitDir(t *testing.T, d *commit.Dataset, dir string) *commit.Snapshot {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.AddDir(ctx, dir))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	return snap
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, body := range files {
		name := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(name), 0o755))
		require.NoError(t, os.WriteFile(name, []byte(body), 0o644))
	}
}

// lockedBuffer is a log sink that tests read while the mount writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// mountT mounts d at a fresh directory and unmounts it when the test ends,
// failed or not; the mount point must then be gone from the mount table.
func mountT(t *testing.T, d *commit.Dataset, opts Options) (*FS, string, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	dir := t.TempDir()
	m, err := Mount(context.Background(), d, dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, m.Unmount(context.Background()))
		require.False(t, mounted(t, dir), "%s is still mounted", dir)
	})
	require.True(t, mounted(t, dir))
	return m, dir, logs
}

// mounted reports whether dir is a mount point in /proc/self/mounts.
func mounted(t *testing.T, dir string) bool {
	t.Helper()
	f, err := os.Open("/proc/self/mounts")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 1 && fields[1] == dir {
			return true
		}
	}
	require.NoError(t, sc.Err())
	return false
}

// run runs a command on paths of the mount. Its working directory is
// never in the mount: a process that serves a FUSE mount must not start a
// child there, as the child's chdir happens before exec, while it shares
// the parent's memory and a thread of it, and the parent's runtime can stop
// the world for a collection that then waits on that thread while the
// chdir waits on the file system.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "%s %v: %s", name, args, errb.String())
	return out.String()
}

// pins lists the pin keys of the dataset.
func pins(t *testing.T, s store.Store) []string { return testenv.Keys(t, s, commit.PinDir) }

func TestMountShowsTheSnapshotToFindCatSha256sumAndDiff(t *testing.T) {
	for _, name := range []string{"fs", "s3"} {
		t.Run(name, func(t *testing.T) {
			s := testenv.StoreNamed(t, name)
			// dir/b.bin has four parts, read by parts; the others are read whole.
			d := commit.New(s, commit.WithPartSize(1<<20))
			big := make([]byte, 3<<20+17)
			_, _ = rand.Read(big)
			files := map[string]string{
				"a.txt": "first a\n", "dir/b.bin": string(big), "dir/sub/c.txt": "c\n",
				"with space.txt": "spaced\n", "empty": "", "unicode-é.txt": "é\n",
			}
			src := t.TempDir()
			writeFiles(t, src, files)
			require.NoError(t, os.Chmod(filepath.Join(src, "dir/sub/c.txt"), 0o755))
			snap := commitDir(t, d, src)
			_, dir, _ := mountT(t, d, Options{Owner: "test"})

			var want []string
			for p := range files {
				want = append(want, filepath.Join(dir, p))
			}
			sort.Strings(want)
			found := strings.Split(strings.TrimSpace(run(t, "find", dir, "-type", "f")), "\n")
			sort.Strings(found)
			require.Equal(t, want, found)
			require.Equal(t, "c\n", run(t, "cat", filepath.Join(dir, "dir/sub/c.txt")))

			var sums strings.Builder
			for _, e := range snap.Files() {
				fmt.Fprintf(&sums, "%s  %s\n", e.SHA256, filepath.Join(dir, e.Path))
			}
			sumFile := filepath.Join(t.TempDir(), "SHA256SUMS")
			require.NoError(t, os.WriteFile(sumFile, []byte(sums.String()), 0o644))
			b, _ := snap.Manifest.Find("dir/b.bin")
			require.Equal(t, 4, b.NumParts())
			require.Contains(t, run(t, "sha256sum", "-c", sumFile), "dir/b.bin: OK")
			require.Empty(t, run(t, "diff", "-r", src, dir))

			st, err := os.Stat(filepath.Join(dir, "dir/sub/c.txt"))
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o755), st.Mode().Perm(), "the recorded mode")
			require.ErrorIs(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("x"), 0o644), syscall.EROFS)
			require.ErrorIs(t, os.WriteFile(filepath.Join(dir, "new"), []byte("x"), 0o644), syscall.EROFS)

			require.Len(t, pins(t, s), 1, "the generation shown is pinned")
		})
	}
}

func TestMountFileNotMatchingItsManifestFailsWithEIOAndALogLine(t *testing.T) {
	s := testenv.StoreNamed(t, "fs")
	d := commit.New(s)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"good.txt": "good\n", "bad.txt": "stored\n"})
	snap := commitDir(t, d, src)
	e, ok := snap.Manifest.Find("bad.txt")
	require.True(t, ok)
	// Same size, other bytes: only the sha256 tells.
	_, err := s.Put(context.Background(), e.Key, strings.NewReader("STORED\n"), store.PutOptions{})
	require.NoError(t, err)
	_, dir, logs := mountT(t, d, Options{})

	_, err = os.ReadFile(filepath.Join(dir, "bad.txt"))
	require.ErrorIs(t, err, syscall.EIO)
	require.Contains(t, logs.String(), "does not match its manifest")
	require.Contains(t, logs.String(), "bad.txt")
	b, err := os.ReadFile(filepath.Join(dir, "good.txt"))
	require.NoError(t, err)
	require.Equal(t, "good\n", string(b))
	// Asked again, it is read again, and fails again.
	_, err = os.ReadFile(filepath.Join(dir, "bad.txt"))
	require.ErrorIs(t, err, syscall.EIO)
}

func TestMountOfAnOlderSeqShowsIt(t *testing.T) {
	d := commit.New(testenv.StoreNamed(t, "fs"))
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"a.txt": "one"})
	commitDir(t, d, src)
	writeFiles(t, src, map[string]string{"a.txt": "two"})
	commitDir(t, d, src)
	m, dir, _ := mountT(t, d, Options{Ref: commit.SeqRef(1)})
	require.Equal(t, uint64(1), m.Snapshot().Seq())
	b, err := os.ReadFile(filepath.Join(dir, "a.txt"))
	require.NoError(t, err)
	require.Equal(t, "one", string(b))

	_, err = Mount(context.Background(), d, t.TempDir(), Options{Ref: commit.SeqRef(1), Follow: true})
	require.ErrorContains(t, err, "follow shows the current snapshot")
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMountFollowShowsNewCommitsWhileOpenFilesKeepTheirGeneration(t *testing.T) {
	s := testenv.StoreNamed(t, "fs")
	d := commit.New(s)
	src := t.TempDir()
	body := func(gen int, name string) string {
		return strings.Repeat(fmt.Sprintf("%s of generation %d\n", name, gen), 20000)
	}
	write := func(gen int) {
		files := map[string]string{"a.txt": body(gen, "a"), "dir/b.txt": body(gen, "b")}
		if gen > 1 {
			files[fmt.Sprintf("dir/new%d.txt", gen)] = "new"
		}
		writeFiles(t, src, files)
	}
	write(1)
	commitDir(t, d, src)
	m, dir, _ := mountT(t, d, Options{Follow: true, Refresh: 20 * time.Millisecond, Owner: "test"})

	// A file opened in generation 1, read while commits land, stays in
	// generation 1 to its end.
	f, err := os.Open(filepath.Join(dir, "a.txt"))
	require.NoError(t, err)
	defer f.Close()
	sub, err := os.Open(filepath.Join(dir, "dir"))
	require.NoError(t, err)
	defer sub.Close()
	half := make([]byte, len(body(1, "a"))/2)
	_, err = f.ReadAt(half, 0)
	require.NoError(t, err)

	for gen := 2; gen <= 3; gen++ {
		write(gen)
		snap := commitDir(t, d, src)
		waitFor(t, fmt.Sprintf("seq %d at the root", gen), func() bool { return m.Snapshot().Seq() == snap.Seq() })
		b, err := os.ReadFile(filepath.Join(dir, "a.txt"))
		require.NoError(t, err)
		require.Equal(t, body(gen, "a"), string(b), "the root shows the new generation")
		b, err = os.ReadFile(filepath.Join(dir, "dir", "b.txt"))
		require.NoError(t, err)
		require.Equal(t, body(gen, "b"), string(b))
	}
	rest := make([]byte, len(body(1, "a"))-len(half))
	_, err = f.ReadAt(rest, int64(len(half)))
	require.NoError(t, err)
	require.Equal(t, body(1, "a"), string(half)+string(rest), "an open file keeps its generation")
	// A directory opened before the commits still lists its own
	// generation; looked up afresh, it is the current one's.
	names, err := sub.Readdirnames(-1)
	require.NoError(t, err)
	require.Equal(t, []string{"b.txt"}, names)
	entries, err := os.ReadDir(filepath.Join(dir, "dir"))
	require.NoError(t, err)
	require.Len(t, entries, 3, "b.txt, new2.txt and new3.txt")

	require.Len(t, pins(t, s), 2, "generation 1 (open) and the current one are pinned")
	require.NoError(t, f.Close())
	waitFor(t, "release of the closed generation's pin", func() bool { return len(pins(t, s)) == 1 })
	gen, _, err := commit.ParsePinKey(pins(t, s)[0])
	require.NoError(t, err)
	require.Equal(t, m.Snapshot().Generation(), gen)
}

func TestMountFollowingATagShowsEachMoveOfTheTagOnly(t *testing.T) {
	ctx := context.Background()
	d := commit.New(testenv.StoreNamed(t, "fs"))
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"a.txt": "one"})
	first := commitDir(t, d, src)
	_, err := first.Tag(ctx, "stable", false)
	require.NoError(t, err)
	// The refreshes are the test's own, so what each one shows is known.
	m, dir, logs := mountT(t, d, Options{Ref: commit.TagRef("stable"), Follow: true, Refresh: time.Hour})
	read := func() string {
		b, err := os.ReadFile(filepath.Join(dir, "a.txt"))
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, "one", read())

	writeFiles(t, src, map[string]string{"a.txt": "two"})
	second := commitDir(t, d, src)
	m.refresh()
	require.Equal(t, first.Generation(), m.Snapshot().Generation(), "a commit does not move the tag")
	require.Equal(t, "one", read())

	_, err = second.Tag(ctx, "stable", true)
	require.NoError(t, err)
	m.refresh()
	require.Equal(t, second.Generation(), m.Snapshot().Generation(), "the tag moved")
	require.Equal(t, "two", read())

	require.NoError(t, d.DeleteTag(ctx, "stable"))
	m.refresh()
	require.Equal(t, second.Generation(), m.Snapshot().Generation(), "a deleted tag leaves the last generation shown")
	require.Contains(t, logs.String(), "cannot read what it follows")
}

// asNobody runs cat on path as the user nobody and returns its output,
// or the error.
func asNobody(t *testing.T, path string) (string, error) {
	t.Helper()
	require.Equal(t, 0, os.Getuid(), "reading as another user needs root")
	out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", path).CombinedOutput()
	return string(out), err
}

// openTempDirs lets every user through the directories t.TempDir made
// above dir (0700 by default).
func openTempDirs(t *testing.T, dir string) {
	t.Helper()
	for d := filepath.Dir(dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755))
	}
}

func TestMountAllowOtherLetsOtherUsersReadAsThePermissionBitsAllow(t *testing.T) {
	d := commit.New(testenv.StoreNamed(t, "fs"))
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"public.txt": "for all\n", "private.txt": "mine\n"})
	require.NoError(t, os.Chmod(filepath.Join(src, "private.txt"), 0o600))
	commitDir(t, d, src)

	_, dir, _ := mountT(t, d, Options{AllowOther: true})
	openTempDirs(t, dir)
	out, err := asNobody(t, filepath.Join(dir, "public.txt"))
	require.NoError(t, err, out)
	require.Equal(t, "for all\n", out)
	out, err = asNobody(t, filepath.Join(dir, "private.txt"))
	require.Error(t, err, "a file of mode 0600 is the mounting user's only")
	require.Contains(t, out, "Permission denied")

	_, closed, _ := mountT(t, d, Options{})
	openTempDirs(t, closed)
	out, err = asNobody(t, filepath.Join(closed, "public.txt"))
	require.Error(t, err, "without AllowOther, no other user reads")
	require.Contains(t, out, "Permission denied")
}

func TestMountUnmountReleasesItsPinsAndLeavesNoMount(t *testing.T) {
	s := testenv.StoreNamed(t, "fs")
	d := commit.New(s)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"a.txt": "a"})
	commitDir(t, d, src)
	dir := t.TempDir()
	m, err := Mount(context.Background(), d, dir, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Unmount(context.Background()) })
	require.Len(t, pins(t, s), 1)
	require.NoError(t, m.Unmount(context.Background()))
	require.False(t, mounted(t, dir))
	require.Empty(t, pins(t, s))
}

func TestMountUnmountedFromOutsideEndsAndReleasesItsPins(t *testing.T) {
	s := testenv.StoreNamed(t, "fs")
	d := commit.New(s)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"a.txt": "a"})
	commitDir(t, d, src)
	dir := t.TempDir()
	m, err := Mount(context.Background(), d, dir, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Unmount(context.Background()) })
	require.NoError(t, syscall.Unmount(dir, 0))
	m.Wait()
	require.NoError(t, m.Unmount(context.Background()))
	require.Empty(t, pins(t, s))
}

func TestMountABusyMountPointIsDetachedOnUnmount(t *testing.T) {
	s := testenv.StoreNamed(t, "fs")
	d := commit.New(s)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"a.txt": "a"})
	commitDir(t, d, src)
	dir := t.TempDir()
	m, err := Mount(context.Background(), d, dir, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Unmount(context.Background()) })
	f, err := os.Open(filepath.Join(dir, "a.txt"))
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, m.Unmount(context.Background()))
	require.False(t, mounted(t, dir))
}

func TestMountSmallCacheStillServesEveryFileVerified(t *testing.T) {
	d := commit.New(testenv.StoreNamed(t, "fs"))
	src := t.TempDir()
	files := map[string]string{}
	for i := range 8 {
		b := make([]byte, 64<<10)
		_, _ = rand.Read(b)
		files[fmt.Sprintf("f%d", i)] = string(b)
	}
	writeFiles(t, src, files)
	commitDir(t, d, src)
	// Room for one file and a half: every open but the last evicts.
	m, dir, _ := mountT(t, d, Options{CacheBytes: 96 << 10})
	for round := range 2 {
		for p, want := range files {
			b, err := os.ReadFile(filepath.Join(dir, p))
			require.NoError(t, err)
			require.Equal(t, sha(want), sha(string(b)), "round %d %s", round, p)
		}
	}
	// What no handle holds is within the bound (the kernel closes the
	// last file when it likes: it may still be held).
	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	var unheld int64
	for e := m.cache.lru.Front(); e != nil; e = e.Next() {
		if b := e.Value.(*blob); b.refs == 0 {
			unheld += b.size
		}
	}
	require.LessOrEqual(t, unheld, int64(96<<10))
	require.Less(t, m.cache.lru.Len(), len(files), "some were evicted")
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestMountWithoutFUSEDeviceFailsWithErrNoFUSE(t *testing.T) {
	d := commit.New(testenv.StoreNamed(t, "fs"))
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"a": "1"})
	commitDir(t, d, src)
	dev, missing := fuseDevice, filepath.Join(t.TempDir(), "fuse")
	fuseDevice = missing
	_, err := Mount(context.Background(), d, t.TempDir(), Options{})
	fuseDevice = dev
	require.ErrorIs(t, err, ErrNoFUSE)
	require.ErrorContains(t, err, "there is no "+missing)
	require.True(t, errors.Is(mountError("/mnt", fmt.Errorf(`exec: "fusermount": executable file not found in $PATH`)), ErrNoFUSE))
	require.NoError(t, checkDevice(fuseDevice), "this machine has FUSE: the mount tests need it")
}

func TestMountReadersWhileCommitsLandSeeWholeFilesOfOneGenerationNeverGoingBack(t *testing.T) {
	d := commit.New(testenv.StoreNamed(t, "fs"))
	src := t.TempDir()
	const last = 5
	write := func(gen int) {
		writeFiles(t, src, map[string]string{"a.txt": strings.Repeat(fmt.Sprintf("generation %d\n", gen), 30000)})
	}
	write(1)
	commitDir(t, d, src)
	_, dir, _ := mountT(t, d, Options{Follow: true, Refresh: 5 * time.Millisecond})

	// Each reader reads the whole file again and again until it sees the
	// last generation: every read is one generation's, and no reader
	// sees an older generation after a newer one.
	type seen struct {
		gens []int
		err  error
	}
	results := make([]seen, 3)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			r := &results[i]
			deadline := time.Now().Add(time.Minute)
			for time.Now().Before(deadline) {
				b, err := os.ReadFile(filepath.Join(dir, "a.txt"))
				if err != nil {
					r.err = err
					return
				}
				lines := strings.SplitAfter(string(b), "\n")
				var gen int
				if _, err := fmt.Sscanf(lines[0], "generation %d\n", &gen); err != nil || string(b) != strings.Repeat(lines[0], 30000) {
					r.err = fmt.Errorf("a read mixes generations or is cut short: %d bytes beginning %q", len(b), lines[0])
					return
				}
				if n := len(r.gens); n == 0 || r.gens[n-1] != gen {
					r.gens = append(r.gens, gen)
				}
				if gen == last {
					return
				}
			}
			r.err = errors.New("the last generation did not show within a minute")
		})
	}
	for gen := 2; gen <= last; gen++ {
		write(gen)
		commitDir(t, d, src)
	}
	wg.Wait()
	for i, r := range results {
		require.NoError(t, r.err, "reader %d", i)
		require.True(t, sort.IntsAreSorted(r.gens), "reader %d went back: %v", i, r.gens)
		require.Equal(t, last, r.gens[len(r.gens)-1])
	}
}

func TestMountListsWithoutRequestsAndGetsEachContentOnceWhileCached(t *testing.T) {
	s := store.Count(testenv.StoreNamed(t, "fs"))
	d := commit.New(s)
	src := t.TempDir()
	same := strings.Repeat("same content\n", 50000)
	writeFiles(t, src, map[string]string{"a.txt": same, "dir/copy.txt": same, "b.txt": "other"})
	commitDir(t, d, src)
	_, dir, _ := mountT(t, d, Options{})
	gets := func() int64 { return s.Counts()[store.OpGet] }
	before := s.Counts().Total()

	var names []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
		names = append(names, de.Name())
		return err
	}))
	require.Len(t, names, 5, "the root, dir and three files")
	require.Equal(t, before, s.Counts().Total(), "a listing sends no request")

	startGets := gets()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		p := []string{"a.txt", "dir/copy.txt"}[i%2]
		wg.Go(func() {
			b, err := os.ReadFile(filepath.Join(dir, p))
			if err == nil && string(b) != same {
				err = fmt.Errorf("%s: wrong content", p)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(1), gets()-startGets, "eight opens of one content, at once: one GET")
	b, err := os.ReadFile(filepath.Join(dir, "b.txt"))
	require.NoError(t, err)
	require.Equal(t, "other", string(b))
	require.Equal(t, int64(2), gets()-startGets)
}

// The mount renews the pin of the generation it shows: once the pin lapsed
// by the store's clock, the renewal pins it anew.
func TestMountRenewsThePinOfTheGenerationItShows(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	var mu sync.Mutex
	s := mem.New(mem.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	d := commit.New(s)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"a.txt": "a"})
	commitDir(t, d, src)
	m, _, _ := mountT(t, d, Options{PinTTL: time.Hour})
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	m.renewPins()
	keys := pins(t, s)
	require.Len(t, keys, 1)
	a, err := s.Head(ctx, keys[0])
	require.NoError(t, err)
	require.Less(t, a.ServerTime.Sub(a.LastModified), time.Hour, "the pin is live")
}

// A process keeps a directory of generation 1 open (as a working directory)
// while the mount moves on; with no file open, generation 1 is unpinned.
// When the process opens a file there, generation 1 is pinned again.
func TestMountHoldsAGenerationNoLongerShownAgainWhenAFileOfItIsOpened(t *testing.T) {
	s := testenv.StoreNamed(t, "fs")
	d := commit.New(s)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"dir/b.txt": "one"})
	first := commitDir(t, d, src)
	m, dir, _ := mountT(t, d, Options{Follow: true, Refresh: 20 * time.Millisecond, Owner: "test"})
	sub, err := os.Open(filepath.Join(dir, "dir"))
	require.NoError(t, err)
	defer sub.Close()

	writeFiles(t, src, map[string]string{"dir/b.txt": "two"})
	snap := commitDir(t, d, src)
	waitFor(t, "seq 2 at the root", func() bool { return m.Snapshot().Seq() == snap.Seq() })
	waitFor(t, "generation 1 unpinned", func() bool { return len(pins(t, s)) == 1 })

	fd, err := unix.Openat(int(sub.Fd()), "b.txt", unix.O_RDONLY, 0)
	require.NoError(t, err)
	f := os.NewFile(uintptr(fd), "b.txt")
	defer f.Close()
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, "one", string(b), "the file is generation 1's")
	held := false
	for _, k := range pins(t, s) {
		if gen, _, err := commit.ParsePinKey(k); err == nil && gen == first.Generation() {
			held = true
		}
	}
	require.True(t, held, "a file open in generation 1 pins it again")
}

// partsFile commits an 8 MiB random file of 1 MiB parts at "big.bin"
// through a store that records its GETs.
func partsFile(t *testing.T) (*commit.Dataset, *testenv.Gets, []byte, *commit.Snapshot) {
	t.Helper()
	s := &testenv.Gets{Store: testenv.StoreNamed(t, "fs")}
	d := commit.New(s, commit.WithPartSize(1<<20))
	data := make([]byte, 8<<20)
	_, _ = rand.Read(data)
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"big.bin": string(data)})
	snap := commitDir(t, d, src)
	e, _ := snap.Manifest.Find("big.bin")
	require.Equal(t, 8, e.NumParts())
	return d, s, data, snap
}

// settled waits until no download of m's cache is under way.
func settled(t *testing.T, m *FS) {
	t.Helper()
	require.Eventually(t, func() bool {
		m.cache.mu.Lock()
		defer m.cache.mu.Unlock()
		return len(m.cache.flights) == 0
	}, time.Minute, time.Millisecond)
}

// preadFile reads n bytes at off of a file of the mount, opened afresh.
func preadFile(name string, off int64, n int) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := f.ReadAt(b, off)
	return b[:k], err
}

func TestMountReadsAFileWithPartsByThePartsItTouches(t *testing.T) {
	d, s, data, _ := partsFile(t)
	m, dir, _ := mountT(t, d, Options{})
	s.Take()
	const off = 5<<20 + 1000
	b, err := preadFile(filepath.Join(dir, "big.bin"), off, 100)
	require.NoError(t, err)
	require.Equal(t, data[off:off+100], b)
	settled(t, m)
	whole, first := s.Take()
	require.Zero(t, whole, "no GET of the whole file")
	// Open fetches the first part ahead, and the read part 5: the
	// kernel's read-ahead stays in its first half, so no part after it.
	part := func(i int64) [2]int64 { return [2]int64{i << 20, 1 << 20} }
	require.ElementsMatch(t, [][2]int64{part(0), part(5)}, first)

	// Read whole: each part is fetched once in all.
	got, err := os.ReadFile(filepath.Join(dir, "big.bin"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got))
	whole, rest := s.Take()
	require.Zero(t, whole)
	require.ElementsMatch(t, [][2]int64{part(0), part(1), part(2), part(3), part(4), part(5), part(6), part(7)}, append(first, rest...))
}

func TestMountPartNotMatchingItsManifestFailsTheReadsThatTouchItWithEIO(t *testing.T) {
	d, s, data, snap := partsFile(t)
	e, _ := snap.Manifest.Find("big.bin")
	bad := bytes.Clone(data)
	bad[7<<20+10] ^= 0xff
	_, err := s.Put(context.Background(), e.Key, bytes.NewReader(bad), store.PutOptions{})
	require.NoError(t, err)
	_, dir, logs := mountT(t, d, Options{})
	name := filepath.Join(dir, "big.bin")

	b, err := preadFile(name, 4096, 4096)
	require.NoError(t, err, "a part that matches is served")
	require.Equal(t, data[4096:8192], b)
	_, err = preadFile(name, 7<<20, 4096)
	require.ErrorIs(t, err, syscall.EIO)
	require.Contains(t, logs.String(), "does not match its manifest")
	require.Contains(t, logs.String(), "big.bin")
	require.Contains(t, logs.String(), "part 7")
	_, err = os.ReadFile(name)
	require.ErrorIs(t, err, syscall.EIO, "reading the whole file reaches the damaged part")
}

func TestMountReadsFilesWithPartsOfEverySizeAroundAPartsEnd(t *testing.T) {
	const part = 64 << 10
	d := commit.New(testenv.StoreNamed(t, "fs"), commit.WithPartSize(part))
	files := map[string]string{}
	for _, n := range []int{part + 1, 2*part - 1, 2 * part, 3*part + 5} {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		files[fmt.Sprintf("f-%d", n)] = string(b)
	}
	src := t.TempDir()
	writeFiles(t, src, files)
	commitDir(t, d, src)
	_, dir, _ := mountT(t, d, Options{})
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, p))
		require.NoError(t, err, p)
		require.True(t, want == string(got), p)
		b, err := preadFile(filepath.Join(dir, p), int64(len(want))-3, 100)
		require.ErrorIs(t, err, io.EOF, p)
		require.Equal(t, want[len(want)-3:], string(b), "a read past the end: the last bytes only")
	}
}
