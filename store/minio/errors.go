package minio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/minio/minio-go/v7"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/httptimeout"
)

// classify wraps a minio-go error with the operation, the key and its store
// error class. ifMatch says whether the request carried If-Match, which
// turns a 404 into store.ErrPrecondition.
func (s *Store) classify(op, key string, ifMatch bool, err error) error {
	if err == nil {
		return nil
	}
	class, cause := s.sort(err, ifMatch)
	return store.Wrap(op, key, class, cause)
}

// sort finds err's class and rewrites the cause so that the message says
// what minio-go's does not: the S3 error code and HTTP status, the bucket
// for a missing bucket, the endpoint for a server that cannot be reached.
func (s *Store) sort(err error, ifMatch bool) (class, cause error) {
	// A server's answer has a status; a per-key error of a multi-object
	// DELETE has only a code.
	if er, ok := errors.AsType[minio.ErrorResponse](err); ok && (er.StatusCode != 0 || er.Code != "") {
		class = store.ClassOfS3(er.Code, er.StatusCode, ifMatch)
		// ErrorResponse.Error is only the message; add the code and status.
		if er.StatusCode != 0 {
			cause = fmt.Errorf("%s (HTTP %d): %w", er.Code, er.StatusCode, err)
		} else {
			cause = fmt.Errorf("%s: %w", er.Code, err)
		}
		if class == store.ErrNoBucket {
			cause = fmt.Errorf("bucket %q at %s: %w", s.bucket, s.endpoint, cause)
		}
		return class, cause
	}
	if _, ok := errors.AsType[*httptimeout.Error](err); ok {
		return nil, err // it names the endpoint and the limit
	}
	if unreachable(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("cannot reach S3 endpoint %s: %w", s.endpoint, err)
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
