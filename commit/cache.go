package commit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/commitptr/commitptr/generation"
)

// MaxManifestCache is the most bytes of manifests WithManifestCache keeps.
const MaxManifestCache = 256 << 20

// tmpPrefix begins the name of a copy being written; one older than
// leftoverAge was left by a process that ended before renaming it.
const (
	tmpPrefix   = ".tmp-"
	leftoverAge = time.Hour
)

// WithManifestCache keeps a copy of manifests in the directory dir, each
// named by the sha256 of its stored bytes, which the pointer records: the
// base a writer begins on, the manifest it writes, and the current
// generation a reader opens (Open). A later Dataset, in this process or
// another, whose pointer names a kept manifest reads it from dir instead of
// the store. A copy whose bytes do not match its name is removed and the
// manifest read from the store, so a copy can only be the manifest itself.
// dir is made on first use; "" keeps no copies. It holds at most
// MaxManifestCache bytes, dropping the copies used least recently.
func WithManifestCache(dir string) Option {
	return func(d *Dataset) {
		d.cache = nil
		if dir != "" {
			d.cache = &manifestCache{dir: dir, max: MaxManifestCache}
		}
	}
}

// manifestCache is the directory of WithManifestCache. Its methods do
// nothing on a nil cache, and never fail: a copy that cannot be read or
// written is a miss.
type manifestCache struct {
	dir string
	max int64
}

// name returns the path of the copy of the manifest whose stored bytes
// have sha256 sum, or "" if sum is not a sha256 in hex (a pointer names
// it, so it is checked before it becomes a path).
func (c *manifestCache) name(sum string) string {
	if c == nil || len(sum) != 2*sha256.Size {
		return ""
	}
	for _, r := range sum {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return "" // lower case only, as pointers write it
		}
	}
	return filepath.Join(c.dir, sum)
}

// get returns the stored bytes of the manifest whose sha256 is sum, or nil.
func (c *manifestCache) get(sum string) []byte {
	path := c.name(sum)
	if path == "" {
		return nil
	}
	// Only a regular file is read, checked on the file opened: a link is
	// not followed, and a FIFO does not wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if fi.Size() > generation.MaxStored {
		os.Remove(path) //nolint:errcheck // no manifest is that large
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(f, generation.MaxStored+1))
	if err != nil {
		return nil
	}
	if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
		os.Remove(path) //nolint:errcheck // a damaged copy; the store has the manifest
		return nil
	}
	now := syscall.NsecToTimeval(time.Now().UnixNano())
	syscall.Futimes(int(f.Fd()), []syscall.Timeval{now, now}) //nolint:errcheck // only the order of dropping depends on it
	return b
}

// put keeps stored, the bytes of a manifest whose sha256 is sum, then
// drops the least recently used copies over the cache's size.
func (c *manifestCache) put(sum string, stored []byte) {
	path := c.name(sum)
	if path == "" || int64(len(stored)) > c.max {
		return
	}
	if got := sha256.Sum256(stored); hex.EncodeToString(got[:]) != sum {
		return
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(c.dir, tmpPrefix+"*")
	if err != nil {
		return
	}
	_, werr := io.Copy(tmp, bytes.NewReader(stored))
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		os.Remove(tmp.Name()) //nolint:errcheck // our own temporary file
		return
	}
	c.trim()
}

// trim removes the least recently used copies while they hold more than
// the cache's size.
func (c *manifestCache) trim() {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	type copyInfo struct {
		path string
		size int64
		used time.Time
	}
	var copies []copyInfo
	var total int64
	for _, e := range entries {
		if c.name(e.Name()) == "" {
			// A temporary file that was never renamed (its process
			// ended first) is removed once no put can still be writing it.
			if fi, err := e.Info(); err == nil && strings.HasPrefix(e.Name(), tmpPrefix) && time.Since(fi.ModTime()) > leftoverAge {
				os.Remove(filepath.Join(c.dir, e.Name())) //nolint:errcheck // another trim may have removed it
			}
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		copies = append(copies, copyInfo{filepath.Join(c.dir, e.Name()), fi.Size(), fi.ModTime()})
		total += fi.Size()
	}
	slices.SortFunc(copies, func(a, b copyInfo) int { return a.used.Compare(b.used) })
	for _, cp := range copies {
		if total <= c.max {
			return
		}
		if os.Remove(cp.path) == nil {
			total -= cp.size
		}
	}
}
