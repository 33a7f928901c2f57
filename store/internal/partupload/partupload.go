// Package partupload owns the fate of an S3 multipart part upload whose
// caller gives up: the s3 and minio drivers send every UploadPart through
// it, and it sees the request through to its answer once its body has been
// handed over in full, even when the caller's context is cancelled
// meanwhile.
//
// A cancelled part upload is a race on the server. Once a server has the
// whole body of a part, it goes on storing it after the client has given
// up, and a server may store a part after an abort of its upload has run:
// versitygw then creates the upload's directory again, and AWS documents
// that an abort may have to be repeated while parts are in progress. A
// driver that aborts an upload as soon as its context is cancelled can
// therefore leave an incomplete upload behind, which bills its parts and
// shows in no listing of objects.
//
// The wrappers here take that race away from the client side. A part whose
// body has not been handed over in full when the context is cancelled is
// cut at once: the server gets a short body and stores nothing. A part
// whose body has been handed over in full is waited for, on a context of
// its own, until its response arrives or the transport's limits end it
// (the response header and idle timeouts of package httptimeout). Either
// way, when the request returns, no server handler of it can store the
// part any more, and an abort sent after it is final.
package partupload

import (
	"context"
	"io"
	"net/http"
	"sync"

	"github.com/commitptr/commitptr/store/internal/httptimeout"
)

// UploadPart reports whether req is an S3 UploadPart: a PUT with both the
// partNumber and uploadId query parameters.
func UploadPart(req *http.Request) bool {
	if req.Method != http.MethodPut {
		return false
	}
	q := req.URL.Query()
	return q.Has("partNumber") && q.Has("uploadId")
}

// RoundTripper wraps base: UploadPart requests are settled as the package
// describes, every other request goes to base as it is.
func RoundTripper(base http.RoundTripper) http.RoundTripper {
	return roundTripper{base}
}

type roundTripper struct{ base http.RoundTripper }

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	return send(req, rt.base.RoundTrip)
}

// Client wraps c as RoundTripper wraps a transport.
func Client(c httptimeout.Doer) httptimeout.Doer { return client{c} }

type client struct{ c httptimeout.Doer }

func (c client) Do(req *http.Request) (*http.Response, error) {
	return send(req, c.c.Do)
}

// send sends req with next, settled if it is an UploadPart with a body.
func send(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	if !UploadPart(req) || req.Body == nil || req.Body == http.NoBody {
		return next(req)
	}
	outer := req.Context()
	ctx, cancel := context.WithCancel(context.WithoutCancel(outer))
	g := &guard{outer: outer}
	// A cancellation of the caller's context cuts the request only while
	// the body has not been handed over in full.
	stop := context.AfterFunc(outer, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.sent {
			g.cut = true
			cancel()
		}
	})
	r := req.Clone(ctx)
	r.Body = g.body(req.Body, req.ContentLength)
	if req.GetBody != nil {
		getBody := req.GetBody
		r.GetBody = func() (io.ReadCloser, error) {
			b, err := getBody()
			if err != nil {
				return nil, err
			}
			return g.body(b, req.ContentLength), nil
		}
	}
	resp, err := next(r)
	if err != nil {
		stop()
		cancel()
		g.mu.Lock()
		cut := g.cut
		g.mu.Unlock()
		if cut {
			// Report the caller's cancellation, not the one made here.
			return nil, outer.Err()
		}
		return nil, err
	}
	resp.Body = &releasing{ReadCloser: resp.Body, release: func() { stop(); cancel() }}
	return resp, nil
}

// guard is the state shared by the bodies of one request (net/http may ask
// for a fresh body to send the request again).
type guard struct {
	outer context.Context
	mu    sync.Mutex
	sent  bool // a body has handed over its last byte
	cut   bool // the caller's cancellation came first: no body may finish
}

func (g *guard) body(r io.ReadCloser, size int64) io.ReadCloser {
	return &body{ReadCloser: r, g: g, left: size}
}

// body counts the bytes it hands over. The read that would hand over the
// last byte, or report the end, first checks under the guard's lock that
// the request was not cut, so that a request is either cut before the
// server can have its whole body or never cut at all.
type body struct {
	io.ReadCloser
	g    *guard
	left int64 // bytes still to hand over; negative when the size is unknown
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.g.mu.Lock()
	defer b.g.mu.Unlock()
	if b.g.cut {
		return 0, b.g.outer.Err()
	}
	if b.left >= 0 {
		b.left -= int64(n)
	}
	if b.left == 0 || err == io.EOF {
		b.g.sent = true
	}
	return n, err
}

// releasing is a response body that releases the request's context when
// it is closed.
type releasing struct {
	io.ReadCloser
	release func()
}

func (r *releasing) Close() error {
	err := r.ReadCloser.Close()
	r.release()
	return err
}
