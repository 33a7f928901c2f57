package store

import (
	"cmp"
	"fmt"
	"time"
)

// The default request timeouts of the S3 drivers. They follow the AWS CLI
// (botocore: 60 s to connect, 60 s for a read to make progress) and rclone
// (--contimeout 1m, --timeout 5m of I/O idleness, also used as its response
// header timeout), tightened for batch jobs that should fail rather than
// wait: a healthy endpoint connects in well under a second and starts
// answering within seconds, and a transfer that moves bytes is never cut.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultHeaderTimeout  = 30 * time.Second
	DefaultIdleTimeout    = 60 * time.Second
)

// Timeouts bound each HTTP request a network store sends. None of them
// limits how long a request may take while bytes flow. A zero field means
// the default. A request that runs into a limit fails with an error naming
// the endpoint and the limit; the drivers retry it like any network error
// (3 attempts in all), so an endpoint that never answers ends an operation
// after at most about 3 times the limit plus the back-off between attempts.
type Timeouts struct {
	// Connect bounds the TCP connect and the TLS handshake.
	Connect time.Duration
	// Header bounds the wait for the response headers once the request
	// has been sent.
	Header time.Duration
	// Idle bounds the time a connection may move no byte in either
	// direction while a request uses it: a stalled upload or a response
	// body that stops arriving.
	Idle time.Duration
}

// OrDefaults returns t with zero fields set to the defaults.
func (t Timeouts) OrDefaults() Timeouts {
	return Timeouts{
		Connect: cmp.Or(t.Connect, DefaultConnectTimeout),
		Header:  cmp.Or(t.Header, DefaultHeaderTimeout),
		Idle:    cmp.Or(t.Idle, DefaultIdleTimeout),
	}
}

// parseTimeout reads a URL query parameter's duration; "" is zero.
func parseTimeout(name, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q is not a positive duration such as 30s", name, v)
	}
	return d, nil
}
