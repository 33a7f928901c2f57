package minio

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// minio-go neither returns the response headers of every call (Put and Head
// lose the Date header) nor lets a caller add headers to a DELETE. Both go
// through the HTTP transport instead: an operation puts an *exchange in the
// request context, and transport adds the exchange's headers to the request
// and records the response headers in it. minio-go passes the caller's
// context down to every HTTP request it sends.

type exchangeKey struct{}

// exchange is the per-operation state shared with transport.
type exchange struct {
	// method and add are fixed before the operation starts: headers to add
	// to every request with that method.
	method string
	add    http.Header

	mu   sync.Mutex
	resp http.Header // headers of the latest response
	sent int64       // requests sent, retries included
}

// requests returns how many requests the operation has sent so far.
func (x *exchange) requests() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.sent
}

// withExchange returns a context carrying a new exchange. add, if not empty,
// is set on each request of the given method; minio-go has signed the
// request by then, so these headers travel unsigned, which S3 allows for
// headers outside x-amz-*.
func withExchange(ctx context.Context, method string, add http.Header) (context.Context, *exchange) {
	x := &exchange{method: method, add: add}
	return context.WithValue(ctx, exchangeKey{}, x), x
}

// header returns the headers of the latest response, or nil.
func (x *exchange) header() http.Header {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.resp
}

// serverTime returns the Date header of the latest response, or the zero
// time if there is none.
func (x *exchange) serverTime() time.Time {
	return serverTime(x.header())
}

// serverTime parses h's Date header. Without one it returns the zero time:
// the local clock is not the store's.
func serverTime(h http.Header) time.Time {
	if t, err := http.ParseTime(h.Get("Date")); err == nil {
		return t
	}
	return time.Time{}
}

// transport wraps the RoundTripper that minio-go uses.
type transport struct{ base http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	x, _ := req.Context().Value(exchangeKey{}).(*exchange)
	extra := x != nil && len(x.add) > 0 && req.Method == x.method
	var body *detachable
	if req.Body != nil && req.Body != http.NoBody {
		req = req.Clone(req.Context())
		body = &detachable{r: req.Body}
		req.Body, req.GetBody = body, nil
	}
	if extra || (req.Method == http.MethodGet && req.Header.Get("Accept-Encoding") == "") {
		// A RoundTripper must not modify the caller's request.
		req = req.Clone(req.Context())
		if extra {
			for k, v := range x.add {
				req.Header[k] = v
			}
		}
		// Ask for the stored bytes: a transport that decodes gzip by itself
		// would otherwise hand back a body that no longer matches the
		// object's size and Content-Encoding.
		if req.Method == http.MethodGet && req.Header.Get("Accept-Encoding") == "" {
			req.Header.Set("Accept-Encoding", "identity")
		}
	}
	if x != nil {
		x.mu.Lock()
		x.sent++
		x.mu.Unlock()
	}
	resp, err := t.base.RoundTrip(req)
	if body != nil {
		body.detach()
	}
	if err == nil && x != nil {
		x.mu.Lock()
		x.resp = resp.Header
		x.mu.Unlock()
	}
	return resp, err
}

// errDetached is what a read of a request body gets once its round trip is
// over.
var errDetached = errors.New("minio: request body read after its round trip ended")

// detachable is a request body that can be cut off from the reader below
// it. net/http may go on reading a request body after RoundTrip returns (a
// connection that broke mid-upload, a server that answered before reading
// it all), while minio-go seeks that same reader back to the start to
// retry: a data race, and bytes of one attempt read by the other. Once the
// round trip returns, the body is detached, and later reads fail without
// touching the reader. Reads hold a lock, which is cheap: the driver's
// bodies are in memory.
type detachable struct {
	mu       sync.Mutex
	r        io.ReadCloser
	detached bool
}

func (d *detachable) Read(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.detached {
		return 0, errDetached
	}
	return d.r.Read(p)
}

func (d *detachable) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.detached {
		return nil
	}
	return d.r.Close()
}

func (d *detachable) detach() {
	d.mu.Lock()
	d.detached = true
	d.mu.Unlock()
}
