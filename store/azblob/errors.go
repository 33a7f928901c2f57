package azblob

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/httptimeout"
	"github.com/commitptr/commitptr/store/internal/portable"
)

// err classifies an SDK error (portable.Classify) and adds what the SDK
// message lacks: the container for a missing one, the endpoint for a
// service that cannot be reached. ifMatch says whether the request carried
// If-Match, which turns a missing blob into store.ErrPrecondition.
func (s *bucket) err(ifMatch bool, err error) error {
	if err == nil {
		return nil
	}
	code, status := "", 0
	if re, ok := errors.AsType[*azcore.ResponseError](err); ok {
		code, status = re.ErrorCode, re.StatusCode
		// The SDK's message is many lines with the request's URL and the
		// response body; the operation and key are named by store.Wrap.
		err = &responseError{re}
	}
	class := classOf(bloberror.Code(code), status, ifMatch)
	switch {
	case class == store.ErrNoBucket:
		err = fmt.Errorf("container %q at %s: %w", s.container, s.endpoint, err)
	case class == nil && credentialFailed(err):
		class = store.ErrAccess
	case class == nil && status == 0:
		err = httptimeout.Unanswered(err, "Azure Blob", s.endpoint)
	}
	return portable.Classify(class, err)
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
	case http.StatusRequestedRangeNotSatisfiable:
		return store.ErrInvalidRange
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
