// Package mem is an in-memory store.Store for tests and examples.
//
// It follows S3 semantics: ETags are the hex MD5 of the body, conditions are
// checked atomically, and listings are lexical. Server time is the clock it
// was given (the local clock by default), so tests can skew it.
//
// The URL mem://name opens a store shared by that name within the process.
package mem

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"math"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/btree"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/portable"
)

func init() {
	store.Register("mem", openURL)
}

var (
	namedMu sync.Mutex
	named   = map[string]*Store{}
)

func openURL(_ context.Context, u *url.URL, cfg store.Config) (store.Store, error) {
	if err := cfg.RefuseObjectSettings("mem"); err != nil {
		return nil, err
	}
	if err := store.RefuseObjectSettingsInURL(u); err != nil {
		return nil, err
	}
	if u.Host == "" {
		return nil, fmt.Errorf("mem: URL %q has no store name (want mem://name/prefix)", u.String())
	}
	prefix, err := store.CleanPrefix(u.Path)
	if err != nil {
		return nil, err
	}
	namedMu.Lock()
	s := named[u.Host]
	if s == nil {
		s = New()
		named[u.Host] = s
	}
	namedMu.Unlock()
	return store.WithPrefix(s, prefix), nil
}

// Store is an in-memory object store. The zero value is not usable; call New.
type Store struct {
	mu   sync.Mutex
	objs map[string]*object
	// keys holds the keys of objs in order, so that a listing costs what
	// it returns, not the size of the store.
	keys  *btree.BTreeG[string]
	clock func() time.Time
}

type object struct {
	body     []byte
	etag     string
	modified time.Time
	meta     map[string]string
	ctype    string
	cenc     string
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the store's clock, used for LastModified and ServerTime.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.clock = now } }

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{objs: map[string]*object{}, keys: btree.NewG(32, func(a, b string) bool { return a < b }), clock: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

func (s *Store) attrs(o *object, now time.Time) store.Attrs {
	return store.Attrs{
		ETag:            o.etag,
		Size:            int64(len(o.body)),
		LastModified:    o.modified,
		ServerTime:      now,
		Metadata:        maps.Clone(o.meta),
		ContentType:     o.ctype,
		ContentEncoding: o.cenc,
	}
}

func checkKey(op, key string) error {
	if key == "" {
		return store.Wrap(op, key, store.ErrInvalidKey, fmt.Errorf("empty key"))
	}
	return nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	return s.get(ctx, key, 0, -1)
}

// GetRange implements store.Store.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	if err := portable.CheckRange(off, n); err != nil {
		return nil, store.Attrs{}, store.Wrap("get", key, nil, err)
	}
	return s.get(ctx, key, off, n)
}

// get reads n bytes of the object from off, or all of it when n < 0.
func (s *Store) get(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	if err := checkKey("get", key); err != nil {
		return nil, store.Attrs{}, err
	}
	if err := ctx.Err(); err != nil {
		return nil, store.Attrs{}, store.Wrap("get", key, nil, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objs[key]
	if o == nil {
		return nil, store.Attrs{}, store.Wrap("get", key, store.ErrNotExist, nil)
	}
	body := o.body
	if n >= 0 {
		size := int64(len(body))
		if off >= size {
			return nil, store.Attrs{}, store.Wrap("get", key, store.ErrInvalidRange, fmt.Errorf("offset %d of an object of %d bytes", off, size))
		}
		body = o.body[off : off+min(n, size-off)]
	}
	return io.NopCloser(bytes.NewReader(body)), s.attrs(o, s.clock()), nil
}

// Head implements store.Store.
func (s *Store) Head(ctx context.Context, key string) (store.Attrs, error) {
	if err := checkKey("head", key); err != nil {
		return store.Attrs{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Attrs{}, store.Wrap("head", key, nil, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objs[key]
	if o == nil {
		return store.Attrs{}, store.Wrap("head", key, store.ErrNotExist, nil)
	}
	return s.attrs(o, s.clock()), nil
}

// Put implements store.Store.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	if err := checkKey("put", key); err != nil {
		return store.Attrs{}, err
	}
	if err := portable.Check(body, opts, math.MaxInt64); err != nil {
		return store.Attrs{}, store.Wrap("put", key, nil, err)
	}
	data, err := io.ReadAll(body)
	if err != nil {
		return store.Attrs{}, store.Wrap("put", key, nil, err)
	}
	if opts.Size > 0 && int64(len(data)) != opts.Size {
		return store.Attrs{}, store.Wrap("put", key, nil, fmt.Errorf("body has %d bytes, but Size says %d", len(data), opts.Size))
	}
	if err := ctx.Err(); err != nil {
		return store.Attrs{}, store.Wrap("put", key, nil, err)
	}
	sum := md5.Sum(data)
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.objs[key]
	switch {
	case opts.IfNoneMatch && cur != nil:
		return store.Attrs{}, store.Wrap("put", key, store.ErrPrecondition, nil)
	case opts.IfMatch != "" && (cur == nil || cur.etag != opts.IfMatch):
		return store.Attrs{}, store.Wrap("put", key, store.ErrPrecondition, nil)
	}
	now := s.clock()
	o := &object{
		body:     data,
		etag:     hex.EncodeToString(sum[:]),
		modified: now,
		meta:     maps.Clone(opts.Metadata),
		ctype:    opts.ContentType,
		cenc:     opts.ContentEncoding,
	}
	if cur == nil {
		s.keys.ReplaceOrInsert(key)
	}
	s.objs[key] = o
	return s.attrs(o, now), nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key string, opts store.DeleteOptions) error {
	if err := checkKey("delete", key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return store.Wrap("delete", key, nil, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.objs[key]
	if cur != nil && opts.IfMatch != "" && cur.etag != opts.IfMatch {
		return store.Wrap("delete", key, store.ErrPrecondition, nil)
	}
	delete(s.objs, key)
	s.keys.Delete(key)
	return nil
}

// DeleteMany implements store.Store.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	if err := ctx.Err(); err != nil {
		return store.Wrap("delete-many", "", nil, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.objs, k)
		s.keys.Delete(k)
	}
	return nil
}

// List implements store.Store. Its page token is the last key or common
// prefix returned.
func (s *Store) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return store.ListPage{}, store.Wrap("list", req.Prefix, nil, err)
	}
	s.mu.Lock()
	var keys []string
	s.keys.AscendGreaterOrEqual(req.Prefix, func(k string) bool {
		if !strings.HasPrefix(k, req.Prefix) {
			return false
		}
		keys = append(keys, k)
		return true
	})
	snapshot := make(map[string]*object, len(keys))
	for _, k := range keys {
		snapshot[k] = s.objs[k]
	}
	s.mu.Unlock()
	return store.Paginate(keys, func(k string) store.Object {
		o := snapshot[k]
		return store.Object{Key: k, Size: int64(len(o.body)), ETag: o.etag, LastModified: o.modified}
	}, req), nil
}
