package minio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"github.com/minio/minio-go/v7"

	"github.com/commitptr/commitptr/store"
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
		class = classOf(er.Code, er.StatusCode, ifMatch)
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
	if unreachable(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("cannot reach S3 endpoint %s: %w", s.endpoint, err)
	}
	return nil, err
}

// classOf is the driver's one classifier: it maps an S3 error code and HTTP
// status to a store error class, or nil. The code wins when it is known; the
// status covers responses without a body (HEAD, for which minio-go makes up
// a code) and servers with unusual codes.
func classOf(code string, status int, ifMatch bool) error {
	notExist := store.ErrNotExist
	if ifMatch {
		notExist = store.ErrPrecondition // S3 answers If-Match on a missing key with 404
	}
	switch code {
	case minio.NoSuchUpload:
		return nil // the multipart upload vanished: not the object's state
	case minio.NoSuchKey, "NotFound":
		return notExist
	case minio.PreconditionFailed:
		return store.ErrPrecondition
	case "ConditionalRequestConflict":
		return store.ErrConflict
	case minio.NoSuchBucket:
		return store.ErrNoBucket
	case minio.AccessDenied, minio.InvalidAccessKeyID, minio.SignatureDoesNotMatch,
		"InvalidToken", "ExpiredToken", "TokenRefreshRequired", "AllAccessDisabled", "AccountProblem",
		"XAdminUserNotFound": // versitygw's 404 for an unknown access key

		return store.ErrAccess
	}
	switch status {
	case http.StatusNotFound:
		return notExist
	case http.StatusPreconditionFailed:
		return store.ErrPrecondition
	case http.StatusConflict:
		// Only ConditionalRequestConflict (matched above) is retryable;
		// other 409s, such as a key that is a directory on a POSIX-backed
		// server, are not. A 409 without a code (HEAD) is taken as the
		// retryable kind.
		if code == "" {
			return store.ErrConflict
		}
		return nil
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
