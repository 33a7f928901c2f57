// Package wanproxy is an HTTP reverse proxy on loopback that puts a
// server a network away: each request reaches the server a set delay after
// the proxy has its headers, and each response's headers reach the client
// the same delay after the server sent them, so every request costs at
// least one round trip of twice the delay. Bodies stream on without
// further delay, and opening a connection to the proxy costs nothing, as
// with a pool of kept-alive connections. It is test support: the WAN
// benchmark of scripts/bench.sh runs it (cmd/wanproxy) in front of the S3
// test server, and it can log every request with its send and answer
// times, as the timeline of an operation. Throttle makes it answer 503
// SlowDown, as S3 does, to requests above a rate.
package wanproxy

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/commitptr/commitptr/internal/ctxtime"
)

// Proxy is a running delaying proxy.
type Proxy struct {
	// URL is the proxy's base URL, http://127.0.0.1:port.
	URL string

	ln  net.Listener
	srv *http.Server
	d   *delayed
}

// Start listens on addr (":0" style; "127.0.0.1:0" picks a free port) and
// forwards every request to target after delay, returning each response
// delay after it arrives. With log non-nil it writes one line when a
// request is forwarded and one when its response is returned (see
// logLine). The Host header is passed on as the client sent it, so
// signatures over it (S3 SigV4) stay valid.
func Start(addr, target string, delay time.Duration, logTo io.Writer) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("wanproxy: target %q: %w", target, err)
	}
	if u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("wanproxy: target %q: want scheme://host:port", target)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("wanproxy: listen on %s: %w", addr, err)
	}
	t := &delayed{
		base: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
		delay: delay,
		log:   logTo,
		start: time.Now(),
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
		},
		Transport:     t,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), ln: ln, srv: &http.Server{Handler: rp, ReadHeaderTimeout: time.Minute}, d: t}
	go p.srv.Serve(ln) //nolint:errcheck // Serve returns ErrServerClosed on Close
	return p, nil
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error { return p.srv.Close() }

// Throttle makes the proxy forward at most perSecond requests a second
// (a token bucket of burst) and answer the others itself, after the
// delay, with S3's 503 SlowDown. perSecond 0 forwards every request
// again.
func (p *Proxy) Throttle(perSecond float64, burst int) {
	var l *rate.Limiter
	if perSecond > 0 {
		l = rate.NewLimiter(rate.Limit(perSecond), burst)
	}
	p.d.limit.Store(l)
}

// Counts are what the proxy has seen since it started or since the last
// Reset.
type Counts struct {
	Forwarded   int64 // requests sent on to the server
	Throttled   int64 // requests answered with SlowDown
	MaxInFlight int64 // the most requests the proxy held at once
}

// Counts returns the counts.
func (p *Proxy) Counts() Counts {
	return Counts{p.d.forwarded.Load(), p.d.throttled.Load(), p.d.maxInFlight.Load()}
}

// Reset sets the counts to zero.
func (p *Proxy) Reset() {
	p.d.forwarded.Store(0)
	p.d.throttled.Store(0)
	p.d.maxInFlight.Store(0)
}

// delayed sends each request after delay and hands back each response
// after delay.
type delayed struct {
	base  http.RoundTripper
	delay time.Duration
	start time.Time

	limit                 atomic.Pointer[rate.Limiter] // nil: no throttle
	forwarded, throttled  atomic.Int64
	inFlight, maxInFlight atomic.Int64

	mu  sync.Mutex
	log io.Writer
	seq int
}

// slowDown is S3's answer to a request above the rate it serves.
const slowDown = `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message><RequestId>wanproxy</RequestId></Error>`

func (d *delayed) RoundTrip(r *http.Request) (*http.Response, error) {
	now := d.inFlight.Add(1)
	defer d.inFlight.Add(-1)
	for {
		m := d.maxInFlight.Load()
		if now <= m || d.maxInFlight.CompareAndSwap(m, now) {
			break
		}
	}
	if err := ctxtime.Sleep(r.Context(), d.delay); err != nil {
		return nil, err
	}
	if l := d.limit.Load(); l != nil && !l.Allow() {
		d.throttled.Add(1)
		if r.Body != nil {
			r.Body.Close()
		}
		if err := ctxtime.Sleep(r.Context(), d.delay); err != nil {
			return nil, err
		}
		d.logLine(d.logLine(0, "->", r, 0, 0), "<-", r, http.StatusServiceUnavailable, 0)
		return &http.Response{
			StatusCode: http.StatusServiceUnavailable, Status: "503 Slow Down",
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:        http.Header{"Content-Type": {"application/xml"}},
			Body:          io.NopCloser(strings.NewReader(slowDown)),
			ContentLength: int64(len(slowDown)),
			Request:       r,
		}, nil
	}
	d.forwarded.Add(1)
	n := d.logLine(0, "->", r, 0, 0)
	sent := time.Now()
	resp, err := d.base.RoundTrip(r)
	took := time.Since(sent)
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	if err := ctxtime.Sleep(r.Context(), d.delay); err != nil {
		if resp != nil {
			resp.Body.Close()
		}
		return nil, err
	}
	d.logLine(n, "<-", r, status, took)
	return resp, err
}

// logLine writes "TIME  #N -> METHOD PATH?QUERY" when a request is
// forwarded, and "TIME  #N <- STATUS METHOD PATH?QUERY (server ms)" when
// its response is handed back; TIME is seconds since the proxy started.
// It returns the request's number.
func (d *delayed) logLine(n int, dir string, r *http.Request, status int, took time.Duration) int {
	if d.log == nil {
		return n
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if n == 0 {
		d.seq++
		n = d.seq
	}
	at := time.Since(d.start).Seconds()
	target := r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	if dir == "->" {
		fmt.Fprintf(d.log, "%.6f #%d -> %s %s\n", at, n, r.Method, target)
	} else {
		fmt.Fprintf(d.log, "%.6f #%d <- %d %s %s (%.1f ms at the server)\n", at, n, status, r.Method, target, float64(took)/1e6)
	}
	return n
}
