package store

import (
	"context"
	"fmt"
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

func (x *prefixed) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, Attrs, error) {
	rc, a, err := x.s.GetRange(ctx, x.p+key, off, n)
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

// MaxKeyBytes is the longest key, in bytes, that every supported store
// takes: S3, Cloud Storage and Azure Blob Storage limit keys to 1024.
const MaxKeyBytes = 1024

// FullKey returns key as the service below s sees it: with the prefixes of
// every WithPrefix between s and the driver.
func FullKey(s Store, key string) string {
	for s != nil {
		switch x := s.(type) {
		case *prefixed:
			key = x.p + key
			s = x.s
		case interface{ Unwrap() Store }:
			s = x.Unwrap()
		default:
			return key
		}
	}
	return key
}

// CheckKeyLength refuses a key that, with the prefixes of s, is longer
// than MaxKeyBytes; the error names the key and matches ErrInvalidKey.
func CheckKeyLength(s Store, key string) error {
	if full := FullKey(s, key); len(full) > MaxKeyBytes {
		return fmt.Errorf("key %.80q... has %d bytes with the store's prefix, more than the %d object stores take: %w", full, len(full), MaxKeyBytes, ErrInvalidKey)
	}
	return nil
}
