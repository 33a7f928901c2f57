package testenv

import (
	"context"
	"io"
	"sync"

	"github.com/commitptr/commitptr/store"
)

// Gets is a store that records its GETs: how many read whole objects, and
// the offset and length of each ranged one.
type Gets struct {
	store.Store
	mu     sync.Mutex
	whole  int
	ranges [][2]int64
}

// Get records a GET of a whole object.
func (g *Gets) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	g.mu.Lock()
	g.whole++
	g.mu.Unlock()
	return g.Store.Get(ctx, key)
}

// GetRange records a ranged GET.
func (g *Gets) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	g.mu.Lock()
	g.ranges = append(g.ranges, [2]int64{off, n})
	g.mu.Unlock()
	return g.Store.GetRange(ctx, key, off, n)
}

// Take returns the GETs recorded since the last Take.
func (g *Gets) Take() (whole int, ranges [][2]int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	whole, ranges = g.whole, g.ranges
	g.whole, g.ranges = 0, nil
	return whole, ranges
}

// Ranges returns the ranged GETs recorded since the last Take, and drops
// the record of both kinds.
func (g *Gets) Ranges() [][2]int64 {
	_, ranges := g.Take()
	return ranges
}
