package azblob

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// Attempts of one operation, as the S3 drivers make: a failure ends it
// after maxAttempts, so that an endpoint that times out fails an operation
// after about three times the limit; a request the service throttles (429,
// or 503 ServerBusy) may be sent throttleAttempts times, since the window
// of requests in flight shrinks meanwhile (package inflight).
const (
	maxAttempts      = 3
	throttleAttempts = 10
)

// The waits between attempts: the first, and the most. (Variables for the
// tests, which count attempts without waiting.)
var (
	retryDelay    = 200 * time.Millisecond
	maxRetryDelay = 5 * time.Second
)

// retryOptions is the SDK's retry policy with those attempts. The SDK
// counts one number of attempts for every failure, so the policy allows
// throttleAttempts and shouldRetry ends other failures sooner, reading
// the operation's count that attemptCounter keeps.
func retryOptions() policy.RetryOptions {
	return policy.RetryOptions{
		MaxRetries:    throttleAttempts - 1,
		RetryDelay:    retryDelay,
		MaxRetryDelay: maxRetryDelay,
		ShouldRetry:   shouldRetry,
	}
}

type attemptsKey struct{}

// operationAttempts is a per-call policy: it gives the operation a count of
// its attempts, in the context that each attempt's request inherits.
type operationAttempts struct{}

func (operationAttempts) Do(req *policy.Request) (*http.Response, error) {
	ctx := context.WithValue(req.Raw().Context(), attemptsKey{}, new(atomic.Int32))
	return req.WithContext(ctx).Next()
}

// attemptCounter is a per-retry policy: it counts each attempt, marks an
// error without a response with the attempt's number, and makes sure a
// response names its request, whose context holds the count, for
// shouldRetry.
type attemptCounter struct{}

func (attemptCounter) Do(req *policy.Request) (*http.Response, error) {
	var sent int32
	if n, ok := req.Raw().Context().Value(attemptsKey{}).(*atomic.Int32); ok {
		sent = n.Add(1)
	}
	resp, err := req.Next()
	if err != nil {
		return resp, &attemptError{sent: sent, err: err}
	}
	if resp.Request == nil {
		resp.Request = req.Raw()
	}
	return resp, nil
}

// attemptError is the error of attempt number sent; it reads as err.
type attemptError struct {
	sent int32
	err  error
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// shouldRetry says whether an attempt that ended with resp or err is sent
// again: a throttle until it has had throttleAttempts, a timeout, a lost
// connection, a 408 or a 5xx other than 503 until maxAttempts. The SDK has
// already ended the operation if its context is done.
func shouldRetry(resp *http.Response, err error) bool {
	if err != nil {
		var ae *attemptError
		return errors.As(err, &ae) && ae.sent < maxAttempts
	}
	var sent int32
	if n, ok := resp.Request.Context().Value(attemptsKey{}).(*atomic.Int32); ok {
		sent = n.Load()
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return sent < throttleAttempts
	case http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusBadGateway, http.StatusGatewayTimeout:
		return sent < maxAttempts
	}
	return false
}
