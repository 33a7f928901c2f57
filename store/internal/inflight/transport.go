package inflight

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/httptimeout"
)

// Client wraps c so that every request but an Urgent one waits for a slot
// of l before it is sent and gives it back when its response header
// arrives (or it fails). A response body is read outside the slot: a reader that holds a body
// open holds no place in the window. Wrap a client whose timeouts
// httptimeout set up, so that a header timeout reads as a throttle.
func Client(c httptimeout.Doer, l *Limiter) httptimeout.Doer { return client{c, l} }

type client struct {
	c httptimeout.Doer
	l *Limiter
}

func (c client) Do(req *http.Request) (*http.Response, error) { return send(req, c.l, c.c.Do) }

// RoundTripper wraps a transport as Client wraps a client.
func RoundTripper(rt http.RoundTripper, l *Limiter) http.RoundTripper {
	return roundTripper{rt, l}
}

type roundTripper struct {
	rt http.RoundTripper
	l  *Limiter
}

func (t roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	return send(req, t.l, t.rt.RoundTrip)
}

// send sends req with next: at once if it is Urgent, else in a slot of l,
// which the outcome then ends.
func send(req *http.Request, l *Limiter, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	if Urgent(req) {
		return next(req)
	}
	s, err := l.Acquire(req.Context())
	if err != nil {
		closeBody(req)
		return nil, err
	}
	var t timing
	resp, err := next(t.trace(req))
	kind := Write
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		kind = Read
	}
	s.Done(Outcome{Signal: Classify(req, resp, err), Kind: kind, Latency: t.latency()})
	return resp, err
}

// timing measures a request's latency: from its last byte written to the
// first byte of its answer, the service's time and one round trip, without
// the time to connect or to send a body.
type timing struct {
	mu          sync.Mutex
	wrote, read time.Time
}

// trace returns req with hooks that record the two times.
func (t *timing) trace(req *http.Request) *http.Request {
	mark := func(at *time.Time) {
		t.mu.Lock()
		defer t.mu.Unlock()
		*at = time.Now()
	}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteRequest:         func(httptrace.WroteRequestInfo) { mark(&t.wrote) },
		GotFirstResponseByte: func() { mark(&t.read) },
	}))
}

// latency returns the latency measured: 0 if a time is missing (a
// transport that calls no hooks), less than 0 if the answer began before
// the request ended (100 Continue); the window takes both as not known.
func (t *timing) latency() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.wrote.IsZero() || t.read.IsZero() {
		return 0
	}
	return t.read.Sub(t.wrote)
}

// Urgent reports whether req goes out at once, outside the window: a
// request made with store.Urgent (a pointer's, a lease's, a pin's
// renewal), or one that starts, completes or aborts a multipart upload
// (S3's ?uploads and ?uploadId without a part number, Azure's block
// list): few, small, and bound by time, as an abort must land before its
// upload can be forgotten.
func Urgent(req *http.Request) bool {
	if store.IsUrgent(req.Context()) {
		return true
	}
	q := req.URL.Query()
	return q.Has("uploads") || (q.Has("uploadId") && !q.Has("partNumber")) || q.Get("comp") == "blocklist"
}

// closeBody closes the body of a request that is not sent, as
// http.RoundTripper and http.Client.Do do.
func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close() //nolint:errcheck // nothing was sent; the error says nothing
	}
}

// Classify says what the outcome of req says about the service's load:
// 503 (S3's SlowDown, Azure's ServerBusy, Cloud Storage's backoff) and 429
// are throttles, and so is a timeout of the connection or of the response
// header that is not the caller's own deadline; any other response is an
// answer; anything else, a cancelled request or a refused connection, is
// unknown.
func Classify(req *http.Request, resp *http.Response, err error) Signal {
	if err != nil {
		if req.Context().Err() != nil {
			return Unknown
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return Throttled
		}
		return Unknown
	}
	switch resp.StatusCode {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		return Throttled
	}
	return Answered
}
