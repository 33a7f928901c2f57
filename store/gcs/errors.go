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

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/httptimeout"
)

// classify wraps an error of the client library with the operation, the
// key and its store error class.
func (s *Store) classify(op, key string, err error) error {
	if err == nil {
		return nil
	}
	class, cause := s.sort(op, err)
	return store.Wrap(op, key, class, cause)
}

// putError classifies an error of an upload. Cloud Storage answers 404 to
// an upload into a missing bucket, and also to a chunk of a resumable
// upload whose session is gone, which the client's retry meets when the
// response to the last chunk was lost after the object was written. So a
// 404 is the bucket's only when a listing finds the bucket missing;
// otherwise the outcome is unknown.
func (s *Store) putError(ctx context.Context, key string, err error) error {
	if ge, ok := errors.AsType[*googleapi.Error](err); !ok || ge.Code != http.StatusNotFound {
		return s.classify("put", key, err)
	}
	_, lerr := s.List(ctx, store.ListRequest{Prefix: key, MaxKeys: 1})
	if errors.Is(lerr, store.ErrNoBucket) {
		return s.classify("put", key, err)
	}
	return store.Wrap("put", key, nil, fmt.Errorf("HTTP 404, yet bucket %q at %s exists: the upload session is gone, and the object may have been written: %w", s.name, s.endpoint, err))
}

// sort finds err's class and says what the library's message does not:
// the bucket for a missing bucket, the endpoint for a server that cannot be
// reached.
func (s *Store) sort(op string, err error) (class, cause error) {
	noBucket := func(err error) (error, error) {
		return store.ErrNoBucket, fmt.Errorf("bucket %q at %s: %w", s.name, s.endpoint, err)
	}
	switch {
	case errors.Is(err, storage.ErrBucketNotExist):
		return noBucket(err)
	case errors.Is(err, storage.ErrObjectNotExist):
		return store.ErrNotExist, err
	}
	if ge, ok := errors.AsType[*googleapi.Error](err); ok {
		cause := fmt.Errorf("HTTP %d: %w", ge.Code, err)
		switch ge.Code {
		case http.StatusNotFound:
			// An upload names no object that could be missing: Cloud
			// Storage answers a generation condition on a missing object
			// with 412. A 404 is the bucket's, or the upload session's,
			// which putError tells apart.
			if op == "put" {
				return noBucket(cause)
			}
			return store.ErrNotExist, cause
		case http.StatusPreconditionFailed:
			return store.ErrPrecondition, cause
		case http.StatusConflict:
			return store.ErrConflict, cause
		case http.StatusUnauthorized, http.StatusForbidden:
			return store.ErrAccess, cause
		}
		return nil, cause
	}
	if _, ok := errors.AsType[*httptimeout.Error](err); ok {
		return nil, err // it names the endpoint and the limit
	}
	if unreachable(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("cannot reach Cloud Storage endpoint %s: %w", s.endpoint, err)
	}
	return nil, err
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
