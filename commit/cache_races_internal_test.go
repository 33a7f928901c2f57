package commit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/generation"
)

// swapLoop runs swap until stop is closed.
func swapLoop(stop <-chan struct{}, wg *sync.WaitGroup, swap func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				swap()
			}
		}
	}()
}

// A FIFO that takes a copy's place between the check that the copy is a
// regular file and its opening must not block the reader: a get returns at
// once, whatever the cache directory holds.
func TestManifestCacheNeverBlocksOnAFIFOSwappedInAfterItsCheck(t *testing.T) {
	c := &manifestCache{dir: t.TempDir(), max: 1 << 20}
	a := []byte("manifest a")
	sum := sumOf(a)
	path := filepath.Join(c.dir, sum)
	side := filepath.Join(c.dir, "side") // not a sum: the cache ignores it
	require.NoError(t, os.Mkdir(side, 0o700))
	fifo := filepath.Join(side, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	swapLoop(stop, &wg, func() {
		_ = os.Link(fifo, filepath.Join(side, "f"))
		_ = os.Rename(filepath.Join(side, "f"), path)
		_ = os.WriteFile(filepath.Join(side, "r"), a, 0o600)
		_ = os.Rename(filepath.Join(side, "r"), path)
	})
	defer func() { close(stop); wg.Wait() }()

	for range 300 {
		done := make(chan []byte, 1)
		go func() { done <- c.get(sum) }()
		select {
		case b := <-done:
			if b != nil {
				require.Equal(t, a, b)
			}
		case <-time.After(time.Minute): // a get takes microseconds; a blocked one, for ever
			// Unblock it: a writer opens the FIFO (a link to the same one).
			if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
			<-done
			t.Fatal("get blocked opening a FIFO that replaced the copy after it was checked")
		}
	}
}

// A link that takes a copy's place between its check and its use must not
// lead the cache to a file outside its directory: neither read (the copy is
// checked to be a regular file so that a link is never followed) nor
// touched (the time of use is set on the copy).
func TestManifestCacheNeverTouchesAFileOutsideItsDirectory(t *testing.T) {
	c := &manifestCache{dir: t.TempDir(), max: 1 << 20}
	a := []byte("manifest a")
	sum := sumOf(a)
	path := filepath.Join(c.dir, sum)
	side := filepath.Join(c.dir, "side")
	require.NoError(t, os.Mkdir(side, 0o700))
	outside := filepath.Join(t.TempDir(), "outside")
	require.NoError(t, os.WriteFile(outside, a, 0o600))
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, os.Chtimes(outside, old, old))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	swapLoop(stop, &wg, func() {
		_ = os.Symlink(outside, filepath.Join(side, "l"))
		_ = os.Rename(filepath.Join(side, "l"), path)
		_ = os.WriteFile(filepath.Join(side, "r"), a, 0o600)
		_ = os.Rename(filepath.Join(side, "r"), path)
	})
	for range 3000 {
		if b := c.get(sum); b != nil {
			require.Equal(t, a, b)
		}
		fi, err := os.Stat(outside)
		require.NoError(t, err)
		if !fi.ModTime().Equal(old) {
			break
		}
	}
	close(stop)
	wg.Wait()
	fi, err := os.Stat(outside)
	require.NoError(t, err)
	assert.True(t, fi.ModTime().Equal(old), "the cache set the time of %s, outside its directory, through a link: %s", outside, fi.ModTime())
}

// Processes sharing the cache directory, putting, reading and trimming at
// once, never hand out other bytes than those of the sum asked for.
func TestManifestCacheSharedByConcurrentPutsGetsAndTrimsHandsOutOnlyTheRightBytes(t *testing.T) {
	dir := t.TempDir()
	var manifests [][]byte
	for i := range 40 {
		manifests = append(manifests, bytes.Repeat([]byte(fmt.Sprintf("manifest %02d;", i)), 20+i))
	}
	var wg sync.WaitGroup
	for w := range 6 {
		// Each "process" has its own cache value, as separate processes do,
		// and a size that forces trims.
		c := &manifestCache{dir: dir, max: int64(3000 + 500*w)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 600 {
				b := manifests[(i*7+w*13)%len(manifests)]
				if i%3 == 0 {
					c.put(sumOf(b), b)
					continue
				}
				if got := c.get(sumOf(b)); got != nil && !bytes.Equal(got, b) {
					t.Errorf("get(%s) returned other bytes", sumOf(b))
					return
				}
			}
		}()
	}
	wg.Wait()
	// What is left is only verified copies, and within the largest size.
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		assert.Equal(t, e.Name(), sumOf(b), "a copy under another name")
	}
}

// A copy that cannot be right (larger than any stored manifest) is
// refused without reading it all into memory.
func TestManifestCacheDoesNotReadAHugeCopy(t *testing.T) {
	c := &manifestCache{dir: t.TempDir(), max: 1 << 20}
	sum := sumOf([]byte("manifest a"))
	f, err := os.Create(filepath.Join(c.dir, sum))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(generation.MaxStored+1)) // sparse: it takes no space
	require.NoError(t, f.Close())
	var before, after runtimeMem
	before.read()
	assert.Nil(t, c.get(sum))
	after.read()
	assert.Less(t, after.total-before.total, uint64(64<<20), "bytes allocated to refuse a copy larger than a manifest can be")
}

type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.total = ms.TotalAlloc
}

// A temporary file left by a process that ended between writing a copy
// and renaming it (killed, or its machine stopped) is dropped by a later
// trim once it is old, instead of holding its bytes for ever outside the
// cache's size.
func TestManifestCacheTrimDropsOldLeftoverTemporaryFiles(t *testing.T) {
	c := &manifestCache{dir: t.TempDir(), max: 1 << 20}
	left := filepath.Join(c.dir, ".tmp-123456")
	require.NoError(t, os.WriteFile(left, bytes.Repeat([]byte("x"), 1000), 0o600))
	old := time.Now().Add(-48 * time.Hour)
	require.NoError(t, os.Chtimes(left, old, old))
	a := []byte("manifest a")
	c.put(sumOf(a), a)
	assert.NoFileExists(t, left)
}

// Trimming removes only copies: a file of the directory that is not named
// by a sum (another process's temporary file, or anything else kept
// there) is neither counted nor removed, and a copy too large to be kept
// does not push the others out.
func TestManifestCacheTrimRemovesOnlyCopies(t *testing.T) {
	c := &manifestCache{dir: t.TempDir(), max: 30}
	other := []string{".tmp-987654", "notes.txt", sumOf([]byte("x"))[:62], "README"}
	for _, name := range other {
		require.NoError(t, os.WriteFile(filepath.Join(c.dir, name), bytes.Repeat([]byte("o"), 100), 0o600))
	}
	a, b := []byte("first copy, 12"), []byte("second copy 13")
	c.put(sumOf(a), a)
	c.put(sumOf(b), b)
	assert.NotNil(t, c.get(sumOf(a)), "the other files do not count")
	assert.NotNil(t, c.get(sumOf(b)))
	c.put(sumOf(make([]byte, 31)), make([]byte, 31))
	assert.NotNil(t, c.get(sumOf(a)), "a copy too large is not kept, and drops nothing")
	assert.NotNil(t, c.get(sumOf(b)))
	for _, name := range other {
		assert.FileExists(t, filepath.Join(c.dir, name))
	}
}

// Only a sha256 in hex names a copy: hex of another length is refused too.
func TestManifestCacheNameIsASha256Only(t *testing.T) {
	c := &manifestCache{dir: t.TempDir(), max: 1 << 20}
	sum := sumOf([]byte("a"))
	for _, bad := range []string{sum[:62], sum + "00", sum + sum} {
		assert.Empty(t, c.name(bad), "%q", bad)
	}
}
