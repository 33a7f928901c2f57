package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
)

// ProbePrefix is where Probe writes its scratch objects.
const ProbePrefix = "_probe/"

// Probe proves that the store enforces conditional writes. It creates a
// scratch object, sends a create-if-absent that must lose, replaces the
// object by a compare-and-swap on its version token that must win, sends a
// compare-and-swap on the now stale first token that must lose, and
// removes the object again. A store that lets either losing write through
// gets an error matching ErrNotEnforced, naming the condition that was
// ignored; commitptr must not run on such a store.
//
// The stale token is one the store issued itself, never one made up: a
// version token is opaque (Attrs.ETag), and a driver may refuse a token
// of a form it never issues without asking the server, which would prove
// nothing. Drivers send every conditional write as one request (see
// MaxConditionalSize), so the small single writes of the probe cover every
// conditional path commitptr uses.
//
// A store that passes, but where the scratch object could not be removed,
// gets a *ProbeLeftover, which names it: nothing else removes it.
func Probe(ctx context.Context, s Store) (err error) {
	key := ProbePrefix + uuid.NewString()
	first, err := s.Put(ctx, key, strings.NewReader("probe 1"), PutOptions{IfNoneMatch: true})
	if err != nil {
		return fmt.Errorf("store: probe: %w", err)
	}
	defer func() {
		derr := s.Delete(context.WithoutCancel(ctx), key, DeleteOptions{})
		if err == nil && derr != nil {
			err = &ProbeLeftover{Key: key, Err: derr}
		}
	}()

	_, err = s.Put(ctx, key, strings.NewReader("probe 2"), PutOptions{IfNoneMatch: true})
	switch {
	case err == nil:
		return fmt.Errorf("store: probe %q: a create with If-None-Match: * replaced an existing object: %w", key, ErrNotEnforced)
	case !errors.Is(err, ErrPrecondition) && !errors.Is(err, ErrConflict):
		return fmt.Errorf("store: probe: %w", err)
	}

	second, err := s.Put(ctx, key, strings.NewReader("probe 3"), PutOptions{IfMatch: first.ETag})
	if err != nil {
		return fmt.Errorf("store: probe %q: a compare-and-swap on the current version token %q failed: %w", key, first.ETag, err)
	}
	if second.ETag == first.ETag {
		return fmt.Errorf("store: probe %q: a write left the version token %q unchanged, so a compare-and-swap cannot tell the versions apart: %w", key, first.ETag, ErrNotEnforced)
	}
	_, err = s.Put(ctx, key, strings.NewReader("probe 4"), PutOptions{IfMatch: first.ETag})
	switch {
	case err == nil:
		return fmt.Errorf("store: probe %q: a write with a stale If-Match version token succeeded: %w", key, ErrNotEnforced)
	case !errors.Is(err, ErrPrecondition) && !errors.Is(err, ErrConflict):
		return fmt.Errorf("store: probe: %w", err)
	}
	return nil
}

// ProbeLeftover is what Probe returns for a store that enforces
// conditional writes, when it could not remove its scratch object.
type ProbeLeftover struct {
	Key string // the scratch object, relative to the store
	Err error  // why it could not be removed
}

func (e *ProbeLeftover) Error() string {
	return fmt.Sprintf("store: probe: conditional writes are enforced, but the scratch object %q is left: %v", e.Key, e.Err)
}

func (e *ProbeLeftover) Unwrap() error { return e.Err }
