package faultstore

import (
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/commitptr/commitptr/store"
)

// BodyHook wraps a store.Store so that the body of the first Put of a key
// ending in Suffix pauses once the store has read At bytes of it, runs
// Then, and goes on: a source that changes while the store reads it, at a
// chosen offset. Other requests pass through.
type BodyHook struct {
	store.Store
	Suffix string
	At     int64
	Then   func()

	started atomic.Bool
	once    sync.Once
	fired   atomic.Bool
}

// Fired reports whether Then has run.
func (h *BodyHook) Fired() bool { return h.fired.Load() }

// Put implements store.Store.
func (h *BodyHook) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	if strings.HasSuffix(key, h.Suffix) && !h.started.Swap(true) {
		body = &hookedBody{r: body, h: h}
	}
	return h.Store.Put(ctx, key, body, opts)
}

// hookedBody delivers the first At bytes of r, then runs Then before it
// reads on.
type hookedBody struct {
	r io.Reader
	h *BodyHook
	n int64
}

func (b *hookedBody) Read(p []byte) (int, error) {
	if b.n >= b.h.At {
		b.h.once.Do(func() {
			b.h.Then()
			b.h.fired.Store(true)
		})
	} else if left := b.h.At - b.n; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	return n, err
}
