package faults

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"sync"
)

// Recorder is a transport that notes the method, path, query and headers
// of every request before Base sends it, for tests that check what reaches
// the wire.
type Recorder struct {
	// Base sends the requests; http.DefaultTransport if nil.
	Base http.RoundTripper
	// Buffer reads each request's body into memory before Base sends
	// it. A server that answers before it has read a body (as Azurite
	// does when it refuses a request) can leave the transport reading
	// it after RoundTrip returns, while the client rewinds it for a
	// retry; with Buffer the transport reads a copy.
	Buffer bool

	mu   sync.Mutex
	seen []Recorded
}

// Recorded is one request a Recorder saw.
type Recorded struct {
	Method string
	Path   string
	Query  url.Values
	Header http.Header
}

// RoundTrip implements http.RoundTripper.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.seen = append(r.seen, Recorded{Method: req.Method, Path: req.URL.Path, Query: req.URL.Query(), Header: req.Header.Clone()})
	r.mu.Unlock()
	if r.Buffer && req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	base := r.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(req)
}

// Take returns the requests seen since the last Take, and forgets them.
func (r *Recorder) Take() []Recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := r.seen
	r.seen = nil
	return seen
}
