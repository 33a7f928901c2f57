package inflight

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/httptimeout"
)

// TestClassify: which outcomes are throttles, answers, or say nothing.
func TestClassify(t *testing.T) {
	req := httptest.NewRequest(http.MethodGet, "http://store/k", nil)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	timeout := &httptimeout.Error{Endpoint: "http://store", Kind: "response header", Limit: time.Second, Err: errors.New("timeout")}
	for _, c := range []struct {
		name string
		req  *http.Request
		code int
		err  error
		want Signal
	}{
		{"200", req, 200, nil, Answered},
		{"304", req, 304, nil, Answered},
		{"404", req, 404, nil, Answered},
		{"412", req, 412, nil, Answered},
		{"500", req, 500, nil, Answered},
		{"503 SlowDown", req, 503, nil, Throttled},
		{"429", req, 429, nil, Throttled},
		{"a header timeout", req, 0, timeout, Throttled},
		{"a refused connection", req, 0, syscall.ECONNREFUSED, Unknown},
		{"the caller's cancellation", req.WithContext(cancelled), 0, context.Canceled, Unknown},
		{"a timeout after the caller gave up", req.WithContext(cancelled), 0, timeout, Unknown},
	} {
		var resp *http.Response
		if c.err == nil {
			resp = &http.Response{StatusCode: c.code}
		}
		if got := Classify(c.req, resp, c.err); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestClientHoldsRequestsToTheWindow: through a pinned window of 1, a
// second request is not sent until the first one's response header
// wrappers are the two ways to put a Limiter in front of a test server:
// Client around its client, RoundTripper around its transport.
var wrappers = []struct {
	name string
	do   func(srv *httptest.Server, l *Limiter) httptimeout.Doer
}{
	{"Client", func(srv *httptest.Server, l *Limiter) httptimeout.Doer { return Client(srv.Client(), l) }},
	{"RoundTripper", func(srv *httptest.Server, l *Limiter) httptimeout.Doer {
		return &http.Client{Transport: RoundTripper(srv.Client().Transport, l)}
	}},
}

// arrives, and the first one's body is read outside the window.
func TestClientHoldsRequestsToTheWindow(t *testing.T) {
	for _, wrap := range wrappers {
		t.Run(wrap.name, func(t *testing.T) {
			release := make(chan struct{})
			arrived := make(chan string, 2)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrived <- r.URL.Path
				if r.URL.Path == "/first" {
					<-release
				}
				io.WriteString(w, "body of "+r.URL.Path) //nolint:errcheck // the test reads it
			}))
			defer srv.Close()
			l := Pinned(1)
			c := wrap.do(srv, l)
			get := func(path string) (*http.Response, error) {
				req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
				if err != nil {
					return nil, err
				}
				return c.Do(req)
			}
			first := make(chan *http.Response, 1)
			go func() {
				resp, err := get("/first")
				if err != nil {
					t.Error(err)
				}
				first <- resp
			}()
			if p := <-arrived; p != "/first" {
				t.Fatalf("%s arrived first", p)
			}
			second := make(chan *http.Response, 1)
			go func() {
				resp, err := get("/second")
				if err != nil {
					t.Error(err)
				}
				second <- resp
			}()
			waitFor(t, "the second request waits", func() bool { _, q := l.state(); return q == 1 })
			select {
			case p := <-arrived:
				t.Fatalf("%s was sent through a full window", p)
			default:
			}
			close(release)
			resp := <-first
			// The first body is still unread: the window is free already.
			r2 := <-second
			b, err := io.ReadAll(r2.Body)
			if err != nil || string(b) != "body of /second" {
				t.Fatalf("second: %q, %v", b, err)
			}
			b, err = io.ReadAll(resp.Body)
			if err != nil || string(b) != "body of /first" {
				t.Fatalf("first: %q, %v", b, err)
			}
			resp.Body.Close()
			r2.Body.Close()
		})
	}
}

// TestWrappersShrinkOnSlowDown: through either wrapper a 503 (S3's
// SlowDown) or a 429 shrinks an adaptive window, and the caller gets the
// answer (the SDK retries it).
func TestWrappersShrinkOnSlowDown(t *testing.T) {
	for _, code := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			io.WriteString(w, "<Error><Code>SlowDown</Code></Error>") //nolint:errcheck // the test reads it
		}))
		for name, do := range map[string]func(l *Limiter) func(*http.Request) (*http.Response, error){
			"Client": func(l *Limiter) func(*http.Request) (*http.Response, error) { return Client(srv.Client(), l).Do },
			"RoundTripper": func(l *Limiter) func(*http.Request) (*http.Response, error) {
				return RoundTripper(srv.Client().Transport, l).RoundTrip
			},
		} {
			l := New(Adaptive)
			req, err := http.NewRequest(http.MethodPut, srv.URL+"/k", strings.NewReader("x"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := do(l)(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != code {
				t.Fatalf("%s: status %d, want the %d", name, resp.StatusCode, code)
			}
			if want := int(float64(Adaptive.Initial) * Adaptive.Shrink); l.Limit() != want {
				t.Fatalf("%s: limit %d after a %d, want %d", name, l.Limit(), code, want)
			}
		}
		srv.Close()
	}
}

// TestUrgentRequestsSkipTheWindow: a request made with store.Urgent, and
// one that starts, completes or aborts a multipart upload, goes out while
// the window is full; an object's PUT, a part and a listing wait.
func TestUrgentRequestsSkipTheWindow(t *testing.T) {
	for _, c := range []struct {
		name   string
		method string
		query  string
		urgent bool
		mark   bool
	}{
		{"store.Urgent", http.MethodGet, "", true, true},
		{"create a multipart upload", http.MethodPost, "uploads", true, false},
		{"complete it", http.MethodPost, "uploadId=u", true, false},
		{"abort it", http.MethodDelete, "uploadId=u", true, false},
		{"commit Azure's block list", http.MethodPut, "comp=blocklist", true, false},
		{"a part", http.MethodPut, "partNumber=1&uploadId=u", false, false},
		{"an Azure block", http.MethodPut, "comp=block&blockid=b", false, false},
		{"an object", http.MethodPut, "", false, false},
		{"a listing", http.MethodGet, "list-type=2", false, false},
	} {
		req := httptest.NewRequest(c.method, "http://store/bucket/key?"+c.query, nil)
		if c.mark {
			req = req.WithContext(store.Urgent(req.Context()))
		}
		if got := Urgent(req); got != c.urgent {
			t.Fatalf("%s: urgent %v, want %v", c.name, got, c.urgent)
		}
	}
	// Through a full window, an urgent request is answered.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	l := Pinned(1)
	held, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Done(Outcome{Signal: Unknown})
	for name, do := range map[string]func(*http.Request) (*http.Response, error){
		"Client": Client(srv.Client(), l).Do, "RoundTripper": RoundTripper(srv.Client().Transport, l).RoundTrip,
	} {
		ctx, cancel := context.WithTimeout(store.Urgent(context.Background()), time.Minute)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/pointer", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		resp.Body.Close()
	}
}

// TestRequestNeverSentHasItsBodyClosed: a request whose context ends
// while it waits is not sent, and its body is closed, as
// http.RoundTripper and http.Client.Do require.
func TestRequestNeverSentHasItsBodyClosed(t *testing.T) {
	for _, wrap := range []struct {
		name string
		do   func(l *Limiter) func(*http.Request) (*http.Response, error)
	}{
		{"Client", func(l *Limiter) func(*http.Request) (*http.Response, error) { return Client(http.DefaultClient, l).Do }},
		{"RoundTripper", func(l *Limiter) func(*http.Request) (*http.Response, error) {
			return RoundTripper(http.DefaultTransport, l).RoundTrip
		}},
	} {
		t.Run(wrap.name, func(t *testing.T) {
			l := Pinned(1)
			held, err := l.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer held.Done(Outcome{Signal: Unknown})
			do := wrap.do(l)
			ctx, cancel := context.WithCancel(context.Background())
			body := &closeRecorder{Reader: strings.NewReader("x")}
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://127.0.0.1:1/k", body)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := do(req)
				done <- err
			}()
			waitFor(t, "the request waits", func() bool { _, q := l.state(); return q == 1 })
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("%v, want the cancellation", err)
			}
			if !body.closed.Load() {
				t.Fatal("the body of a request never sent was left open")
			}
		})
	}
}

type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeRecorder) Close() error { c.closed.Store(true); return nil }

// TestLatencyIsTheServicesTime: the latency that reaches the window runs
// from the request's last byte to its answer's first: it covers the time
// the service held the answer, and not the time the client spent sending
// a body the service read slowly. A PUT's is a write's.
func TestLatencyIsTheServicesTime(t *testing.T) {
	for _, wrap := range wrappers {
		t.Run(wrap.name, func(t *testing.T) {
			var held atomic.Int64 // how long the service held its answer
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body) //nolint:errcheck // the body's time is the client's
				start := time.Now()
				time.Sleep(20 * time.Millisecond) // the bound checked is what was measured
				held.Store(int64(time.Since(start)))
			}))
			defer srv.Close()
			l := New(Adaptive)
			// A body sent slowly: it must not count.
			body := &slowBody{r: strings.NewReader(strings.Repeat("x", 64<<10)), each: time.Millisecond}
			req, err := http.NewRequest(http.MethodPut, srv.URL+"/k", body)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			resp, err := wrap.do(srv, l).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			total := time.Since(start)
			l.mu.Lock()
			fastest, read := l.w.Fastest[Write], l.w.Fastest[Read]
			l.mu.Unlock()
			if read != 0 {
				t.Fatalf("a PUT set the fastest latency of reads, %v", read)
			}
			if h := time.Duration(held.Load()); fastest < h {
				t.Fatalf("latency %v, shorter than the %v the service held its answer", fastest, h)
			}
			if sending := time.Duration(body.took.Load()); fastest > total-sending {
				t.Fatalf("latency %v includes the body, which took %v of the request's %v", fastest, sending, total)
			}
		})
	}
}

// slowBody reads r in pieces of 4 KiB, each after a pause of each, and
// records how long reading it took.
type slowBody struct {
	r     io.Reader
	each  time.Duration
	start time.Time
	took  atomic.Int64
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.start.IsZero() {
		b.start = time.Now()
	}
	time.Sleep(b.each)
	n, err := b.r.Read(p[:min(len(p), 4<<10)])
	if err == io.EOF {
		b.took.Store(int64(time.Since(b.start)))
	}
	return n, err
}
