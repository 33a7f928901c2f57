package gcs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/commitptr/commitptr/internal/httptimeout"
	"github.com/commitptr/commitptr/store"
)

// classify wraps an error of the client library with the operation, the
// key and its store error class. ifMatch says whether the request was
// conditioned on a generation, which turns a missing object into
// store.ErrPrecondition.
func (s *Store) classify(op, key string, ifMatch bool, err error) error {
	if err == nil {
		return nil
	}
	class, cause := s.sort(err, ifMatch)
	return store.Wrap(op, key, class, cause)
}

// sort finds err's class and says what the library's message does not:
// the bucket for a missing bucket, the endpoint for a server that cannot be
// reached.
func (s *Store) sort(err error, ifMatch bool) (class, cause error) {
	notExist := store.ErrNotExist
	if ifMatch {
		notExist = store.ErrPrecondition
	}
	switch {
	case errors.Is(err, storage.ErrBucketNotExist):
		return store.ErrNoBucket, fmt.Errorf("bucket %q at %s: %w", s.name, s.endpoint, err)
	case errors.Is(err, storage.ErrObjectNotExist):
		return notExist, err
	}
	if ge, ok := errors.AsType[*googleapi.Error](err); ok {
		return classOf(ge, ifMatch), fmt.Errorf("HTTP %d: %w", ge.Code, err)
	}
	if _, ok := errors.AsType[*httptimeout.Error](err); ok {
		return nil, err // it names the endpoint and the limit
	}
	if unreachable(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("cannot reach Cloud Storage endpoint %s: %w", s.endpoint, err)
	}
	return nil, err
}

// classOf maps a JSON API error to a class. A 404 of a write or a listing
// is the bucket's unless the write was conditioned on a generation (the
// object is gone: a failed precondition).
func classOf(ge *googleapi.Error, ifMatch bool) error {
	switch ge.Code {
	case http.StatusNotFound:
		if ifMatch {
			return store.ErrPrecondition
		}
		return store.ErrNotExist
	case http.StatusPreconditionFailed:
		return store.ErrPrecondition
	case http.StatusConflict:
		return store.ErrConflict
	case http.StatusUnauthorized, http.StatusForbidden:
		return store.ErrAccess
	}
	return nil
}

// unreachable reports whether err is a failure to connect to the server or
// to resolve its name.
func unreachable(err error) bool {
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true
	}
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return true
	}
	_, ok := errors.AsType[*url.Error](err)
	return ok
}
