package s3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/httptimeout"
	"github.com/commitptr/commitptr/store/internal/portable"
)

// err classifies an SDK error (portable.Classify) and adds what the SDK
// message lacks: the bucket for a missing bucket, the endpoint for a
// server that cannot be reached. ifMatch says whether the request carried
// If-Match, which turns a 404 into store.ErrPrecondition.
func (s *bucket) err(ifMatch bool, err error) error {
	if err == nil {
		return nil
	}
	var code string
	if ae, ok := errors.AsType[smithy.APIError](err); ok {
		code = ae.ErrorCode()
	}
	status := 0
	if re, ok := errors.AsType[*smithyhttp.ResponseError](err); ok && re.Response != nil && re.Response.Response != nil {
		status = re.Response.StatusCode
	}
	class := store.ClassOfS3(code, status, ifMatch)
	switch {
	case class == store.ErrNoBucket:
		err = fmt.Errorf("bucket %q at %s: %w", s.bucket, s.endpoint, err)
	case class == nil && noCredentials(err):
		class, err = store.ErrAccess, &credentialsError{err}
	case class == nil && status == 0 && !timedOut(err) && unreachable(err) && !errors.Is(err, context.Canceled):
		// A timeout names the endpoint and the limit already.
		err = fmt.Errorf("cannot reach S3 endpoint %s: %w", s.endpoint, err)
	}
	return portable.Classify(class, err)
}

// noCredentials reports whether the SDK found no credentials to sign the
// request with. The SDK says so only in its message.
func noCredentials(err error) bool {
	return strings.Contains(err.Error(), "get identity: get credentials:")
}

// credentialsError says that no credentials were found, without the SDK's
// account of every source it tried (which Unwrap keeps).
type credentialsError struct{ err error }

func (e *credentialsError) Error() string {
	return "no AWS credentials found (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile of the shared config, web identity, or an instance role)"
}

func (e *credentialsError) Unwrap() error { return e.err }

// timedOut reports whether a request ran into one of the store.Timeouts.
func timedOut(err error) bool {
	_, ok := errors.AsType[*httptimeout.Error](err)
	return ok
}

// unreachable reports whether err is a failure to connect or to resolve the
// server's name.
func unreachable(err error) bool {
	if _, ok := errors.AsType[*smithyhttp.RequestSendError](err); ok {
		return true
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true
	}
	_, ok := errors.AsType[*net.DNSError](err)
	return ok
}
