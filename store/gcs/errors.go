package gcs

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/httptimeout"
	"github.com/commitptr/commitptr/store/internal/portable"
)

// putError classifies an error of an upload. Cloud Storage answers 404 to
// an upload into a missing bucket, and also to a chunk of a resumable
// upload whose session is gone, which the client's retry meets when the
// response to the last chunk was lost after the object was written. So a
// 404 is the bucket's only when a listing finds the bucket missing;
// otherwise the outcome is unknown.
func (s *bucket) putError(ctx context.Context, key string, err error) error {
	if ge, ok := errors.AsType[*googleapi.Error](err); !ok || ge.Code != http.StatusNotFound {
		return s.err("put", err)
	}
	_, lerr := s.List(ctx, store.ListRequest{Prefix: key, MaxKeys: 1})
	if errors.Is(lerr, store.ErrNoBucket) {
		return s.err("put", err)
	}
	return fmt.Errorf("HTTP 404, yet bucket %q at %s exists: the upload session is gone, and the object may have been written: %w", s.name, s.endpoint, err)
}

// err classifies an error of the client library in op
// (portable.Classify) and says what the library's message does not:
// the bucket for a missing bucket, the endpoint for a server that cannot be
// reached.
func (s *bucket) err(op string, err error) error {
	if err == nil {
		return nil
	}
	noBucket := func(err error) (error, error) {
		return store.ErrNoBucket, fmt.Errorf("bucket %q at %s: %w", s.name, s.endpoint, err)
	}
	switch {
	case errors.Is(err, storage.ErrBucketNotExist):
		return portable.Classify(noBucket(err))
	case errors.Is(err, storage.ErrObjectNotExist):
		return portable.Classify(store.ErrNotExist, err)
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
				return portable.Classify(noBucket(cause))
			}
			return portable.Classify(store.ErrNotExist, cause)
		case http.StatusPreconditionFailed:
			return portable.Classify(store.ErrPrecondition, cause)
		case http.StatusRequestedRangeNotSatisfiable:
			return portable.Classify(store.ErrInvalidRange, cause)
		case http.StatusConflict:
			return portable.Classify(store.ErrConflict, cause)
		case http.StatusUnauthorized, http.StatusForbidden:
			return portable.Classify(store.ErrAccess, cause)
		}
		return portable.Classify(nil, cause)
	}
	return portable.Classify(nil, httptimeout.Unanswered(err, "Cloud Storage", s.endpoint))
}
