package store

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The error classes. Drivers wrap them so that errors.Is works and the
// message still names the operation and the key.
var (
	// ErrNotExist: the key does not exist.
	ErrNotExist = errors.New("store: object does not exist")
	// ErrPrecondition: an If-Match or If-None-Match condition failed (HTTP
	// 412, or 404 for If-Match on a missing key).
	ErrPrecondition = errors.New("store: precondition failed")
	// ErrConflict: a concurrent conditional write is in progress on the
	// key (S3 409 ConditionalRequestConflict). Retry it.
	ErrConflict = errors.New("store: conflicting conditional write")
	// ErrNoBucket: the bucket or root directory does not exist.
	ErrNoBucket = errors.New("store: bucket does not exist")
	// ErrAccess: credentials are missing, wrong or not allowed.
	ErrAccess = errors.New("store: access denied")
	// ErrInvalidKey: the key cannot be stored by this driver (empty, or a
	// form the driver refuses, such as a ".." segment on the fs driver).
	ErrInvalidKey = errors.New("store: invalid key")
	// ErrInvalidRange: a GetRange starts at or past the object's end
	// (HTTP 416).
	ErrInvalidRange = errors.New("store: range not satisfiable")
	// ErrNotEnforced: the store ignores conditional writes (see Probe).
	ErrNotEnforced = errors.New("store: conditional writes are not enforced")
	// ErrNoServerTime: a response carried no Date header, so the store's
	// clock is unknown (Attrs.ServerTime is zero). An operation that judges
	// an age by the store's clock refuses with it rather than judge by the
	// local one; see CheckServerTime.
	ErrNoServerTime = errors.New("store: no Date header in the response")
)

// CheckServerTime returns nil if serverTime, the store's clock from the
// response to op on key, is known. Otherwise it returns an error matching
// ErrNoServerTime that names the request and what cannot be judged, e.g.
//
//	store: no Date header in the response to GET "_lease/gc": cannot judge the lease's age
//
// Every age judged by the store's clock (lease expiry, pin TTLs, the
// collector's grace and orphan age, a commit's staging start) goes through
// it: a driver never stands in the local clock for a missing Date.
func CheckServerTime(serverTime time.Time, op Op, key, judge string) error {
	if !serverTime.IsZero() {
		return nil
	}
	return fmt.Errorf("%w to %s %q: cannot judge %s", ErrNoServerTime, strings.ToUpper(op.String()), key, judge)
}

// OpError records a failed operation with its key.
type OpError struct {
	Op  string // "get", "head", "put", "delete", "delete-many", "list"
	Key string // the key, or the prefix for list
	Err error
}

func (e *OpError) Error() string { return fmt.Sprintf("%s %q: %v", e.Op, e.Key, e.Err) }

// Unwrap returns the underlying error.
func (e *OpError) Unwrap() error { return e.Err }

// Wrap returns err wrapped with the operation and key, or nil if err is nil.
// A class error (ErrNotExist, ...) is joined with cause so that both
// errors.Is(err, class) and the driver's detail survive; class may be nil.
func Wrap(op, key string, class, cause error) error {
	if class == nil && cause == nil {
		return nil
	}
	var err error
	switch {
	case class == nil:
		err = cause
	case cause == nil || cause == class:
		err = class
	default:
		err = &classError{class: class, cause: cause}
	}
	return &OpError{Op: op, Key: key, Err: err}
}

type classError struct{ class, cause error }

func (e *classError) Error() string   { return e.class.Error() + ": " + e.cause.Error() }
func (e *classError) Unwrap() []error { return []error{e.class, e.cause} }
