package mount

import (
	"container/list"
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
)

// blob is one verified file, held in an unlinked temporary file: its bytes
// are readable through f until the last reference closes it, and nothing
// is left on disk once the process ends, however it ends.
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

// cache holds verified files by content (sha256 and size), so that two
// paths or two generations with the same content share one copy. It keeps
// at most limit bytes of files that no handle has open, evicting the least
// recently used first; a file that is open stays readable until its last
// handle closes, so the disk it uses is bounded by limit plus the files
// open.
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

// acquire returns the verified content of e, downloading it once however
// many open it at the same time. The caller releases it. An error matching
// commit.ErrChecksum means the stored bytes do not match the manifest.
func (c *cache) acquire(ctx context.Context, snap *commit.Snapshot, e generation.Entry) (*blob, error) {
	id := blobID(e)
	c.mu.Lock()
	if b, ok := c.byID[id]; ok {
		b.refs++
		c.lru.MoveToFront(b.elem)
		c.mu.Unlock()
		return b, nil
	}
	fl, ok := c.flights[id]
	if !ok {
		fl = &flight{done: make(chan struct{})}
		c.flights[id] = fl
		go c.download(fl, id, snap, e)
	}
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
		// It landed as this opener gave up: give back its reference.
		if fl.err == nil {
			c.releaseLocked(fl.b)
		}
	default:
		fl.waiters--
	}
	c.mu.Unlock()
	return nil, ctx.Err()
}

// download reads e whole through the snapshot's verifying reader into an
// unlinked temporary file, and adds it to the cache if every byte matched,
// with a reference for each opener waiting.
func (c *cache) download(fl *flight, id string, snap *commit.Snapshot, e generation.Entry) {
	b, err := c.fetch(snap, e)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.flights, id)
	fl.b, fl.err = b, err
	if err == nil {
		b.id, b.refs = id, fl.waiters
		b.elem = c.lru.PushFront(b)
		c.byID[id] = b
		c.used += b.size
		c.evict()
	}
	close(fl.done)
}

func (c *cache) fetch(snap *commit.Snapshot, e generation.Entry) (*blob, error) {
	f, err := os.CreateTemp(c.dir, "commitptr-mount-*")
	if err != nil {
		return nil, fmt.Errorf("mount: cache: %w", err)
	}
	// Unlinked at once: the descriptor keeps the bytes.
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("mount: cache: %w", err)
	}
	rc, err := snap.OpenEntry(c.life, e)
	if err != nil {
		f.Close()
		return nil, err
	}
	n, err := io.Copy(f, rc)
	rc.Close()
	if err == nil && n != e.Size {
		// The verifier checks the size; this is a guard against its misuse.
		err = fmt.Errorf("%w: %q: read %d bytes, its manifest says %d", commit.ErrChecksum, e.Path, n, e.Size)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &blob{size: e.Size, f: f}, nil
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

func blobID(e generation.Entry) string { return fmt.Sprintf("%s:%d", e.SHA256, e.Size) }
