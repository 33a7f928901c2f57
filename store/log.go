package store

import (
	"context"
	"io"
	"log/slog"
	"time"
)

// logged is a Store that logs each request it passes to the store below,
// at debug level: its kind, key or prefix, duration and error.
type logged struct {
	s   Store
	log *slog.Logger
}

// WithLog wraps s so that every request is logged to log at debug level.
func WithLog(s Store, log *slog.Logger) Store { return &logged{s: s, log: log} }

// Unwrap returns the logged store.
func (l *logged) Unwrap() Store { return l.s }

func (l *logged) done(ctx context.Context, op Op, key string, start time.Time, err error, attrs ...any) {
	args := append([]any{"op", op.String(), "key", key, "took", time.Since(start).Round(time.Microsecond)}, attrs...)
	if err != nil {
		args = append(args, "error", err)
	}
	l.log.DebugContext(ctx, "request", args...)
}

func (l *logged) Get(ctx context.Context, key string) (io.ReadCloser, Attrs, error) {
	start := time.Now()
	rc, a, err := l.s.Get(ctx, key)
	l.done(ctx, OpGet, key, start, err)
	return rc, a, err
}

func (l *logged) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, Attrs, error) {
	start := time.Now()
	rc, a, err := l.s.GetRange(ctx, key, off, n)
	l.done(ctx, OpGet, key, start, err, "offset", off, "length", n)
	return rc, a, err
}

func (l *logged) Head(ctx context.Context, key string) (Attrs, error) {
	start := time.Now()
	a, err := l.s.Head(ctx, key)
	l.done(ctx, OpHead, key, start, err)
	return a, err
}

func (l *logged) Put(ctx context.Context, key string, body io.Reader, opts PutOptions) (Attrs, error) {
	start := time.Now()
	a, err := l.s.Put(ctx, key, body, opts)
	attrs := []any{"size", opts.Size}
	switch {
	case opts.IfNoneMatch:
		attrs = append(attrs, "if", "none-match")
	case opts.IfMatch != "":
		attrs = append(attrs, "if", "match")
	}
	l.done(ctx, OpPut, key, start, err, attrs...)
	return a, err
}

func (l *logged) Delete(ctx context.Context, key string, opts DeleteOptions) error {
	start := time.Now()
	err := l.s.Delete(ctx, key, opts)
	l.done(ctx, OpDelete, key, start, err)
	return err
}

func (l *logged) DeleteMany(ctx context.Context, keys []string) error {
	start := time.Now()
	err := l.s.DeleteMany(ctx, keys)
	first := ""
	if len(keys) > 0 {
		first = keys[0]
	}
	l.done(ctx, OpDeleteMany, first, start, err, "keys", len(keys))
	return err
}

func (l *logged) List(ctx context.Context, req ListRequest) (ListPage, error) {
	start := time.Now()
	p, err := l.s.List(ctx, req)
	l.done(ctx, OpList, req.Prefix, start, err, "entries", len(p.Objects))
	return p, err
}
