package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/commitptr/commitptr/store"
)

// Protocol is an object store's HTTP API: how the injector reads a request
// of it and answers one with an error.
type Protocol int

// The protocols.
const (
	// S3 is the S3 API in path-style addressing (endpoint/bucket/key), of
	// the s3 and minio drivers.
	S3 Protocol = iota
	// GCS is the Cloud Storage JSON API, with downloads through the XML
	// API, of the gcs driver.
	GCS
	// Azure is the Azure Blob REST API, of the azblob driver.
	Azure
)

func (p Protocol) String() string {
	switch p {
	case S3:
		return "s3"
	case GCS:
		return "gcs"
	case Azure:
		return "azure"
	}
	return fmt.Sprintf("protocol(%d)", int(p))
}

// Classify returns the operation kind, key and precondition of a request of
// the protocol, and false for a request on no object (on a bucket or
// container, or an unknown shape), which the injector leaves alone.
func (p Protocol) Classify(r *http.Request) (Request, bool) {
	switch p {
	case GCS:
		return classifyGCS(r)
	case Azure:
		return classifyAzure(r)
	}
	return classifyS3(r)
}

// headerCond reads If-Match and If-None-Match, as S3 and Azure Blob send
// them.
func headerCond(h http.Header) Cond {
	switch {
	case h.Get("If-None-Match") != "":
		return IfNoneMatch
	case h.Get("If-Match") != "":
		return IfMatch
	}
	return Unconditional
}

// classifyS3 reads an S3 request in path-style addressing:
//
//	GET  /b?list-type=2&prefix=p   list of p
//	GET  /b/key                    get
//	HEAD /b/key                    head
//	PUT  /b/key                    put (also multipart parts)
//	POST /b/key?uploads|uploadId   put (multipart create and complete)
//	DELETE /b/key                  delete (also multipart abort)
//	POST /b?delete                 delete-many, of no one key
func classifyS3(r *http.Request) (Request, bool) {
	q := r.URL.Query()
	_, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	req := Request{Key: key, Cond: headerCond(r.Header)}
	hasKey := key != ""
	switch r.Method {
	case http.MethodGet:
		if q.Has("list-type") {
			return Request{Op: store.OpList, Key: q.Get("prefix"), Cond: Unconditional}, true
		}
		req.Op = store.OpGet
		return req, hasKey
	case http.MethodHead:
		req.Op = store.OpHead
		return req, hasKey
	case http.MethodPut:
		req.Op = store.OpPut
		return req, hasKey
	case http.MethodDelete:
		req.Op = store.OpDelete
		return req, hasKey
	case http.MethodPost:
		if q.Has("delete") {
			return Request{Op: store.OpDeleteMany, Cond: Unconditional}, true
		}
		if hasKey && (q.Has("uploads") || q.Has("uploadId")) {
			req.Op = store.OpPut
			return req, true
		}
	}
	return Request{}, false
}

// gcsCond reads a Cloud Storage precondition: ifGenerationMatch in the
// query of the JSON API, x-goog-if-generation-match in the headers of the
// XML API. Generation 0 means the object must not exist.
func gcsCond(r *http.Request) Cond {
	g := r.URL.Query().Get("ifGenerationMatch")
	if g == "" {
		g = r.Header.Get("X-Goog-If-Generation-Match")
	}
	switch g {
	case "":
		return Unconditional
	case "0":
		return IfNoneMatch
	}
	return IfMatch
}

// classifyGCS reads a Cloud Storage request:
//
//	GET    /storage/v1/b/B/o?prefix=p            list of p
//	GET    /storage/v1/b/B/o/KEY                 head (the object's metadata)
//	POST   /upload/storage/v1/b/B/o?name=KEY     put (an upload, or the start of a resumable one)
//	PUT    /upload/storage/v1/b/B/o?upload_id=…  put (a chunk of a resumable upload; its key if the URL names it)
//	DELETE /storage/v1/b/B/o/KEY                 delete
//	GET    /B/KEY                                get (a download through the XML API)
//
// The object name in a JSON API path is escaped, '/' included; r.URL.Path
// holds it unescaped.
func classifyGCS(r *http.Request) (Request, bool) {
	q := r.URL.Query()
	path := r.URL.Path
	cond := gcsCond(r)
	if rest, ok := strings.CutPrefix(path, "/upload/storage/v1/b/"); ok {
		_, objects, _ := strings.Cut(rest, "/")
		if objects != "o" || (r.Method != http.MethodPost && r.Method != http.MethodPut) {
			return Request{}, false
		}
		return Request{Op: store.OpPut, Key: q.Get("name"), Cond: cond}, true
	}
	if rest, ok := strings.CutPrefix(path, "/storage/v1/b/"); ok {
		_, objects, _ := strings.Cut(rest, "/")
		if objects == "o" && r.Method == http.MethodGet {
			return Request{Op: store.OpList, Key: q.Get("prefix"), Cond: Unconditional}, true
		}
		key, ok := strings.CutPrefix(objects, "o/")
		if !ok || key == "" || strings.Contains(key, "/rewriteTo/") || strings.HasSuffix(key, "/compose") {
			return Request{}, false
		}
		switch r.Method {
		case http.MethodGet:
			return Request{Op: store.OpHead, Key: key, Cond: cond}, true
		case http.MethodDelete:
			return Request{Op: store.OpDelete, Key: key, Cond: cond}, true
		}
		return Request{}, false
	}
	if strings.HasPrefix(path, "/storage/") || strings.HasPrefix(path, "/upload/") || strings.HasPrefix(path, "/_internal/") {
		return Request{}, false // the API's other resources, and the emulator's
	}
	_, key, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	switch {
	case key == "":
		return Request{}, false
	case r.Method == http.MethodGet:
		return Request{Op: store.OpGet, Key: key, Cond: cond}, true
	case r.Method == http.MethodHead:
		return Request{Op: store.OpHead, Key: key, Cond: cond}, true
	}
	return Request{}, false
}

// classifyAzure reads an Azure Blob request. The account is the host's
// first label, or, on an endpoint addressed by IP as the emulator's is, the
// path's first segment, as the Azure SDK reads it:
//
//	GET    /C?restype=container&comp=list&prefix=p  list of p
//	GET    /C/KEY                                   get (also any other read of the blob)
//	HEAD   /C/KEY                                   head
//	PUT    /C/KEY                                   put (Put Blob, Put Block, Put Block List)
//	DELETE /C/KEY                                   delete
//
// Requests with restype=container are on the container: only its listing
// is classified.
func classifyAzure(r *http.Request) (Request, bool) {
	q := r.URL.Query()
	path := strings.TrimPrefix(r.URL.Path, "/")
	if ipHost(r.URL.Host) {
		_, path, _ = strings.Cut(path, "/")
	}
	_, key, _ := strings.Cut(path, "/")
	if q.Get("restype") == "container" {
		if r.Method == http.MethodGet && q.Get("comp") == "list" && key == "" {
			return Request{Op: store.OpList, Key: q.Get("prefix"), Cond: Unconditional}, true
		}
		return Request{}, false
	}
	if key == "" {
		return Request{}, false
	}
	req := Request{Key: key, Cond: headerCond(r.Header)}
	switch r.Method {
	case http.MethodGet:
		req.Op = store.OpGet
	case http.MethodHead:
		req.Op = store.OpHead
	case http.MethodPut:
		req.Op = store.OpPut
	case http.MethodDelete:
		req.Op = store.OpDelete
	default:
		return Request{}, false
	}
	return req, true
}

// ipHost reports whether host (with or without a port) is an IP address.
func ipHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return net.ParseIP(strings.Trim(host, "[]")) != nil
}

// answer is the error response of the protocol to a fault of kind k that
// is not sent: Internal, SlowDown or Conflict.
func (p Protocol) answer(req *http.Request, k Kind) *http.Response {
	id := fmt.Sprintf("FAULT%016X", time.Now().UnixNano())
	status, code, msg := http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again."
	h := http.Header{}
	h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	h.Set(FaultHeader, k.String())
	body := ""
	switch p {
	case S3:
		switch k {
		case SlowDown:
			status, code, msg = http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate."
		case Conflict:
			status, code, msg = http.StatusConflict, "ConditionalRequestConflict",
				"A conflicting conditional operation is currently in progress against this resource. Please try again."
		}
		h.Set("X-Amz-Request-Id", id)
		body = xmlError(code, msg, "<Resource>"+xmlEscape(req.URL.Path)+"</Resource><RequestId>"+id+"</RequestId>")
	case GCS:
		reason := "backendError"
		if k == SlowDown {
			status, code, reason, msg = http.StatusTooManyRequests, "SlowDown", "rateLimitExceeded", "The rate of requests exceeds the rate limit. Please reduce your request rate."
		}
		if strings.HasPrefix(req.URL.Path, "/storage/") || strings.HasPrefix(req.URL.Path, "/upload/") {
			b, _ := json.Marshal(map[string]any{"error": map[string]any{
				"code": status, "message": msg,
				"errors": []map[string]string{{"domain": "global", "reason": reason, "message": msg}},
			}})
			h.Set("Content-Type", "application/json; charset=UTF-8")
			body = string(b)
		} else {
			body = xmlError(code, msg, "")
		}
	case Azure:
		if k == SlowDown {
			status, code, msg = http.StatusServiceUnavailable, "ServerBusy", "The server is busy."
		} else {
			code, msg = "InternalError", "The server encountered an internal error. Please retry the request."
		}
		h.Set("X-Ms-Request-Id", id)
		h.Set("X-Ms-Error-Code", code)
		body = xmlError(code, msg+"\nRequestId:"+id+"\nTime:"+time.Now().UTC().Format(time.RFC3339Nano), "")
	}
	if req.Method == http.MethodHead {
		body = ""
	}
	if body != "" && h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/xml")
	}
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

// xmlError is an XML error body in the form S3, Cloud Storage's XML API
// and Azure Blob share.
func xmlError(code, msg, extra string) string {
	return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + code + "</Code><Message>" +
		xmlEscape(msg) + "</Message>" + extra + "</Error>"
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
