package commit

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestManifestCacheHoldsACopyOnlyUnderItsOwnSum(t *testing.T) {
	c := &manifestCache{dir: filepath.Join(t.TempDir(), "cache"), max: 1 << 20}
	a := []byte("manifest a")
	c.put(sumOf(a), a)
	assert.Equal(t, a, c.get(sumOf(a)), "a copy is read back by its sum")

	// A copy kept under another sum is refused when it is put.
	c.put(sumOf([]byte("other")), a)
	assert.NoFileExists(t, filepath.Join(c.dir, sumOf([]byte("other"))))
	assert.Nil(t, c.get(sumOf([]byte("other"))))

	// A copy damaged since it was kept is a miss, and removed.
	b := []byte("manifest b")
	c.put(sumOf(b), b)
	path := filepath.Join(c.dir, sumOf(b))
	require.NoError(t, os.WriteFile(path, []byte("manifest B"), 0o600))
	assert.Nil(t, c.get(sumOf(b)))
	assert.NoFileExists(t, path)

	// A name that is not a sha256 never becomes a path.
	for _, bad := range []string{"", "../" + sumOf(a)[3:], sumOf(a)[:63], sumOf(a) + "0", "zz" + sumOf(a)[2:]} {
		assert.Empty(t, c.name(bad), "%q", bad)
		assert.Nil(t, c.get(bad), "%q", bad)
	}

	// A nil cache keeps nothing.
	var none *manifestCache
	none.put(sumOf(a), a)
	assert.Nil(t, none.get(sumOf(a)))
}

func TestManifestCacheDropsTheLeastRecentlyUsedOverItsSize(t *testing.T) {
	c := &manifestCache{dir: t.TempDir(), max: 30}
	copies := [][]byte{[]byte("first copy, 12"), []byte("second copy 13"), []byte("third copy, 14")}
	base := time.Now().Add(-time.Hour)
	for i, b := range copies[:2] {
		c.put(sumOf(b), b)
		at := base.Add(time.Duration(i) * time.Minute)
		require.NoError(t, os.Chtimes(filepath.Join(c.dir, sumOf(b)), at, at))
	}
	// Reading the first makes it the most recently used.
	require.NotNil(t, c.get(sumOf(copies[0])))
	c.put(sumOf(copies[2]), copies[2])
	assert.NotNil(t, c.get(sumOf(copies[0])), "used last but one")
	assert.Nil(t, c.get(sumOf(copies[1])), "used least recently: dropped")
	assert.NotNil(t, c.get(sumOf(copies[2])), "just kept")

	// A copy larger than the whole cache is not kept.
	big := make([]byte, 31)
	c.put(sumOf(big), big)
	assert.Nil(t, c.get(sumOf(big)))
}

// A copy that is not a regular file is a miss, and never opened: a FIFO
// would block the reader, a link could lead outside the cache.
func TestManifestCacheReadsOnlyRegularFiles(t *testing.T) {
	c := &manifestCache{dir: t.TempDir(), max: 1 << 20}
	a := []byte("manifest a")
	elsewhere := filepath.Join(t.TempDir(), "a")
	require.NoError(t, os.WriteFile(elsewhere, a, 0o600))
	require.NoError(t, os.Symlink(elsewhere, filepath.Join(c.dir, sumOf(a))))
	require.Nil(t, c.get(sumOf(a)), "a link")

	b := []byte("manifest b")
	require.NoError(t, syscall.Mkfifo(filepath.Join(c.dir, sumOf(b)), 0o600))
	got := make(chan []byte, 1)
	go func() { got <- c.get(sumOf(b)) }()
	select {
	case g := <-got:
		assert.Nil(t, g, "a FIFO")
	case <-time.After(time.Minute): // opening a FIFO blocks until a writer comes
		t.Fatal("get of a FIFO blocks")
	}
}
