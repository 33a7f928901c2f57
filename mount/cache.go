package mount

import (
	"container/list"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
)

// blob is one verified file, or one verified part of a file, held in an
// unlinked temporary file: its bytes are readable through f until the last
// reference closes it, and nothing is left on disk once the process ends,
// however it ends.
type blob struct {
	id   string // sha256 and size
	size int64
	f    *os.File
	refs int           // open handles; guarded by cache.mu
	elem *list.Element // in cache.lru while the cache holds it; nil once evicted
}

// ReadAt reads from the verified copy.
func (b *blob) ReadAt(p []byte, off int64) (int, error) { return b.f.ReadAt(p, off) }

// flight is one download in progress, which every opener of the same
// content waits for.
type flight struct {
	done    chan struct{}
	waiters int // the openers waiting, each given a reference when it lands
	b       *blob
	err     error
}

// cache holds verified files and parts of files by content (sha256 and
// size), so that two paths or two generations with the same content share
// one copy. It keeps at most limit bytes of blobs that no reader holds,
// evicting the least recently used first; a blob that is held stays
// readable until its last reference is released, so the disk it uses is
// bounded by limit plus the blobs held.
type cache struct {
	dir   string
	limit int64
	life  context.Context // downloads outlive the request that started them

	mu      sync.Mutex
	used    int64 // bytes of the blobs in lru
	lru     *list.List
	byID    map[string]*blob
	flights map[string]*flight
}

func newCache(life context.Context, dir string, limit int64) *cache {
	return &cache{dir: dir, limit: limit, life: life, lru: list.New(), byID: map[string]*blob{}, flights: map[string]*flight{}}
}

// content is what a blob holds: its id, its size, and how to read it,
// verified, from the store. fill writes exactly size bytes, or fails; an
// error matching commit.ErrChecksum means the stored bytes do not match
// the manifest.
type content struct {
	id   string
	size int64
	fill func(ctx context.Context, w io.Writer) error
}

// wholeFile is the content of the file e describes, read in one GET
// through the snapshot's verifying reader.
func wholeFile(snap *commit.Snapshot, e generation.Entry) content {
	return content{id: blobID(e.SHA256, e.Size), size: e.Size, fill: func(ctx context.Context, w io.Writer) error {
		rc, err := snap.OpenEntry(ctx, e)
		if err != nil {
			return err
		}
		defer rc.Close()
		n, err := io.Copy(w, rc)
		if err == nil && n != e.Size {
			// The verifier checks the size; this is a guard against its misuse.
			err = fmt.Errorf("%w: %q: read %d bytes, its manifest says %d", commit.ErrChecksum, e.Path, n, e.Size)
		}
		return err
	}}
}

// filePart is part i of the file e describes, which has part checksums,
// read in one ranged GET and checked before it is kept.
func filePart(snap *commit.Snapshot, e generation.Entry, i int) content {
	_, n, sum := e.Part(i)
	return content{id: blobID(sum, n), size: n, fill: func(ctx context.Context, w io.Writer) error {
		b, err := snap.ReadPart(ctx, e, i)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}}
}

// acquire returns the blob of c, downloading it once however many ask for
// it at the same time. The caller releases it.
func (c *cache) acquire(ctx context.Context, ct content) (*blob, error) {
	c.mu.Lock()
	if b, ok := c.byID[ct.id]; ok {
		b.refs++
		c.lru.MoveToFront(b.elem)
		c.mu.Unlock()
		return b, nil
	}
	fl := c.start(ct)
	fl.waiters++
	c.mu.Unlock()
	select {
	case <-fl.done:
		return fl.b, fl.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	select {
	case <-fl.done:
		// It landed as this reader gave up: give back its reference.
		if fl.err == nil {
			c.releaseLocked(fl.b)
		}
	default:
		fl.waiters--
	}
	c.mu.Unlock()
	return nil, ctx.Err()
}

// prefetch starts the download of ct, unless the cache holds it or it is
// under way; nobody holds the blob once it lands.
func (c *cache) prefetch(ct content) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byID[ct.id]; !ok {
		c.start(ct)
	}
}

// start returns the flight of ct, starting it if none is under way.
// c.mu is held.
func (c *cache) start(ct content) *flight {
	fl, ok := c.flights[ct.id]
	if !ok {
		fl = &flight{done: make(chan struct{})}
		c.flights[ct.id] = fl
		go c.download(fl, ct)
	}
	return fl
}

// download fills an unlinked temporary file with ct, and adds it to the
// cache if every byte matched, with a reference for each reader waiting.
func (c *cache) download(fl *flight, ct content) {
	b, err := c.fetch(ct)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.flights, ct.id)
	fl.b, fl.err = b, err
	if err == nil {
		b.id, b.refs = ct.id, fl.waiters
		b.elem = c.lru.PushFront(b)
		c.byID[ct.id] = b
		c.used += b.size
		c.evict()
	}
	close(fl.done)
}

func (c *cache) fetch(ct content) (*blob, error) {
	f, err := os.CreateTemp(c.dir, "commitptr-mount-*")
	if err != nil {
		return nil, fmt.Errorf("mount: cache: %w", err)
	}
	// Unlinked at once: the descriptor keeps the bytes.
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("mount: cache: %w", err)
	}
	if err := ct.fill(c.life, f); err != nil {
		f.Close()
		return nil, err
	}
	return &blob{size: ct.size, f: f}, nil
}

// release drops a reference to b. A blob nobody holds is kept while the
// cache has room, and closed (its disk freed) once evicted: only blobs
// nobody holds are evicted.
func (c *cache) release(b *blob) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(b)
}

func (c *cache) releaseLocked(b *blob) {
	b.refs--
	c.evict()
}

// evict drops the least recently used blobs that no handle holds until
// the cache is within its limit, and closes them. c.mu is held.
func (c *cache) evict() {
	for e := c.lru.Back(); e != nil && c.used > c.limit; {
		prev := e.Prev()
		if b := e.Value.(*blob); b.refs == 0 {
			c.lru.Remove(e)
			b.elem = nil
			delete(c.byID, b.id)
			c.used -= b.size
			b.f.Close()
		}
		e = prev
	}
}

// close drops every blob no handle holds.
func (c *cache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := c.limit
	c.limit = -1
	c.evict()
	c.limit = limit
}

func blobID(sum string, size int64) string { return sum + ":" + strconv.FormatInt(size, 10) }
