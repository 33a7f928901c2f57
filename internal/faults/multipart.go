package faults

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ConditionalMultipartSpy is an http.RoundTripper that stands for an S3
// server without conditional multipart uploads: it answers every
// CompleteMultipartUpload that carries If-Match or If-None-Match with a
// synthetic 501 instead of passing it on, and counts them. (Removing the
// headers instead, as some servers in effect do, would break the request's
// signature.) A driver that never sends a conditional write as a multipart
// upload never meets it.
type ConditionalMultipartSpy struct {
	// Base sends the other requests; http.DefaultTransport if nil.
	Base http.RoundTripper
	// Refused counts the conditional completions answered with 501.
	Refused atomic.Int64
}

// RoundTrip implements http.RoundTripper.
func (d *ConditionalMultipartSpy) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.URL.Query().Has("uploadId") &&
		(r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != "") {
		d.Refused.Add(1)
		if r.Body != nil {
			r.Body.Close()
		}
		body := "<Error><Code>NotImplemented</Code><Message>conditional multipart completion</Message></Error>"
		return &http.Response{
			Status: "501 Not Implemented", StatusCode: http.StatusNotImplemented,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:        http.Header{"Content-Type": {"application/xml"}, FaultHeader: {"conditional-multipart"}},
			Body:          io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)),
			Request:       r,
		}, nil
	}
	base := d.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// ExactUploadPrefix is an http.RoundTripper that stands for a server
// (MinIO) that takes the prefix of ListMultipartUploads for an exact key:
// it answers every listing of uploads with a prefix with an empty one, as
// that server does for a prefix that is no upload's key, and counts them.
// Other requests go to Base.
type ExactUploadPrefix struct {
	// Base sends the other requests; http.DefaultTransport if nil.
	Base http.RoundTripper
	// Emptied counts the prefixed listings answered with no uploads.
	Emptied atomic.Int64
}

// RoundTrip implements http.RoundTripper.
func (e *ExactUploadPrefix) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	if r.Method == http.MethodGet && q.Has("uploads") && q.Get("prefix") != "" {
		e.Emptied.Add(1)
		body := "<ListMultipartUploadsResult><Prefix>" + xmlEscape(q.Get("prefix")) + "</Prefix><IsTruncated>false</IsTruncated></ListMultipartUploadsResult>"
		return &http.Response{
			Status: "200 OK", StatusCode: http.StatusOK,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{
				"Content-Type": {"application/xml"},
				"Date":         {time.Now().UTC().Format(http.TimeFormat)},
				FaultHeader:    {"exact-upload-prefix"},
			},
			Body:          io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)),
			Request:       r,
		}, nil
	}
	base := e.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// PartHolder is an http.RoundTripper that stands for a network that holds
// part uploads: it reads the whole body of every UploadPart, then keeps
// the request until Release, and only then sends it on to Base. A sender
// that gives up meanwhile (its context ends) gets its context's error, but
// the part still reaches the server later, as a request that had left the
// client would. Aborts of multipart uploads that arrive while a part is
// held are counted: a driver that aborts before every part it handed over
// in full is answered races with those parts on the server.
type PartHolder struct {
	// Base sends the requests; http.DefaultTransport if nil.
	Base http.RoundTripper

	mu          sync.Mutex
	held        int // parts read in full and not yet answered
	early       int // aborts that arrived while held > 0
	first       chan struct{}
	firstOnce   sync.Once
	release     chan struct{}
	releaseOnce sync.Once
	inflight    sync.WaitGroup
}

// NewPartHolder returns a PartHolder over base.
func NewPartHolder(base http.RoundTripper) *PartHolder {
	return &PartHolder{Base: base, first: make(chan struct{}), release: make(chan struct{})}
}

// Held is closed once the first part is held with its body in full.
func (h *PartHolder) Held() <-chan struct{} { return h.first }

// Release sends the held parts on, and every later one at once.
func (h *PartHolder) Release() { h.releaseOnce.Do(func() { close(h.release) }) }

// Wait waits until every part has been answered by Base.
func (h *PartHolder) Wait() { h.inflight.Wait() }

// EarlyAborts returns how many aborts arrived while a part was held.
func (h *PartHolder) EarlyAborts() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.early
}

// RoundTrip implements http.RoundTripper.
func (h *PartHolder) RoundTrip(req *http.Request) (*http.Response, error) {
	base := h.Base
	if base == nil {
		base = http.DefaultTransport
	}
	q := req.URL.Query()
	if req.Method == http.MethodDelete && q.Has("uploadId") {
		h.mu.Lock()
		if h.held > 0 {
			h.early++
		}
		h.mu.Unlock()
		return base.RoundTrip(req)
	}
	if req.Method != http.MethodPut || !q.Has("partNumber") || !q.Has("uploadId") {
		return base.RoundTrip(req)
	}
	r, err := detach(req)
	if err != nil {
		return nil, err
	}
	r = r.WithContext(context.WithoutCancel(req.Context()))
	h.mu.Lock()
	h.held++
	h.mu.Unlock()
	h.firstOnce.Do(func() { close(h.first) })
	type result struct {
		resp *http.Response
		err  error
	}
	answer := make(chan result, 1)
	h.inflight.Add(1)
	go func() {
		defer h.inflight.Done()
		<-h.release
		resp, err := base.RoundTrip(r)
		if err == nil {
			// The answer is read here, so that the server is done with
			// the part before it counts as answered.
			var b []byte
			b, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(b))
		}
		h.mu.Lock()
		h.held--
		h.mu.Unlock()
		answer <- result{resp, err}
	}()
	select {
	case a := <-answer:
		return a.resp, a.err
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}
