package faults

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/store"
)

// Store is a store.Store whose requests suffer an injector's faults as if
// they crossed a network: its rules, and the faults its rates draw. Its
// retries emulate an SDK's: a request that failed with a lost response, a
// reset, a refused connection, a 500 or a 503 is sent again, up to retries
// more times, each try rolling its own fault. As with a real SDK, a retried
// conditional write whose first try was applied gets ErrPrecondition.
//
// A 409 is not retried (neither SDK does) and surfaces as
// store.ErrConflict. A Cut fault breaks a Get's body off partway, and a
// Held one delays the result of a call that was made. Rules strike as on
// the S3 transport, and a multi-object delete matches them by its first
// key. A PUT's body is read into memory only when it may be sent more than
// once (retries, Retried, Late).
type Store struct {
	s       store.Store
	in      *Injector
	retries int

	mu   sync.Mutex
	late []func() error // the PUTs that Late kept back, for Release
}

// Store wraps s (a mem or fs store, typically) in a Store of the injector,
// with retries emulated retries per request.
func (in *Injector) Store(s store.Store, retries int) *Store {
	return &Store{s: s, in: in, retries: retries}
}

// NewStore wraps s in a Store whose injector is its own, draws no faults
// and retries nothing: only the rules given to Add strike.
func NewStore(s store.Store) *Store { return New(Config{}).Store(s, 0) }

// Add installs a rule on the store's injector.
func (f *Store) Add(r Rule) { f.in.Add(r) }

// Clear removes every rule of the store's injector.
func (f *Store) Clear() { f.in.Clear() }

// Unwrap returns the wrapped store.
func (f *Store) Unwrap() store.Store { return f.s }

// Release sends the PUTs that Late faults kept back, in the order they
// were made, and returns their errors (a conditional write kept back may
// now fail its condition).
func (f *Store) Release() error {
	f.mu.Lock()
	late := f.late
	f.late = nil
	f.mu.Unlock()
	var errs []error
	for _, send := range late {
		errs = append(errs, send())
	}
	return errors.Join(errs...)
}

// run performs one operation with faults and emulated retries. call sends
// the request once; it receives the fault so that a Get can cut its body
// and a PUT pause its body or be kept back. drop releases what a call
// returned when its response is lost. Its errors name key.
func (f *Store) run(ctx context.Context, r Request, key string, call func(ft fault) error, drop func()) error {
	op := r.Op
	for attempt := 0; ; attempt++ {
		ft := f.in.roll(r, S3, true)
		var ferr error
		switch ft.kind {
		case none, Paused: // Paused runs Then from within the body
			return call(ft)
		case Cut:
			err := call(ft)
			ft.hold()
			return err
		case Latency:
			if err := ft.wait(ctx); err != nil {
				return store.Wrap(op.String(), key, nil, err)
			}
			return call(ft)
		case Held:
			err := call(ft)
			if werr := ft.wait(ctx); werr != nil {
				if err == nil && drop != nil {
					drop()
				}
				return store.Wrap(op.String(), key, nil, werr)
			}
			return err
		case Conflict:
			ft.hold()
			return store.Wrap(op.String(), key, store.ErrConflict, ft.error(op))
		case Retried:
			if call(ft) == nil && drop != nil {
				drop()
			}
			ft.hold()
			return call(ft)
		case Lost, Reset, Late: // Late: kept back, not sent
			if call(ft) == nil && drop != nil {
				drop()
			}
			ft.hold()
			ferr = ft.error(op)
		default: // Refused, Internal, SlowDown: not sent
			ft.hold()
			ferr = ft.error(op)
		}
		if attempt >= f.retries {
			return store.Wrap(op.String(), key, nil, ferr)
		}
		if err := ctxtime.Sleep(ctx, time.Millisecond<<attempt); err != nil {
			return store.Wrap(op.String(), key, nil, err)
		}
	}
}

// cond returns the precondition of a write or delete.
func cond(ifMatch string, ifNoneMatch bool) Cond {
	switch {
	case ifNoneMatch:
		return IfNoneMatch
	case ifMatch != "":
		return IfMatch
	}
	return Unconditional
}

// Get implements store.Store.
func (f *Store) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	return f.get(ctx, key, func() (io.ReadCloser, store.Attrs, int64, error) {
		rc, attrs, err := f.s.Get(ctx, key)
		return rc, attrs, attrs.Size, err
	})
}

// GetRange implements store.Store. A ranged GET is a GET: the same rules
// and rates strike it, and a Cut breaks its body off halfway.
func (f *Store) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	return f.get(ctx, key, func() (io.ReadCloser, store.Attrs, int64, error) {
		rc, attrs, err := f.s.GetRange(ctx, key, off, n)
		return rc, attrs, min(n, attrs.Size-off), err
	})
}

// get runs a GET that open sends once; open returns the body, the
// object's attributes and the body's length.
func (f *Store) get(ctx context.Context, key string, open func() (io.ReadCloser, store.Attrs, int64, error)) (io.ReadCloser, store.Attrs, error) {
	var rc io.ReadCloser
	var attrs store.Attrs
	err := f.run(ctx, Request{Op: store.OpGet, Key: key, Cond: Unconditional}, key, func(ft fault) error {
		var err error
		var size int64
		rc, attrs, size, err = open()
		if err == nil && ft.kind == Cut && size > 1 {
			rc = cut(rc, size/2, ft.error(store.OpGet))
		}
		return err
	}, func() { rc.Close() })
	if err != nil {
		return nil, store.Attrs{}, err
	}
	return rc, attrs, nil
}

// Head implements store.Store.
func (f *Store) Head(ctx context.Context, key string) (store.Attrs, error) {
	var attrs store.Attrs
	err := f.run(ctx, Request{Op: store.OpHead, Key: key, Cond: Unconditional}, key, func(fault) error {
		var err error
		attrs, err = f.s.Head(ctx, key)
		return err
	}, nil)
	if err != nil {
		return store.Attrs{}, err
	}
	return attrs, nil
}

// Put implements store.Store.
func (f *Store) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	// The body is read into memory (kept) once it may be sent more than
	// once; keptErr is why it could not be.
	var kept []byte
	var isKept bool
	var keptErr error
	keep := func() {
		if !isKept {
			kept, keptErr = io.ReadAll(body)
			isKept = true
		}
	}
	if f.retries > 0 {
		if keep(); keptErr != nil {
			return store.Attrs{}, store.Wrap("put", key, nil, keptErr)
		}
	}
	var attrs store.Attrs
	err := f.run(ctx, Request{Op: store.OpPut, Key: key, Cond: cond(opts.IfMatch, opts.IfNoneMatch)}, key, func(ft fault) error {
		if ft.kind == Retried || ft.kind == Late {
			keep()
		}
		if keptErr != nil {
			return store.Wrap("put", key, nil, keptErr)
		}
		r := body
		if isKept {
			r = bytes.NewReader(kept)
		}
		switch ft.kind {
		case Late:
			f.mu.Lock()
			f.late = append(f.late, func() error {
				_, err := f.s.Put(context.Background(), key, bytes.NewReader(kept), opts)
				return err
			})
			f.mu.Unlock()
			return nil
		case Paused:
			r = &pausedBody{r: r, at: ft.at, then: ft.then}
		}
		var err error
		attrs, err = f.s.Put(ctx, key, r, opts)
		return err
	}, nil)
	if err != nil {
		return store.Attrs{}, err
	}
	return attrs, nil
}

// Delete implements store.Store.
func (f *Store) Delete(ctx context.Context, key string, opts store.DeleteOptions) error {
	return f.run(ctx, Request{Op: store.OpDelete, Key: key, Cond: cond(opts.IfMatch, false)}, key, func(fault) error {
		return f.s.Delete(ctx, key, opts)
	}, nil)
}

// DeleteMany implements store.Store.
func (f *Store) DeleteMany(ctx context.Context, keys []string) error {
	first := ""
	if len(keys) > 0 {
		first = keys[0]
	}
	return f.run(ctx, Request{Op: store.OpDeleteMany, Key: first, Cond: Unconditional}, first, func(fault) error {
		return f.s.DeleteMany(ctx, keys)
	}, nil)
}

// List implements store.Store.
func (f *Store) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	var page store.ListPage
	err := f.run(ctx, Request{Op: store.OpList, Key: req.Prefix, Cond: Unconditional}, req.Prefix, func(fault) error {
		var err error
		page, err = f.s.List(ctx, req)
		return err
	}, nil)
	if err != nil {
		return store.ListPage{}, err
	}
	return page, nil
}

// cut returns a body that delivers the first n bytes of rc, then fails
// with err, as a connection that breaks mid-download.
func cut(rc io.ReadCloser, n int64, err error) io.ReadCloser {
	return &cutBody{rc: rc, left: n, err: err}
}

type cutBody struct {
	rc   io.ReadCloser
	left int64
	err  error
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, c.err
	}
	n, err := c.rc.Read(p[:min(int64(len(p)), c.left)])
	c.left -= int64(n)
	if err == io.EOF {
		err = c.err // the body was shorter than the cut: still a cut
	}
	return n, err
}

func (c *cutBody) Close() error { return c.rc.Close() }

// pausedBody delivers the first at bytes of r, then runs then, once,
// before it reads on.
type pausedBody struct {
	r    io.Reader
	at   int64
	n    int64
	then func()
}

func (b *pausedBody) Read(p []byte) (int, error) {
	if b.n >= b.at {
		if b.then != nil {
			b.then()
			b.then = nil
		}
	} else if left := b.at - b.n; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	return n, err
}
