package store

import (
	"context"
	"io"
	"strings"
)

// WithPrefix returns a Store that keeps every key under prefix, which should
// end with "/". Keys passed to and returned from it are relative to prefix.
func WithPrefix(s Store, prefix string) Store {
	if prefix == "" {
		return s
	}
	return &prefixed{s: s, p: prefix}
}

type prefixed struct {
	s Store
	p string
}

func (x *prefixed) Get(ctx context.Context, key string) (io.ReadCloser, Attrs, error) {
	rc, a, err := x.s.Get(ctx, x.p+key)
	return rc, a, err
}

func (x *prefixed) Head(ctx context.Context, key string) (Attrs, error) {
	a, err := x.s.Head(ctx, x.p+key)
	return a, err
}

func (x *prefixed) Put(ctx context.Context, key string, body io.Reader, opts PutOptions) (Attrs, error) {
	a, err := x.s.Put(ctx, x.p+key, body, opts)
	return a, err
}

func (x *prefixed) Delete(ctx context.Context, key string, opts DeleteOptions) error {
	return x.s.Delete(ctx, x.p+key, opts)
}

func (x *prefixed) DeleteMany(ctx context.Context, keys []string) error {
	full := make([]string, len(keys))
	for i, k := range keys {
		full[i] = x.p + k
	}
	return x.s.DeleteMany(ctx, full)
}

func (x *prefixed) List(ctx context.Context, req ListRequest) (ListPage, error) {
	req.Prefix = x.p + req.Prefix
	if req.StartAfter != "" {
		req.StartAfter = x.p + req.StartAfter
	}
	page, err := x.s.List(ctx, req)
	if err != nil {
		return ListPage{}, err
	}
	for i := range page.Objects {
		page.Objects[i].Key = strings.TrimPrefix(page.Objects[i].Key, x.p)
	}
	for i := range page.Prefixes {
		page.Prefixes[i] = strings.TrimPrefix(page.Prefixes[i], x.p)
	}
	return page, nil
}

// Unwrap returns the store below the prefix.
func (x *prefixed) Unwrap() Store { return x.s }
