// Package httptimeout owns the limits on the HTTP requests of the network
// drivers (s3, minio, gcs and azblob), taken from a store.Timeouts: a
// connect timeout, a response-header timeout and an idle timeout that fails
// a connection on which no byte moves in either direction for that long. A
// transfer that keeps moving bytes is never cut, however long it takes.
package httptimeout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/commitptr/commitptr/store"
)

// Error is a request that ran into one of the limits.
type Error struct {
	Endpoint string        // scheme://host:port, or host:port
	Kind     string        // "connect", "response header" or "idle"
	Limit    time.Duration // the limit it ran into
	Err      error         // the error net/http or the connection reported
}

func (e *Error) Error() string {
	switch e.Kind {
	case kindConnect:
		return fmt.Sprintf("no connection to %s within %s (connect timeout)", e.Endpoint, e.Limit)
	case kindHeader:
		return fmt.Sprintf("%s sent no response within %s (response header timeout)", e.Endpoint, e.Limit)
	}
	return fmt.Sprintf("%s moved no data for %s (idle timeout)", e.Endpoint, e.Limit)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Timeout reports true, as net.Error timeouts do.
func (e *Error) Timeout() bool { return true }

// Temporary reports true: another attempt may succeed.
func (e *Error) Temporary() bool { return true }

const (
	kindConnect = "connect"
	kindHeader  = "response header"
	kindIdle    = "idle"
)

// Apply sets tr's dialer, TLS handshake timeout, response header timeout
// and idle connection timeout from t (zero fields are the defaults). tr
// must not be in use yet.
func Apply(tr *http.Transport, t store.Timeouts) {
	t = t.OrDefaults()
	d := &net.Dialer{Timeout: t.Connect, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			if isTimeout(err) && ctx.Err() == nil {
				return nil, &Error{Endpoint: addr, Kind: kindConnect, Limit: t.Connect, Err: err}
			}
			return nil, err
		}
		return &idleConn{Conn: c, addr: addr, idle: t.Idle}, nil
	}
	tr.TLSHandshakeTimeout = t.Connect
	tr.ResponseHeaderTimeout = t.Header
	// A pooled connection's pending read times out after Idle; the pool
	// must drop it first.
	if tr.IdleConnTimeout == 0 || tr.IdleConnTimeout > t.Idle/2 {
		tr.IdleConnTimeout = t.Idle / 2
	}
}

// RoundTripper wraps base so that a request that runs into the connect,
// TLS handshake or response header limit fails with an *Error naming the
// request's endpoint and the limit. Use it over a transport that Apply set
// up with the same t.
func RoundTripper(base http.RoundTripper, t store.Timeouts) http.RoundTripper {
	return roundTripper{base: base, t: t.OrDefaults()}
}

type roundTripper struct {
	base http.RoundTripper
	t    store.Timeouts
}

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := rt.base.RoundTrip(req)
	return resp, explain(req, err, rt.t, start)
}

// Doer is an HTTP client, as the AWS SDK takes one.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// Client wraps c as RoundTripper wraps a transport.
func Client(c Doer, t store.Timeouts) Doer { return client{c: c, t: t.OrDefaults()} }

type client struct {
	c Doer
	t store.Timeouts
}

func (c client) Do(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := c.c.Do(req)
	return resp, explain(req, err, c.t, start)
}

// explain turns a timeout of req, sent at start, into an *Error naming
// req's endpoint. A timeout that came sooner than the limit is not one of
// ours (a transport below may report its own) and is left alone.
func explain(req *http.Request, err error, t store.Timeouts, start time.Time) error {
	if err == nil || req.Context().Err() != nil || !isTimeout(err) {
		return err
	}
	endpoint := req.URL.Scheme + "://" + req.URL.Host
	if e, ok := errors.AsType[*Error](err); ok {
		e.Endpoint = endpoint
		return err
	}
	// net/http's timeout errors have unexported types; the TLS handshake
	// timeout says so in its message, every other one is the header timeout.
	kind, limit := kindHeader, t.Header
	if strings.Contains(err.Error(), "TLS handshake timeout") {
		kind, limit = kindConnect, t.Connect
	}
	if time.Since(start) < limit {
		return err
	}
	return &Error{Endpoint: endpoint, Kind: kind, Limit: limit, Err: err}
}

// idleConn is a connection whose every Read and Write first pushes both
// deadlines idle into the future: it fails only when no byte has moved in
// either direction for idle.
type idleConn struct {
	net.Conn
	addr string
	idle time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	return n, c.wrap(err)
}

func (c *idleConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(p)
	return n, c.wrap(err)
}

func (c *idleConn) wrap(err error) error {
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return &Error{Endpoint: c.addr, Kind: kindIdle, Limit: c.idle, Err: err}
	}
	return err
}

// isTimeout reports whether err is a timeout of the network or of net/http.
// The callers have ruled out their context's deadline.
func isTimeout(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}
