package faults

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/commitptr/commitptr/store"
)

// ClockTransport is an http.RoundTripper that shows a client the S3
// server's clock as if it were off by a skew: it shifts the Date and
// Last-Modified headers of every response, and the LastModified and
// Initiated times in XML bodies (the listings). DropDate makes it remove
// the Date headers instead, as a proxy or a server that sends none. Give
// it to the s3 driver as Options.HTTPClient's Transport and to the minio
// driver as Options.Transport.
type ClockTransport struct {
	base http.RoundTripper
	skew time.Duration

	mu     sync.Mutex
	noDate map[store.Op]bool
}

// NewClockTransport returns a ClockTransport that sends requests through
// base (http.DefaultTransport if nil) and shows the server's clock skew
// away from its own: -10*time.Minute makes a store 10 minutes behind.
func NewClockTransport(base http.RoundTripper, skew time.Duration) *ClockTransport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &ClockTransport{base: base, skew: skew}
}

// DropDate removes, from now on, the Date header of the responses to
// requests of the given kinds (see Classify; bucket-level GETs such as the
// listing of multipart uploads count as store.OpList). With no kinds,
// every response keeps its Date again.
func (c *ClockTransport) DropDate(ops ...store.Op) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noDate = map[store.Op]bool{}
	for _, op := range ops {
		c.noDate[op] = true
	}
}

// AllOps lists every request kind, for DropDate.
var AllOps = []store.Op{store.OpGet, store.OpHead, store.OpPut, store.OpDelete, store.OpDeleteMany, store.OpList}

// xmlTime matches a time element of an S3 XML body; the groups are the
// opening tag, the time and the closing tag.
var xmlTime = regexp.MustCompile(`(<(?:LastModified|Initiated)>)([^<]+)(</(?:LastModified|Initiated)>)`)

// RoundTrip implements http.RoundTripper.
func (c *ClockTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	op, ok := Classify(req)
	if !ok && req.Method == http.MethodGet {
		op, ok = store.OpList, true
	}
	c.mu.Lock()
	drop := ok && c.noDate[op]
	c.mu.Unlock()

	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if drop {
		resp.Header.Del("Date")
	} else {
		c.shiftHeader(resp.Header, "Date")
	}
	c.shiftHeader(resp.Header, "Last-Modified")
	if resp.Body == nil || !strings.Contains(resp.Header.Get("Content-Type"), "xml") {
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	body = xmlTime.ReplaceAllFunc(body, func(m []byte) []byte {
		g := xmlTime.FindSubmatch(m)
		t, err := time.Parse(time.RFC3339Nano, string(g[2]))
		if err != nil {
			return m
		}
		return []byte(string(g[1]) + t.Add(c.skew).UTC().Format(time.RFC3339Nano) + string(g[3]))
	})
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return resp, nil
}

// shiftHeader moves the HTTP date in header name by the skew.
func (c *ClockTransport) shiftHeader(h http.Header, name string) {
	if t, err := http.ParseTime(h.Get(name)); err == nil {
		h.Set(name, t.Add(c.skew).UTC().Format(http.TimeFormat))
	}
}
