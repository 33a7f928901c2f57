package bench

import (
	"context"
	"io"
	"time"

	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/store"
)

// Slow returns s with every request delayed by d before it is sent, as on
// a store reached over a network: loopback servers answer in well under a
// millisecond, an object store in a region in tens of milliseconds, and
// contention between writers depends on that time.
func Slow(s store.Store, d time.Duration) store.Store {
	if d <= 0 {
		return s
	}
	return &slow{s: s, d: d}
}

type slow struct {
	s store.Store
	d time.Duration
}

func (w *slow) wait(ctx context.Context) error { return ctxtime.Sleep(ctx, w.d) }

func (w *slow) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	if err := w.wait(ctx); err != nil {
		return nil, store.Attrs{}, err
	}
	return w.s.Get(ctx, key)
}

func (w *slow) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	if err := w.wait(ctx); err != nil {
		return nil, store.Attrs{}, err
	}
	return w.s.GetRange(ctx, key, off, n)
}

func (w *slow) Head(ctx context.Context, key string) (store.Attrs, error) {
	if err := w.wait(ctx); err != nil {
		return store.Attrs{}, err
	}
	return w.s.Head(ctx, key)
}

func (w *slow) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	if err := w.wait(ctx); err != nil {
		return store.Attrs{}, err
	}
	return w.s.Put(ctx, key, body, opts)
}

func (w *slow) Delete(ctx context.Context, key string, opts store.DeleteOptions) error {
	if err := w.wait(ctx); err != nil {
		return err
	}
	return w.s.Delete(ctx, key, opts)
}

func (w *slow) DeleteMany(ctx context.Context, keys []string) error {
	if err := w.wait(ctx); err != nil {
		return err
	}
	return w.s.DeleteMany(ctx, keys)
}

func (w *slow) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	if err := w.wait(ctx); err != nil {
		return store.ListPage{}, err
	}
	return w.s.List(ctx, req)
}
