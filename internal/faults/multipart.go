package faults

import (
	"io"
	"net/http"
	"strings"
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
