package faults

import (
	"bytes"
	"context"
	"io"
	"time"

	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/internal/faultstore"
	"github.com/commitptr/commitptr/store"
)

// Store wraps s (a mem or fs store, typically) so that its requests suffer
// the injector's faults as if they crossed a network. retries emulates an
// SDK's retries: a request that failed with a lost response, a reset, a
// refused connection, a 500 or a 503 is sent again, up to retries more
// times, each try rolling its own fault. As with a real SDK, a retried
// conditional write whose first try was applied gets ErrPrecondition.
//
// A 409 is not retried (neither SDK does) and surfaces as
// store.ErrConflict. A Cut fault breaks a Get's body off partway, and a
// Held one delays the result of a call that was made. Rules strike as on
// the S3 transport.
func (in *Injector) Store(s store.Store, retries int) store.Store {
	return &faultStore{s: s, in: in, retries: retries}
}

type faultStore struct {
	s       store.Store
	in      *Injector
	retries int
}

// Unwrap returns the wrapped store.
func (f *faultStore) Unwrap() store.Store { return f.s }

// run performs one operation with faults and emulated retries. call sends
// the request once; it receives the fault kind so that a Get can cut its
// body. drop releases what a call returned when its response is lost. Its
// errors name key.
func (f *faultStore) run(ctx context.Context, r Request, key string, call func(k Kind) error, drop func()) error {
	op := r.Op
	for attempt := 0; ; attempt++ {
		ft := f.in.roll(r, S3)
		var ferr error
		switch ft.kind {
		case none:
			return call(none)
		case Cut:
			err := call(Cut)
			ft.hold()
			return err
		case Latency:
			if err := ft.wait(ctx); err != nil {
				return store.Wrap(op.String(), key, nil, err)
			}
			return call(Latency)
		case Held:
			err := call(Held)
			if werr := ft.wait(ctx); werr != nil {
				if err == nil && drop != nil {
					drop()
				}
				return store.Wrap(op.String(), key, nil, werr)
			}
			return err
		case Conflict:
			ft.hold()
			return store.Wrap(op.String(), key, store.ErrConflict, &Error{Kind: ft.kind, Op: op})
		case Lost, Reset:
			if call(ft.kind) == nil && drop != nil {
				drop()
			}
			ft.hold()
			ferr = &Error{Kind: ft.kind, Op: op}
		default: // Refused, Internal, SlowDown: not sent
			ft.hold()
			ferr = &Error{Kind: ft.kind, Op: op}
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

func (f *faultStore) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	var rc io.ReadCloser
	var attrs store.Attrs
	err := f.run(ctx, Request{Op: store.OpGet, Key: key, Cond: Unconditional}, key, func(k Kind) error {
		var err error
		rc, attrs, err = f.s.Get(ctx, key)
		if err == nil && k == Cut && attrs.Size > 1 {
			rc = faultstore.CutBody(rc, attrs.Size/2, &Error{Kind: Cut, Op: store.OpGet})
		}
		return err
	}, func() { rc.Close() })
	if err != nil {
		return nil, store.Attrs{}, err
	}
	return rc, attrs, nil
}

func (f *faultStore) Head(ctx context.Context, key string) (store.Attrs, error) {
	var attrs store.Attrs
	err := f.run(ctx, Request{Op: store.OpHead, Key: key, Cond: Unconditional}, key, func(Kind) error {
		var err error
		attrs, err = f.s.Head(ctx, key)
		return err
	}, nil)
	if err != nil {
		return store.Attrs{}, err
	}
	return attrs, nil
}

func (f *faultStore) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	b, err := io.ReadAll(body) // kept for the retries
	if err != nil {
		return store.Attrs{}, store.Wrap("put", key, nil, err)
	}
	var attrs store.Attrs
	err = f.run(ctx, Request{Op: store.OpPut, Key: key, Cond: cond(opts.IfMatch, opts.IfNoneMatch)}, key, func(Kind) error {
		var err error
		attrs, err = f.s.Put(ctx, key, bytes.NewReader(b), opts)
		return err
	}, nil)
	if err != nil {
		return store.Attrs{}, err
	}
	return attrs, nil
}

func (f *faultStore) Delete(ctx context.Context, key string, opts store.DeleteOptions) error {
	return f.run(ctx, Request{Op: store.OpDelete, Key: key, Cond: cond(opts.IfMatch, false)}, key, func(Kind) error {
		return f.s.Delete(ctx, key, opts)
	}, nil)
}

func (f *faultStore) DeleteMany(ctx context.Context, keys []string) error {
	first := ""
	if len(keys) > 0 {
		first = keys[0]
	}
	return f.run(ctx, Request{Op: store.OpDeleteMany, Cond: Unconditional}, first, func(Kind) error {
		return f.s.DeleteMany(ctx, keys)
	}, nil)
}

func (f *faultStore) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	var page store.ListPage
	err := f.run(ctx, Request{Op: store.OpList, Key: req.Prefix, Cond: Unconditional}, req.Prefix, func(Kind) error {
		var err error
		page, err = f.s.List(ctx, req)
		return err
	}, nil)
	if err != nil {
		return store.ListPage{}, err
	}
	return page, nil
}
