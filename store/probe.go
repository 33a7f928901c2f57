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
// scratch object, then sends a create-if-absent and a compare-and-swap that
// must both lose, and removes the object again. A store that lets either
// through gets an error matching ErrNotEnforced, naming the condition that
// was ignored; commitptr must not run on such a store. Drivers send every
// conditional write as one request (see MaxConditionalSize), so the small
// single PUTs of the probe cover every conditional path commitptr uses.
func Probe(ctx context.Context, s Store) error {
	key := ProbePrefix + uuid.NewString()
	first, err := s.Put(ctx, key, strings.NewReader("probe 1"), PutOptions{IfNoneMatch: true})
	if err != nil {
		return fmt.Errorf("store: probe: %w", err)
	}
	defer s.Delete(context.WithoutCancel(ctx), key, DeleteOptions{}) //nolint:errcheck // best effort

	_, err = s.Put(ctx, key, strings.NewReader("probe 2"), PutOptions{IfNoneMatch: true})
	switch {
	case err == nil:
		return fmt.Errorf("store: probe %q: a create with If-None-Match: * replaced an existing object: %w", key, ErrNotEnforced)
	case !errors.Is(err, ErrPrecondition) && !errors.Is(err, ErrConflict):
		return fmt.Errorf("store: probe: %w", err)
	}

	stale := "0" + first.ETag // any ETag that is not the current one
	_, err = s.Put(ctx, key, strings.NewReader("probe 3"), PutOptions{IfMatch: stale})
	switch {
	case err == nil:
		return fmt.Errorf("store: probe %q: a write with a stale If-Match ETag succeeded: %w", key, ErrNotEnforced)
	case !errors.Is(err, ErrPrecondition) && !errors.Is(err, ErrConflict):
		return fmt.Errorf("store: probe: %w", err)
	}
	return nil
}
