package portable

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/commitptr/commitptr/store"
)

// Driver is what a service must do for a Bucket: one request, or the
// fewest the service allows, per call. Its errors are classified (see
// Classify) but name neither the operation nor the key: the Bucket does.
// An error that is already a *store.OpError is the driver's last word,
// passed on as it is.
type Driver interface {
	// Get opens the object; a missing key is store.ErrNotExist.
	Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error)
	// GetRange opens n bytes of the object from off (off >= 0, n >= 1),
	// fewer where it ends first. A range that starts at or past the end is
	// store.ErrInvalidRange; a missing key, store.ErrNotExist. Attrs.Size
	// is the whole object's.
	GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error)
	// Head returns the object's attributes; a missing key is
	// store.ErrNotExist.
	Head(ctx context.Context, key string) (store.Attrs, error)
	// Put writes a body that Bucket.Put checked and split (see Read):
	// body.Single in one request, or body.Parts as a multipart upload.
	Put(ctx context.Context, key string, body Body, opts store.PutOptions) (store.Attrs, error)
	// Delete removes the object, with If-Match when ifMatch is not empty.
	// A 404 is store.ErrNotExist, whatever the condition.
	Delete(ctx context.Context, key, ifMatch string) error
	// DeleteBatch removes at most store.MaxDeleteBatch keys. It returns
	// the keys that failed, each with its classified error (a missing key
	// is not one), or an error for the whole batch.
	DeleteBatch(ctx context.Context, keys []string) ([]KeyError, error)
	// List returns one page; req.MaxKeys is in [1, store.MaxListPage].
	List(ctx context.Context, req store.ListRequest) (store.ListPage, error)
}

// Versions is a Driver whose bucket may keep versions. Each Delete and
// DeleteMany of the Bucket goes through VersionedDelete, which on a bucket that
// keeps versions removes every version of the keys itself (naming its own
// errors), and otherwise runs plain, the Bucket's delete.
type Versions interface {
	VersionedDelete(ctx context.Context, op string, keys []string, ifMatch string, plain func() error) error
}

// Limits are a service's sizes.
type Limits struct {
	// MaxObject is the largest object the service stores.
	MaxObject int64
	// Part returns the largest body sent in one request, for a Put of
	// the declared size (0: unknown); a larger one goes in parts.
	Part func(size int64) int64
}

// KeyError is the failure of one key of a DeleteBatch.
type KeyError struct {
	Key string
	Err error
}

// Error is a classified failure of a Driver: its class, nil if none, and
// the service's cause.
type Error struct{ Class, Cause error }

func (e *Error) Error() string {
	switch {
	case e.Class == nil:
		return e.Cause.Error()
	case e.Cause == nil:
		return e.Class.Error()
	}
	return e.Class.Error() + ": " + e.Cause.Error()
}

func (e *Error) Unwrap() []error { return []error{e.Class, e.Cause} }

// Classify returns a Driver's error of class with cause, or nil when both
// are nil.
func Classify(class, cause error) error {
	if class == nil && cause == nil {
		return nil
	}
	return &Error{Class: class, Cause: cause}
}

// Bucket is the store.Store over a Driver. It holds the rules every
// service shares:
//   - a Put is checked and its body split before any request (Read);
//   - a GetRange of a range no service may be asked for is refused
//     before any request (CheckRange), and one from the object's end on
//     is store.ErrInvalidRange, however the service answers it;
//   - a Delete of a missing key succeeds, with or without IfMatch (Deleted);
//   - DeleteMany goes in batches of store.MaxDeleteBatch keys and names
//     every key not deleted, the first failure's class and cause;
//   - List asks for at most store.MaxListPage entries;
//   - every error names the operation and the key (store.Wrap), once.
type Bucket struct {
	d   Driver
	lim Limits
}

var _ store.Store = (*Bucket)(nil)

// New returns the Bucket over d.
func New(d Driver, lim Limits) *Bucket { return &Bucket{d: d, lim: lim} }

// Wrap names op and key in a Driver's error, unless it names them already
// (a *store.OpError).
func Wrap(op, key string, err error) error {
	switch e := err.(type) {
	case nil:
		return nil
	case *store.OpError:
		return e
	case *Error:
		return store.Wrap(op, key, e.Class, e.Cause)
	}
	return store.Wrap(op, key, nil, err)
}

// Get implements store.Store.
func (b *Bucket) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	r, a, err := b.d.Get(ctx, key)
	if err != nil {
		return nil, store.Attrs{}, Wrap("get", key, err)
	}
	return r, a, nil
}

// GetRange implements store.Store.
func (b *Bucket) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	if err := CheckRange(off, n); err != nil {
		return nil, store.Attrs{}, store.Wrap("get", key, nil, err)
	}
	// The range's last byte, off+n-1, must not overflow: a longer range
	// asks for the rest of the object all the same.
	n = min(n, math.MaxInt64-off)
	r, a, err := b.d.GetRange(ctx, key, off, n)
	if err != nil {
		return nil, store.Attrs{}, Wrap("get", key, err)
	}
	// A range from the object's end on is not satisfiable, also where
	// the service answers it with an empty body (Azurite does).
	if a.Size >= 0 && off >= a.Size {
		r.Close()
		return nil, store.Attrs{}, store.Wrap("get", key, store.ErrInvalidRange,
			fmt.Errorf("offset %d of an object of %d bytes", off, a.Size))
	}
	return r, a, nil
}

// Head implements store.Store.
func (b *Bucket) Head(ctx context.Context, key string) (store.Attrs, error) {
	a, err := b.d.Head(ctx, key)
	if err != nil {
		return store.Attrs{}, Wrap("head", key, err)
	}
	return a, nil
}

// Put implements store.Store.
func (b *Bucket) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	split, err := Read(body, opts, b.lim.Part(opts.Size), b.lim.MaxObject)
	if err != nil {
		return store.Attrs{}, store.Wrap("put", key, nil, err)
	}
	a, err := b.d.Put(ctx, key, split, opts)
	if err != nil {
		return store.Attrs{}, Wrap("put", key, err)
	}
	return a, nil
}

// Delete implements store.Store.
func (b *Bucket) Delete(ctx context.Context, key string, opts store.DeleteOptions) error {
	plain := func() error {
		err := b.d.Delete(ctx, key, opts.IfMatch)
		if _, named := err.(*store.OpError); !named {
			err = Deleted(ctx, b, key, opts.IfMatch, err)
		}
		return Wrap("delete", key, err)
	}
	if v, ok := b.d.(Versions); ok {
		return Wrap("delete", key, v.VersionedDelete(ctx, "delete", []string{key}, opts.IfMatch, plain))
	}
	return plain()
}

// DeleteMany implements store.Store.
func (b *Bucket) DeleteMany(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	plain := func() error { return b.deleteMany(ctx, keys) }
	if v, ok := b.d.(Versions); ok {
		return Wrap("delete-many", keys[0], v.VersionedDelete(ctx, "delete-many", keys, "", plain))
	}
	return plain()
}

// deleteMany deletes keys in batches, one after another, and names every
// key not deleted: those of the batches that failed, and those after a
// batch that failed as a whole.
func (b *Bucket) deleteMany(ctx context.Context, keys []string) error {
	var failed []string
	var first KeyError
	for start := 0; start < len(keys); start += store.MaxDeleteBatch {
		errs, err := b.d.DeleteBatch(ctx, keys[start:min(start+store.MaxDeleteBatch, len(keys))])
		if err != nil {
			rest := append(failed, keys[start:]...)
			class, cause := Split(err)
			return store.Wrap("delete-many", rest[0], class,
				fmt.Errorf("%d keys not deleted (%s): %w", len(rest), store.KeyList(rest), cause))
		}
		for _, e := range errs {
			if errors.Is(e.Err, store.ErrNotExist) {
				continue
			}
			if len(failed) == 0 {
				first = e
			}
			failed = append(failed, e.Key)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	class, cause := Split(first.Err)
	return store.Wrap("delete-many", failed[0], class,
		fmt.Errorf("%d keys not deleted (%s); the first failed with %q: %w", len(failed), store.KeyList(failed), first.Key, cause))
}

// Split returns a Driver's error's class and cause (Classify's arguments).
func Split(err error) (class, cause error) {
	if e, ok := err.(*Error); ok {
		return e.Class, e.Cause
	}
	return nil, err
}

// List implements store.Store.
func (b *Bucket) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	if req.MaxKeys <= 0 || req.MaxKeys > store.MaxListPage {
		req.MaxKeys = store.MaxListPage
	}
	page, err := b.d.List(ctx, req)
	if err != nil {
		return store.ListPage{}, Wrap("list", req.Prefix, err)
	}
	return page, nil
}
