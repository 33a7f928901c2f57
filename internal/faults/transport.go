package faults

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/internal/faultstore"
	"github.com/commitptr/commitptr/store"
)

// FaultHeader is set on every synthetic error response, naming the fault.
const FaultHeader = "X-Commitptr-Fault"

// Transport returns an http.RoundTripper that injects faults into the S3
// requests it passes to base (http.DefaultTransport if nil). Give it to the
// s3 driver as Options.HTTPClient's Transport and to the minio driver as
// Options.Transport. Requests are classified by Classify; requests of no
// operation kind (bucket-level ones) pass through untouched.
func (in *Injector) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{in: in, base: base}
}

type transport struct {
	in   *Injector
	base http.RoundTripper
}

// Classify returns the operation kind of an S3 request in path-style
// addressing (endpoint/bucket/key), and false for bucket-level requests:
//
//	GET  /b?list-type=2          list
//	GET  /b/key                  get
//	HEAD /b/key                  head
//	PUT  /b/key                  put (also multipart parts)
//	POST /b/key?uploads|uploadId put (multipart create and complete)
//	DELETE /b/key                delete (also multipart abort)
//	POST /b?delete               delete-many
func Classify(r *http.Request) (store.Op, bool) {
	q := r.URL.Query()
	path := strings.TrimPrefix(r.URL.Path, "/")
	_, key, _ := strings.Cut(path, "/")
	hasKey := key != ""
	switch r.Method {
	case http.MethodGet:
		if q.Has("list-type") {
			return store.OpList, true
		}
		return store.OpGet, hasKey
	case http.MethodHead:
		return store.OpHead, hasKey
	case http.MethodPut:
		return store.OpPut, hasKey
	case http.MethodDelete:
		return store.OpDelete, hasKey
	case http.MethodPost:
		if q.Has("delete") {
			return store.OpDeleteMany, true
		}
		if hasKey && (q.Has("uploads") || q.Has("uploadId")) {
			return store.OpPut, true
		}
	}
	return 0, false
}

func conditional(r *http.Request) bool {
	return r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != ""
}

// RoundTrip implements http.RoundTripper.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	op, ok := Classify(req)
	if !ok {
		return t.base.RoundTrip(req)
	}
	k, lat := t.in.roll(op, conditional(req))
	switch k {
	case none:
		return t.base.RoundTrip(req)
	case Latency:
		if err := ctxtime.Sleep(req.Context(), lat); err != nil {
			closeBody(req)
			return nil, err
		}
		return t.base.RoundTrip(req)
	case Refused:
		closeBody(req)
		return nil, &Error{Kind: k, Op: op}
	case Internal:
		closeBody(req)
		return errorResponse(req, k, http.StatusInternalServerError, "InternalError",
			"We encountered an internal error. Please try again."), nil
	case SlowDown:
		closeBody(req)
		return errorResponse(req, k, http.StatusServiceUnavailable, "SlowDown",
			"Please reduce your request rate."), nil
	case Conflict:
		closeBody(req)
		return errorResponse(req, k, http.StatusConflict, "ConditionalRequestConflict",
			"A conflicting conditional operation is currently in progress against this resource. Please try again."), nil
	case Lost, Reset:
		// net/http may go on reading a request body after RoundTrip
		// returns, and minio-go seeks that body to retry: send a copy, so
		// the retry that follows our error cannot race the first send.
		req, err := detach(req)
		if err != nil {
			return nil, err
		}
		resp, err := t.base.RoundTrip(req)
		if err != nil {
			return nil, err // a real failure; nothing to add
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, &Error{Kind: k, Op: op}
	case Cut:
		resp, err := t.base.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK || resp.ContentLength == 0 {
			return resp, err
		}
		n := int64(0)
		if resp.ContentLength > 1 {
			n = int64(lat) % resp.ContentLength // some prefix, strictly shorter
		}
		resp.Body = faultstore.CutBody(resp.Body, n, &Error{Kind: k, Op: op})
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

// errorResponse builds an S3-style XML error response.
func errorResponse(req *http.Request, k Kind, status int, code, msg string) *http.Response {
	id := fmt.Sprintf("FAULT%016X", time.Now().UnixNano())
	body := ""
	if req.Method != http.MethodHead {
		body = fmt.Sprintf("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>%s</RequestId></Error>",
			code, msg, xmlEscape(req.URL.Path), id)
	}
	h := http.Header{}
	h.Set("Content-Type", "application/xml")
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	h.Set("X-Amz-Request-Id", id)
	h.Set(FaultHeader, k.String())
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
