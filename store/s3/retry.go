package s3

import (
	"errors"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Attempts of one operation. A failure ends it after maxAttempts, the
// SDK's default (or AWS_MAX_ATTEMPTS), so that an endpoint that times out
// fails an operation after about three times the limit; a request that
// the service throttles may be sent throttleAttempts times, since the
// window of requests in flight shrinks meanwhile (package inflight).
const (
	maxAttempts      = retry.DefaultMaxAttempts
	throttleAttempts = 10
)

// maxBackoff caps the wait before an attempt, the SDK's default. (A
// variable for the tests, which count attempts without waiting minutes.)
var maxBackoff = retry.DefaultMaxBackoff

// newRetryer returns the SDK's standard retryer with those attempts and
// without its retry quota: the quota fails requests outright once a busy
// service has throttled a few hundred, where the window slows them down.
func newRetryer(attempts int) aws.RetryerV2 {
	if attempts <= 0 {
		attempts = maxAttempts
	}
	return retryer{
		RetryerV2: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = max(attempts, throttleAttempts)
			o.RateLimiter = ratelimit.None
			o.MaxBackoff = maxBackoff
		}),
		attempts: attempts,
	}
}

type retryer struct {
	aws.RetryerV2
	attempts int // for failures other than throttles
}

// RetryDelay ends the operation with err once a failure other than a
// throttle has had its attempts.
func (r retryer) RetryDelay(attempt int, err error) (time.Duration, error) {
	if attempt >= r.attempts && !throttle(err) {
		return 0, err
	}
	return r.RetryerV2.RetryDelay(attempt, err)
}

// throttle reports whether err is the service asking to slow down: one of
// the SDK's throttle codes (SlowDown among them), or a 503 or 429.
func throttle(err error) bool {
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary {
		return true
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		code := re.HTTPStatusCode()
		return code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests
	}
	return false
}
