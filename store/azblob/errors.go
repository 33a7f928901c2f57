package azblob

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/httptimeout"
)

// classify wraps an SDK error with the operation, the key and its store
// error class. ifMatch says whether the request carried If-Match, which
// turns a missing blob into store.ErrPrecondition.
func (s *Store) classify(op, key string, ifMatch bool, err error) error {
	if err == nil {
		return nil
	}
	class, cause := s.sort(err, ifMatch)
	return store.Wrap(op, key, class, cause)
}

// sort finds err's class and adds what the SDK message lacks: the container
// for a missing one, the endpoint for a service that cannot be reached.
func (s *Store) sort(err error, ifMatch bool) (class, cause error) {
	code, status := "", 0
	if re, ok := errors.AsType[*azcore.ResponseError](err); ok {
		code, status = re.ErrorCode, re.StatusCode
		// The SDK's message is many lines with the request's URL and the
		// response body; the operation and key are named by store.Wrap.
		err = &responseError{re}
	}
	class = classOf(bloberror.Code(code), status, ifMatch)
	switch {
	case class == store.ErrNoBucket:
		return class, fmt.Errorf("container %q at %s: %w", s.container, s.endpoint, err)
	case class == nil && credentialFailed(err):
		return store.ErrAccess, err
	case class == nil && timedOut(err):
		return nil, err // it names the endpoint and the limit
	case class == nil && status == 0 && unreachable(err) && !errors.Is(err, context.Canceled):
		return nil, fmt.Errorf("cannot reach Azure Blob endpoint %s: %w", s.endpoint, err)
	}
	return class, err
}

// classOf maps an Azure error code and HTTP status (0 if unknown) to an
// error class, or nil. The code wins when it is known; the status covers
// responses without a body (HEAD, which is Get Blob Properties).
//
// Azure answers a failed If-None-Match: * on Put Blob with 409
// BlobAlreadyExists, and a failed If-Match with 412 ConditionNotMet, or
// 404 BlobNotFound when the blob is missing: all three are a failed
// precondition. Azure has no 409 for "a concurrent conditional write is in
// progress"; the other 409s (a lease on the blob, a container being
// deleted) are not retryable and keep no class.
func classOf(code bloberror.Code, status int, ifMatch bool) error {
	notExist := store.ErrNotExist
	if ifMatch {
		notExist = store.ErrPrecondition
	}
	switch code {
	case bloberror.BlobNotFound:
		return notExist
	case bloberror.ConditionNotMet, bloberror.BlobAlreadyExists, bloberror.TargetConditionNotMet:
		return store.ErrPrecondition
	case bloberror.ContainerNotFound, bloberror.ContainerBeingDeleted:
		return store.ErrNoBucket
	case bloberror.AuthenticationFailed, bloberror.AuthorizationFailure,
		bloberror.AuthorizationPermissionMismatch, bloberror.AuthorizationProtocolMismatch,
		bloberror.AuthorizationResourceTypeMismatch, bloberror.AuthorizationServiceMismatch,
		bloberror.AuthorizationSourceIPMismatch, bloberror.InsufficientAccountPermissions,
		bloberror.AccountIsDisabled, bloberror.NoAuthenticationInformation:
		return store.ErrAccess
	case bloberror.InvalidResourceName, bloberror.InvalidURI:
		return store.ErrInvalidKey
	}
	switch status {
	case http.StatusNotFound:
		return notExist
	case http.StatusPreconditionFailed:
		return store.ErrPrecondition
	case http.StatusUnauthorized, http.StatusForbidden:
		return store.ErrAccess
	}
	return nil
}

// responseError is an error response of the service, told in one line.
type responseError struct{ re *azcore.ResponseError }

func (e *responseError) Error() string {
	msg := fmt.Sprintf("Azure Blob answered %d", e.re.StatusCode)
	if e.re.ErrorCode != "" {
		msg += " " + e.re.ErrorCode
	}
	return msg
}

func (e *responseError) Unwrap() error { return e.re }

// credentialFailed reports whether azidentity could not get a token.
func credentialFailed(err error) bool {
	if _, ok := errors.AsType[*azidentity.AuthenticationFailedError](err); ok {
		return true
	}
	_, ok := errors.AsType[*azidentity.AuthenticationRequiredError](err)
	return ok
}

// timedOut reports whether a request ran into one of the store.Timeouts.
func timedOut(err error) bool {
	_, ok := errors.AsType[*httptimeout.Error](err)
	return ok
}

// unreachable reports whether err is a failure to connect or to resolve
// the service's name.
func unreachable(err error) bool {
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true
	}
	_, ok := errors.AsType[*net.DNSError](err)
	return ok
}
