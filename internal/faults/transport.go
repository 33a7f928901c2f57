package faults

import (
	"bytes"
	"io"
	"net/http"

	"github.com/commitptr/commitptr/store"
)

// FaultHeader is set on every synthetic error response, naming the fault.
const FaultHeader = "X-Commitptr-Fault"

// Transport returns an http.RoundTripper that injects faults into the S3
// requests it passes to base: TransportFor(S3, base). Give it to the s3
// driver as Options.HTTPClient's Transport and to the minio driver as
// Options.Transport.
func (in *Injector) Transport(base http.RoundTripper) http.RoundTripper {
	return in.TransportFor(S3, base)
}

// TransportFor returns an http.RoundTripper that injects faults into the
// requests of protocol p it passes to base (http.DefaultTransport if nil).
// Give it to the gcs driver as Options.Transport, and to the azblob driver
// as Options.HTTPClient's Transport. Requests are classified by
// p.Classify; requests on no object pass through untouched, and the
// faults that are not sent are answered as p's servers answer them.
func (in *Injector) TransportFor(p Protocol, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{in: in, p: p, base: base}
}

type transport struct {
	in   *Injector
	p    Protocol
	base http.RoundTripper
}

// Classify returns the operation kind of an S3 request, and false for
// bucket-level requests: see Protocol.Classify.
func Classify(r *http.Request) (store.Op, bool) {
	req, ok := S3.Classify(r)
	return req.Op, ok
}

// RoundTrip implements http.RoundTripper.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	r, ok := t.p.Classify(req)
	if !ok {
		return t.base.RoundTrip(req)
	}
	f := t.in.roll(r, t.p, false)
	op := r.Op
	switch f.kind {
	case none:
		return t.base.RoundTrip(req)
	case Latency:
		if err := f.wait(req.Context()); err != nil {
			closeBody(req)
			return nil, err
		}
		return t.base.RoundTrip(req)
	case Refused, Internal, SlowDown, Conflict:
		closeBody(req)
		f.hold()
		if f.kind == Refused {
			return nil, &Error{Kind: f.kind, Op: op}
		}
		return t.p.answer(req, f.kind), nil
	case Lost, Reset, Held:
		// net/http may go on reading a request body after RoundTrip
		// returns, and minio-go seeks that body to retry: send a copy, so
		// the retry that follows a lost or reset response cannot race the
		// first send.
		req, err := detach(req)
		if err != nil {
			return nil, err
		}
		resp, err := t.base.RoundTrip(req)
		if err != nil {
			return nil, err // a real failure; nothing to add
		}
		if f.kind == Held {
			if err := f.wait(req.Context()); err != nil {
				resp.Body.Close()
				return nil, err
			}
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body) // drained for reuse only: the fault is the answer
		resp.Body.Close()
		f.hold()
		return nil, &Error{Kind: f.kind, Op: op}
	case Cut:
		resp, err := t.base.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK || resp.ContentLength == 0 {
			return resp, err
		}
		f.hold()
		n := resp.ContentLength / 2
		if !f.rule && resp.ContentLength > 1 {
			n = int64(f.delay) % resp.ContentLength // some prefix, strictly shorter
		}
		resp.Body = cut(resp.Body, n, &Error{Kind: f.kind, Op: op})
		return resp, nil
	}
	return t.base.RoundTrip(req)
}

// detach returns req with its body read into memory and closed.
func detach(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return r, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
