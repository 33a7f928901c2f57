package gc_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/internal/teststores"
	"github.com/commitptr/commitptr/store"
)

type timed struct {
	store.Store
	mu sync.Mutex
	d  map[string]time.Duration
}

func (t *timed) add(k string, s time.Time) { t.mu.Lock(); t.d[k] += time.Since(s); t.mu.Unlock() }
func (t *timed) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	defer t.add("get", time.Now())
	return t.Store.Get(ctx, key)
}
func (t *timed) List(ctx context.Context, r store.ListRequest) (store.ListPage, error) {
	defer t.add("list", time.Now())
	return t.Store.List(ctx, r)
}
func (t *timed) DeleteMany(ctx context.Context, k []string) error {
	defer t.add("deletemany", time.Now())
	return t.Store.DeleteMany(ctx, k)
}
func (t *timed) Put(ctx context.Context, key string, b io.Reader, o store.PutOptions) (store.Attrs, error) {
	defer t.add("put", time.Now())
	return t.Store.Put(ctx, key, b, o)
}

func TestDbgCollect(t *testing.T) {
	for _, f := range teststores.All() {
		if f.Name != "s3" {
			continue
		}
		s := f.New(t)
		seedChain(t, s, 1000, 10)
		ts := &timed{Store: s, d: map[string]time.Duration{}}
		start := time.Now()
		_, err := gc.Run(context.Background(), ts, gc.Options{Keep: 2, Grace: -1, OrphanAge: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("total %s: %v", time.Since(start), ts.d)
	}
}
