package gcs

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// The Go client for Cloud Storage returns no response headers: neither the
// Date that Attrs.ServerTime must come from, nor the user metadata of a
// download. Both are read in the HTTP transport instead: an operation puts
// an *exchange in its context, and transport records the headers of every
// response to a request with that context in it. The client passes the
// caller's context down to each HTTP request it sends, including those of
// an upload, which run in a goroutine of its own until Writer.Close
// returns; every operation has its own exchange, so concurrent operations
// never see each other's headers.

type exchangeKey struct{}

// exchange holds the headers of the latest response of one operation.
type exchange struct {
	mu      sync.Mutex
	resp    http.Header
	bodyErr error // the first failed read of a response body
}

// bodyError returns the first error a read of a response body met, or nil.
func (x *exchange) bodyError() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.bodyErr
}

// withExchange returns a context carrying a new exchange.
func withExchange(ctx context.Context) (context.Context, *exchange) {
	x := new(exchange)
	return context.WithValue(ctx, exchangeKey{}, x), x
}

// header returns the headers of the latest response, or nil.
func (x *exchange) header() http.Header {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.resp
}

// serverTime returns the Date of the latest response, or the zero time if
// it had none: the local clock is not the store's.
func (x *exchange) serverTime() time.Time {
	if t, err := http.ParseTime(x.header().Get("Date")); err == nil {
		return t
	}
	return time.Time{}
}

// transport records response headers, and the first failed read of a
// response body, in the request's exchange.
type transport struct{ base http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil {
		if x, ok := req.Context().Value(exchangeKey{}).(*exchange); ok {
			x.mu.Lock()
			x.resp = resp.Header
			x.mu.Unlock()
			resp.Body = &body{ReadCloser: resp.Body, x: x}
		}
	}
	return resp, err
}

// body records the first read error of a response body in its exchange.
type body struct {
	io.ReadCloser
	x *exchange
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.x.mu.Lock()
		if b.x.bodyErr == nil {
			b.x.bodyErr = err
		}
		b.x.mu.Unlock()
	}
	return n, err
}
