package store

import (
	"errors"
	"fmt"
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
	// ErrNotEnforced: the store ignores conditional writes (see Probe).
	ErrNotEnforced = errors.New("store: conditional writes are not enforced")
)

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
