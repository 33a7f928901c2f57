package portable

import (
	"context"
	"errors"

	"github.com/commitptr/commitptr/store"
)

// Deleted reads the outcome of a Delete of key from s whose service
// answered err, classified without the If-Match rule (so that a 404 is
// store.ErrNotExist). A missing key is deleted. Some services answer a
// conditional delete of a missing key with 412, so before it reports
// store.ErrPrecondition, Deleted asks s whether the key exists.
func Deleted(ctx context.Context, s store.Store, key, ifMatch string, err error) error {
	switch {
	case err == nil, errors.Is(err, store.ErrNotExist):
		return nil
	case errors.Is(err, store.ErrPrecondition) && ifMatch != "":
		if _, herr := s.Head(ctx, key); errors.Is(herr, store.ErrNotExist) {
			return nil
		}
	}
	return err
}
