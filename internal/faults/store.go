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
// store.ErrConflict. A Cut fault breaks a Get's body off partway.
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
// body. drop releases what a call returned when its response is lost.
func (f *faultStore) run(ctx context.Context, op store.Op, key string, cond bool, call func(k Kind) error, drop func()) error {
	for attempt := 0; ; attempt++ {
		k, lat := f.in.roll(op, cond)
		var ferr error
		switch k {
		case none, Cut:
			return call(k)
		case Latency:
			if err := ctxtime.Sleep(ctx, lat); err != nil {
				return store.Wrap(op.String(), key, nil, err)
			}
			return call(k)
		case Conflict:
			return store.Wrap(op.String(), key, store.ErrConflict, &Error{Kind: k, Op: op})
		case Lost, Reset:
			if call(k) == nil && drop != nil {
				drop()
			}
			ferr = &Error{Kind: k, Op: op}
		default: // Refused, Internal, SlowDown: not sent
			ferr = &Error{Kind: k, Op: op}
		}
		if attempt >= f.retries {
			return store.Wrap(op.String(), key, nil, ferr)
		}
		if err := ctxtime.Sleep(ctx, time.Millisecond<<attempt); err != nil {
			return store.Wrap(op.String(), key, nil, err)
		}
	}
}

func (f *faultStore) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	var rc io.ReadCloser
	var attrs store.Attrs
	err := f.run(ctx, store.OpGet, key, false, func(k Kind) error {
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
	err := f.run(ctx, store.OpHead, key, false, func(Kind) error {
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
	err = f.run(ctx, store.OpPut, key, opts.IfMatch != "" || opts.IfNoneMatch, func(Kind) error {
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
	return f.run(ctx, store.OpDelete, key, opts.IfMatch != "", func(Kind) error {
		return f.s.Delete(ctx, key, opts)
	}, nil)
}

func (f *faultStore) DeleteMany(ctx context.Context, keys []string) error {
	first := ""
	if len(keys) > 0 {
		first = keys[0]
	}
	return f.run(ctx, store.OpDeleteMany, first, false, func(Kind) error {
		return f.s.DeleteMany(ctx, keys)
	}, nil)
}

func (f *faultStore) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	var page store.ListPage
	err := f.run(ctx, store.OpList, req.Prefix, false, func(Kind) error {
		var err error
		page, err = f.s.List(ctx, req)
		return err
	}, nil)
	if err != nil {
		return store.ListPage{}, err
	}
	return page, nil
}
