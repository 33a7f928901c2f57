package faults_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/faults/remote"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// only returns rates with one kind at probability 1.
func only(k faults.Kind) faults.Rates {
	var r faults.Rates
	r[k] = 1
	return r
}

func TestClassify(t *testing.T) {
	const (
		put, get, head, del, list = store.OpPut, store.OpGet, store.OpHead, store.OpDelete, store.OpList
		none, ifMatch, create     = faults.Unconditional, faults.IfMatch, faults.IfNoneMatch
	)
	gcsObj := "http://h/storage/v1/b/bk/o/"
	gcsUp := "http://h/upload/storage/v1/b/bk/o?uploadType="
	azure := "http://127.0.0.1:10000/acct/c"
	for _, c := range []struct {
		p           faults.Protocol
		method, url string
		header      string // "Name: value", or ""
		want        faults.Request
		ok          bool
	}{
		{faults.S3, "GET", "http://h/b/k", "", faults.Request{Op: get, Key: "k", Cond: none}, true},
		{faults.S3, "GET", "http://h/b/dir/k?x-id=GetObject", "", faults.Request{Op: get, Key: "dir/k", Cond: none}, true},
		{faults.S3, "GET", "http://h/b?list-type=2&prefix=p", "", faults.Request{Op: list, Key: "p", Cond: none}, true},
		{faults.S3, "GET", "http://h/b/?list-type=2", "", faults.Request{Op: list, Cond: none}, true},
		{faults.S3, "GET", "http://h/b?location=", "", faults.Request{}, false},
		{faults.S3, "HEAD", "http://h/b/k", "", faults.Request{Op: head, Key: "k", Cond: none}, true},
		{faults.S3, "HEAD", "http://h/b", "", faults.Request{}, false},
		{faults.S3, "PUT", "http://h/b/k", "If-None-Match: *", faults.Request{Op: put, Key: "k", Cond: create}, true},
		{faults.S3, "PUT", "http://h/b/k", `If-Match: "e"`, faults.Request{Op: put, Key: "k", Cond: ifMatch}, true},
		{faults.S3, "PUT", "http://h/b/k?partNumber=1&uploadId=u", "", faults.Request{Op: put, Key: "k", Cond: none}, true},
		{faults.S3, "PUT", "http://h/b", "", faults.Request{}, false},
		{faults.S3, "POST", "http://h/b/k?uploads=", "", faults.Request{Op: put, Key: "k", Cond: none}, true},
		{faults.S3, "POST", "http://h/b/k?uploadId=u", "If-None-Match: *", faults.Request{Op: put, Key: "k", Cond: create}, true},
		{faults.S3, "POST", "http://h/b?delete=", "", faults.Request{Op: store.OpDeleteMany, Cond: none}, true},
		{faults.S3, "DELETE", "http://h/b/k", `If-Match: "e"`, faults.Request{Op: del, Key: "k", Cond: ifMatch}, true},
		{faults.S3, "DELETE", "http://h/b", "", faults.Request{}, false},

		{faults.GCS, "POST", gcsUp + "multipart&name=dir%2Fk+1&ifGenerationMatch=0", "", faults.Request{Op: put, Key: "dir/k 1", Cond: create}, true},
		{faults.GCS, "POST", gcsUp + "multipart&name=k&ifGenerationMatch=17", "", faults.Request{Op: put, Key: "k", Cond: ifMatch}, true},
		{faults.GCS, "POST", gcsUp + "resumable&name=big", "", faults.Request{Op: put, Key: "big", Cond: none}, true},
		{faults.GCS, "PUT", gcsUp + "resumable&upload_id=u", "", faults.Request{Op: put, Cond: none}, true},
		{faults.GCS, "GET", gcsObj + "dir%2Fk%201?alt=json", "", faults.Request{Op: head, Key: "dir/k 1", Cond: none}, true},
		{faults.GCS, "GET", "http://h/storage/v1/b/bk/o?prefix=dir%2F&maxResults=1000", "", faults.Request{Op: list, Key: "dir/", Cond: none}, true},
		{faults.GCS, "DELETE", gcsObj + "k?ifGenerationMatch=5", "", faults.Request{Op: del, Key: "k", Cond: ifMatch}, true},
		{faults.GCS, "DELETE", gcsObj + "k", "", faults.Request{Op: del, Key: "k", Cond: none}, true},
		{faults.GCS, "GET", "http://h/bk/dir%2Fk%201", "", faults.Request{Op: get, Key: "dir/k 1", Cond: none}, true},
		{faults.GCS, "GET", "http://h/bk/k", "X-Goog-If-Generation-Match: 9", faults.Request{Op: get, Key: "k", Cond: ifMatch}, true},
		{faults.GCS, "POST", "http://h/storage/v1/b?project=p", "", faults.Request{}, false},
		{faults.GCS, "GET", "http://h/storage/v1/b/bk", "", faults.Request{}, false},
		{faults.GCS, "DELETE", "http://h/storage/v1/b/bk", "", faults.Request{}, false},
		{faults.GCS, "POST", gcsObj + "src/rewriteTo/b/bk/o/dst", "", faults.Request{}, false},
		{faults.GCS, "GET", "http://h/_internal/healthcheck", "", faults.Request{}, false},
		{faults.GCS, "GET", "http://h/bk", "", faults.Request{}, false},

		{faults.Azure, "PUT", azure + "/dir%2Fk%201", "If-None-Match: *", faults.Request{Op: put, Key: "dir/k 1", Cond: create}, true},
		{faults.Azure, "PUT", azure + "/k", `If-Match: "0x1"`, faults.Request{Op: put, Key: "k", Cond: ifMatch}, true},
		{faults.Azure, "PUT", azure + "/k?comp=block&blockid=AA%3D%3D", "", faults.Request{Op: put, Key: "k", Cond: none}, true},
		{faults.Azure, "PUT", azure + "/k?comp=blocklist", "", faults.Request{Op: put, Key: "k", Cond: none}, true},
		{faults.Azure, "GET", azure + "/dir/k", "", faults.Request{Op: get, Key: "dir/k", Cond: none}, true},
		{faults.Azure, "HEAD", azure + "/k", "", faults.Request{Op: head, Key: "k", Cond: none}, true},
		{faults.Azure, "DELETE", azure + "/k", `If-Match: "0x1"`, faults.Request{Op: del, Key: "k", Cond: ifMatch}, true},
		{faults.Azure, "GET", azure + "?restype=container&comp=list&prefix=p%2F", "", faults.Request{Op: list, Key: "p/", Cond: none}, true},
		{faults.Azure, "PUT", azure + "?restype=container", "", faults.Request{}, false},
		{faults.Azure, "DELETE", azure + "?restype=container", "", faults.Request{}, false},
		{faults.Azure, "GET", "http://127.0.0.1:10000/acct?comp=list", "", faults.Request{}, false},
		{faults.Azure, "PUT", "https://acct.blob.core.windows.net/c/dir/k", "", faults.Request{Op: put, Key: "dir/k", Cond: none}, true},
		{faults.Azure, "GET", "https://acct.blob.core.windows.net/c?restype=container&comp=list", "", faults.Request{Op: list, Cond: none}, true},
		{faults.Azure, "GET", "http://[::1]:10000/acct/c/k", "", faults.Request{Op: get, Key: "k", Cond: none}, true},
	} {
		t.Run(c.p.String()+" "+c.method+" "+c.url, func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.url, nil)
			if name, value, ok := strings.Cut(c.header, ": "); ok {
				req.Header.Set(name, value)
			}
			got, ok := c.p.Classify(req)
			assert.Equal(t, c.ok, ok)
			if c.ok {
				assert.Equal(t, c.want, got)
			}
		})
	}
}

// classified records the classification of each request a driver sends.
type classified struct {
	p    faults.Protocol
	base http.RoundTripper
	mu   sync.Mutex
	reqs []faults.Request
}

func (c *classified) RoundTrip(r *http.Request) (*http.Response, error) {
	if req, ok := c.p.Classify(r); ok {
		c.mu.Lock()
		c.reqs = append(c.reqs, req)
		c.mu.Unlock()
	}
	return c.base.RoundTrip(r)
}

// take returns the requests recorded since the last take.
func (c *classified) take() []faults.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reqs
	c.reqs = nil
	return r
}

// TestClassifyDriverRequests classifies the requests each real driver
// sends for every store operation: a rule aimed at an operation, key and
// precondition strikes the requests that carry them, on every protocol.
func TestClassifyDriverRequests(t *testing.T) {
	const key = "dir/k 1"
	for _, driver := range []string{"s3", "minio", "gcs", "azblob"} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			rec := &classified{p: remote.Protocol(driver)}
			s := remote.OpenWith(t, driver, func(base http.RoundTripper) http.RoundTripper {
				rec.base = base
				return rec
			}).Faulty
			one := func(op store.Op, key string, cond faults.Cond) []faults.Request {
				return []faults.Request{{Op: op, Key: key, Cond: cond}}
			}
			a, err := s.Put(ctx, key, strings.NewReader("v1"), store.PutOptions{IfNoneMatch: true})
			require.NoError(t, err)
			assert.Equal(t, one(store.OpPut, key, faults.IfNoneMatch), rec.take(), "create")
			a, err = s.Put(ctx, key, strings.NewReader("v2"), store.PutOptions{IfMatch: a.ETag})
			require.NoError(t, err)
			assert.Equal(t, one(store.OpPut, key, faults.IfMatch), rec.take(), "conditional write")
			_, err = s.Put(ctx, "other", strings.NewReader("v"), store.PutOptions{})
			require.NoError(t, err)
			assert.Equal(t, one(store.OpPut, "other", faults.Unconditional), rec.take(), "write")
			rc, _, err := s.Get(ctx, key)
			require.NoError(t, err)
			_, err = io.ReadAll(rc)
			require.NoError(t, err)
			rc.Close()
			assert.Equal(t, one(store.OpGet, key, faults.Unconditional), rec.take(), "get")
			_, err = s.Head(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, one(store.OpHead, key, faults.Unconditional), rec.take(), "head")
			_, err = s.List(ctx, store.ListRequest{Prefix: "dir/"})
			require.NoError(t, err)
			assert.Equal(t, one(store.OpList, "dir/", faults.Unconditional), rec.take(), "list")
			require.NoError(t, s.Delete(ctx, key, store.DeleteOptions{IfMatch: a.ETag}))
			assert.Equal(t, one(store.OpDelete, key, faults.IfMatch), rec.take(), "conditional delete")
			require.NoError(t, s.Delete(ctx, "other", store.DeleteOptions{}))
			assert.Equal(t, one(store.OpDelete, "other", faults.Unconditional), rec.take(), "delete")
			require.NoError(t, s.DeleteMany(ctx, []string{"x", "y"}))
			if driver == "s3" || driver == "minio" {
				assert.Equal(t, one(store.OpDeleteMany, "", faults.Unconditional), rec.take(), "delete-many")
			} else {
				assert.ElementsMatch(t, append(one(store.OpDelete, "x", faults.Unconditional), one(store.OpDelete, "y", faults.Unconditional)...),
					rec.take(), "delete-many: a delete per key")
			}
		})
	}
}

// recorder is an S3-ish test server that counts the requests it receives.
type recorder struct {
	n atomic.Int64
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.n.Add(1)
	// The tests judge what the client saw, not what the server could send.
	_, _ = io.Copy(io.Discard, req.Body)
	w.Header().Set("ETag", `"abc"`)
	if req.Method == http.MethodGet {
		_, _ = io.WriteString(w, strings.Repeat("x", 1000))
	}
}

func TestTransport(t *testing.T) {
	for _, c := range []struct {
		name      string
		kind      faults.Kind
		method    string
		cond      bool
		sent      bool // the server received the request
		status    int  // the response status; 0 for an error
		code      string
		timeout   bool
		bodyError bool
	}{
		{name: "lost", kind: faults.Lost, method: "PUT", sent: true, timeout: true},
		{name: "reset", kind: faults.Reset, method: "DELETE", sent: true},
		{name: "refused", kind: faults.Refused, method: "PUT"},
		{name: "500", kind: faults.Internal, method: "PUT", status: 500, code: "InternalError"},
		{name: "503", kind: faults.SlowDown, method: "GET", status: 503, code: "SlowDown"},
		{name: "409 conditional", kind: faults.Conflict, method: "PUT", cond: true, status: 409, code: "ConditionalRequestConflict"},
		{name: "409 skips unconditional", kind: faults.Conflict, method: "PUT", sent: true, status: 200},
		{name: "latency", kind: faults.Latency, method: "GET", sent: true, status: 200},
		{name: "held", kind: faults.Held, method: "PUT", sent: true, status: 200},
		{name: "cut", kind: faults.Cut, method: "GET", sent: true, status: 200, bodyError: true},
		{name: "cut skips put", kind: faults.Cut, method: "PUT", sent: true, status: 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			in := faults.New(faults.Config{Seed: 1, Rates: faults.Uniform(only(c.kind)), MaxLatency: time.Millisecond})
			client := &http.Client{Transport: in.Transport(nil)}
			req, err := http.NewRequest(c.method, srv.URL+"/bucket/key", strings.NewReader("body"))
			require.NoError(t, err)
			if c.cond {
				req.Header.Set("If-Match", `"abc"`)
			}
			resp, err := client.Do(req)
			if c.status == 0 {
				require.Error(t, err)
				assert.True(t, faults.IsInjected(err), "%v", err)
				var ne net.Error
				require.ErrorAs(t, err, &ne)
				assert.Equal(t, c.timeout, ne.Timeout())
			} else {
				require.NoError(t, err)
				defer resp.Body.Close()
				assert.Equal(t, c.status, resp.StatusCode)
				body, rerr := io.ReadAll(resp.Body)
				if c.bodyError {
					require.Error(t, rerr)
					assert.Contains(t, rerr.Error(), "connection reset")
					assert.Less(t, len(body), 1000)
				} else {
					require.NoError(t, rerr)
				}
				if c.code != "" {
					assert.Contains(t, string(body), "<Code>"+c.code+"</Code>")
					assert.Equal(t, c.kind.String(), resp.Header.Get(faults.FaultHeader))
				}
			}
			assert.Equal(t, c.sent, rec.n.Load() == 1, "sent")
		})
	}
}

// TestAnswers: the faults that are not sent are answered as each API's
// servers answer them, and a 409 ConditionalRequestConflict, which only S3
// has, is never injected on the others.
func TestAnswers(t *testing.T) {
	for _, c := range []struct {
		name   string
		p      faults.Protocol
		kind   faults.Kind
		method string
		path   string // under the server's URL
		status int
		want   string // in the body, or in the header for Azure
	}{
		{"s3 500", faults.S3, faults.Internal, "PUT", "/b/k", 500, "<Code>InternalError</Code>"},
		{"s3 503", faults.S3, faults.SlowDown, "GET", "/b/k", 503, "<Code>SlowDown</Code>"},
		{"s3 409", faults.S3, faults.Conflict, "PUT", "/b/k", 409, "<Code>ConditionalRequestConflict</Code>"},
		{"gcs 500", faults.GCS, faults.Internal, "POST", "/upload/storage/v1/b/bk/o?uploadType=multipart&name=k&ifGenerationMatch=0", 500, `"reason":"backendError"`},
		{"gcs 429", faults.GCS, faults.SlowDown, "DELETE", "/storage/v1/b/bk/o/k", 429, `"reason":"rateLimitExceeded"`},
		{"gcs download 500", faults.GCS, faults.Internal, "GET", "/bk/k", 500, "<Code>InternalError</Code>"},
		{"gcs no 409", faults.GCS, faults.Conflict, "POST", "/upload/storage/v1/b/bk/o?uploadType=multipart&name=k&ifGenerationMatch=0", 200, ""},
		{"azure 500", faults.Azure, faults.Internal, "PUT", "/acct/c/k", 500, "InternalError"},
		{"azure 503", faults.Azure, faults.SlowDown, "GET", "/acct/c/k", 503, "ServerBusy"},
		{"azure no 409", faults.Azure, faults.Conflict, "PUT", "/acct/c/k", 200, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			in := faults.New(faults.Config{Rates: faults.Uniform(only(c.kind))})
			client := &http.Client{Transport: in.TransportFor(c.p, nil)}
			req, err := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader("body"))
			require.NoError(t, err)
			req.Header.Set("If-None-Match", "*")
			resp, err := client.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, c.status, resp.StatusCode)
			if c.status == 200 {
				assert.EqualValues(t, 1, rec.n.Load(), "sent")
				assert.Zero(t, in.Counts().Total(), "not counted")
				return
			}
			assert.Zero(t, rec.n.Load(), "not sent")
			assert.Equal(t, c.kind.String(), resp.Header.Get(faults.FaultHeader))
			assert.EqualValues(t, len(body), resp.ContentLength)
			if c.p == faults.Azure {
				assert.Equal(t, c.want, resp.Header.Get("X-Ms-Error-Code"))
			}
			assert.Contains(t, string(body), c.want)
		})
	}
}

// TestRules: a rule strikes the requests of its operation, key prefix and
// precondition, as many times as it says and before the drawn faults, and
// its Then runs while the request is held: after the store applied it for
// held, lost and reset responses, before it is sent for latency, instead
// of sending it for the failures.
func TestRules(t *testing.T) {
	t.Run("aim", func(t *testing.T) {
		ctx := context.Background()
		in := faults.New(faults.Config{Rates: faults.Uniform(only(faults.Refused)), MaxLatency: time.Millisecond})
		in.Add(faults.Rule{Op: store.OpPut, Key: "p/", Cond: faults.IfMatch, Kind: faults.Conflict, Times: 1})
		in.Add(faults.Rule{Op: store.OpPut, Key: "p/", Kind: faults.Latency, Times: 4})
		in.Add(faults.Rule{Op: store.OpPut, Kind: faults.Internal})
		m := mem.New()
		s := in.Store(m, 0)
		put := func(key string, opts store.PutOptions) error {
			_, err := s.Put(ctx, key, strings.NewReader("v"), opts)
			return err
		}
		require.NoError(t, put("p/a", store.PutOptions{IfNoneMatch: true}), "the second rule")
		a, err := m.Head(ctx, "p/a")
		require.NoError(t, err)
		require.ErrorIs(t, put("p/a", store.PutOptions{IfMatch: a.ETag}), store.ErrConflict, "the first rule")
		require.NoError(t, put("p/a", store.PutOptions{IfMatch: a.ETag}), "the first rule struck once")
		require.NoError(t, put("p/b", store.PutOptions{}))
		require.NoError(t, put("p/c", store.PutOptions{}))
		err = put("p/d", store.PutOptions{})
		require.Error(t, err, "the second rule struck four times, the third strikes every put")
		assert.Contains(t, err.Error(), "injected 500")
		_, _, err = s.Get(ctx, "p/a")
		assert.Contains(t, err.Error(), "connection refused", "gets are drawn")
		in.Clear()
		require.Error(t, put("p/e", store.PutOptions{}), "drawn once the rules are gone")
		c := in.Counts()
		assert.EqualValues(t, 1, c.Injected[store.OpPut][faults.Conflict])
		assert.EqualValues(t, 4, c.Injected[store.OpPut][faults.Latency])
		assert.EqualValues(t, 1, c.Injected[store.OpPut][faults.Internal])
		assert.EqualValues(t, 1, c.Injected[store.OpPut][faults.Refused])
	})

	t.Run("then", func(t *testing.T) {
		for _, c := range []struct {
			kind         faults.Kind
			sentAtThen   bool // the server had the request when Then ran
			answered     bool // the client got the server's response
			sentInTheEnd bool
		}{
			{faults.Held, true, true, true},
			{faults.Lost, true, false, true},
			{faults.Reset, true, false, true},
			{faults.Latency, false, true, true},
			{faults.Refused, false, false, false},
			{faults.Internal, false, false, false},
			{faults.Cut, true, true, true},
		} {
			t.Run(c.kind.String(), func(t *testing.T) {
				rec := &recorder{}
				srv := httptest.NewServer(rec)
				defer srv.Close()
				in := faults.New(faults.Config{})
				var atThen int64 = -1
				in.Add(faults.Rule{Op: store.OpGet, Key: "k", Kind: c.kind, Times: 1, Then: func() { atThen = rec.n.Load() }})
				client := &http.Client{Transport: in.TransportFor(faults.Azure, nil)}
				resp, err := client.Get(srv.URL + "/acct/c/k")
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body) // a cut body is one of the faults
					resp.Body.Close()
				}
				assert.Equal(t, c.sentAtThen, atThen == 1, "sent when Then ran")
				assert.Equal(t, c.answered, err == nil && resp.StatusCode == http.StatusOK, "answered: %v", err)
				assert.Equal(t, c.sentInTheEnd, rec.n.Load() == 1)
				resp, err = client.Get(srv.URL + "/acct/c/k")
				require.NoError(t, err, "the rule struck once")
				resp.Body.Close()
			})
		}
	})
}

func TestCountsAndDeterminism(t *testing.T) {
	rates := faults.Rates{faults.Lost: 0.1, faults.SlowDown: 0.1, faults.Refused: 0.1}
	draw := func() []bool {
		in := faults.New(faults.Config{Seed: 42, Rates: map[store.Op]faults.Rates{store.OpGet: rates}})
		s := in.Store(mem.New(), 0)
		var out []bool
		for range 200 {
			_, _, err := s.Get(context.Background(), "missing")
			out = append(out, errors.Is(err, store.ErrNotExist))
		}
		c := in.Counts()
		assert.EqualValues(t, 200, c.Requests[store.OpGet])
		assert.EqualValues(t, 0, c.Requests[store.OpPut])
		assert.InDelta(t, 60, c.Total(), 25)
		return out
	}
	assert.Equal(t, draw(), draw(), "the same seed gives the same faults")
}

func TestStoreFaults(t *testing.T) {
	ctx := context.Background()
	put := func(s store.Store, opts store.PutOptions) error {
		_, err := s.Put(ctx, "k", strings.NewReader("v2"), opts)
		return err
	}

	t.Run("lost create is applied, and the retry gets a spurious 412", func(t *testing.T) {
		m := mem.New()
		in := faults.New(faults.Config{Rates: map[store.Op]faults.Rates{store.OpPut: only(faults.Lost)}})
		s := in.Store(m, 1)
		// The first try is applied and lost; so is the retry (rate 1), so
		// the caller hears of the lost response.
		err := put(s, store.PutOptions{IfNoneMatch: true})
		require.Error(t, err)
		assert.True(t, faults.IsInjected(err))
		_, err = m.Head(ctx, "k")
		require.NoError(t, err, "the write was applied")
	})

	t.Run("retry after a lost response meets its own write", func(t *testing.T) {
		m := mem.New()
		in := faults.New(faults.Config{Seed: 3, Rates: map[store.Op]faults.Rates{store.OpPut: {faults.Lost: 0.5}}})
		s := in.Store(m, 3)
		var spurious int
		for i := range 50 {
			key := "k" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			_, err := s.Put(ctx, key, strings.NewReader("v"), store.PutOptions{IfNoneMatch: true})
			if errors.Is(err, store.ErrPrecondition) {
				spurious++
			}
		}
		assert.Positive(t, spurious, "some creates were applied, then refused on retry")
	})

	t.Run("refused is not applied", func(t *testing.T) {
		m := mem.New()
		in := faults.New(faults.Config{Rates: map[store.Op]faults.Rates{store.OpPut: only(faults.Refused)}})
		require.Error(t, put(in.Store(m, 2), store.PutOptions{}))
		_, err := m.Head(ctx, "k")
		require.ErrorIs(t, err, store.ErrNotExist)
		assert.EqualValues(t, 3, in.Counts().Injected[store.OpPut][faults.Refused], "one try and two retries")
	})

	t.Run("409 only on conditional writes", func(t *testing.T) {
		in := faults.New(faults.Config{Rates: faults.Uniform(only(faults.Conflict))})
		s := in.Store(mem.New(), 2)
		require.NoError(t, put(s, store.PutOptions{}))
		require.ErrorIs(t, put(s, store.PutOptions{IfMatch: "x"}), store.ErrConflict)
		require.ErrorIs(t, s.Delete(ctx, "k", store.DeleteOptions{IfMatch: "x"}), store.ErrConflict)
	})

	t.Run("cut body", func(t *testing.T) {
		m := mem.New()
		_, err := m.Put(ctx, "k", bytes.NewReader(make([]byte, 100)), store.PutOptions{})
		require.NoError(t, err)
		in := faults.New(faults.Config{Rates: faults.Uniform(only(faults.Cut))})
		rc, _, err := in.Store(m, 0).Get(ctx, "k")
		require.NoError(t, err)
		defer rc.Close()
		b, err := io.ReadAll(rc)
		require.Error(t, err)
		assert.Less(t, len(b), 100)
	})

	t.Run("disabled", func(t *testing.T) {
		in := faults.New(faults.Config{Rates: faults.Uniform(only(faults.Refused))})
		in.SetEnabled(false)
		require.NoError(t, put(in.Store(mem.New(), 0), store.PutOptions{}))
		assert.Zero(t, in.Counts().TotalRequests())
	})
}

// TestStoreRules: on a NewStore, only rules strike, each once as its kind
// says: Held answers as the store did even if Then ends the caller's
// context, Retried answers the SDK's resend, Late lands at Release, Paused
// runs Then partway through the body, Err replaces the kind's error, and
// a multi-object delete matches by its first key.
func TestStoreRules(t *testing.T) {
	ctx := context.Background()
	read := func(t *testing.T, s store.Store, key string) string {
		t.Helper()
		rc, _, err := s.Get(ctx, key)
		require.NoError(t, err)
		defer rc.Close()
		b, err := io.ReadAll(rc)
		require.NoError(t, err)
		return string(b)
	}

	t.Run("held", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		m := mem.New()
		fs := faults.NewStore(m)
		fs.Add(faults.Rule{Op: store.OpPut, Key: "k", Kind: faults.Held, Times: 1, Then: cancel})
		_, err := fs.Put(ctx, "k", strings.NewReader("v"), store.PutOptions{})
		require.NoError(t, err, "the answer came before the context ended")
		assert.Equal(t, "v", read(t, m, "k"))
	})

	t.Run("retried", func(t *testing.T) {
		m := mem.New()
		fs := faults.NewStore(m)
		fs.Add(faults.Rule{Op: store.OpPut, Suffix: "/k", Kind: faults.Retried, Times: 1})
		_, err := fs.Put(ctx, "a/k", strings.NewReader("v"), store.PutOptions{IfNoneMatch: true})
		require.ErrorIs(t, err, store.ErrPrecondition, "the resend meets the write it made")
		assert.Equal(t, "v", read(t, m, "a/k"))
		_, err = fs.Put(ctx, "b/k", strings.NewReader("v"), store.PutOptions{IfNoneMatch: true})
		require.NoError(t, err, "the rule struck once")
	})

	t.Run("late", func(t *testing.T) {
		m := mem.New()
		fs := faults.NewStore(m)
		kept := false
		fs.Add(faults.Rule{Op: store.OpPut, Key: "k", Kind: faults.Late, Times: 1, Then: func() { kept = true }})
		_, err := fs.Put(ctx, "k", strings.NewReader("late"), store.PutOptions{})
		require.ErrorIs(t, err, faults.ErrInjected)
		assert.True(t, kept)
		_, err = m.Head(ctx, "k")
		require.ErrorIs(t, err, store.ErrNotExist, "kept back")
		_, err = fs.Put(ctx, "k", strings.NewReader("now"), store.PutOptions{})
		require.NoError(t, err)
		require.NoError(t, fs.Release())
		assert.Equal(t, "late", read(t, m, "k"), "it lands at Release, after the later write")
	})

	t.Run("paused", func(t *testing.T) {
		m := mem.New()
		fs := faults.NewStore(m)
		var readAtThen int
		src := &countingReader{r: bytes.NewReader(make([]byte, 1000))}
		fs.Add(faults.Rule{Op: store.OpPut, Key: "k", Kind: faults.Paused, At: 300, Times: 1, Then: func() { readAtThen = src.n }})
		_, err := fs.Put(ctx, "k", src, store.PutOptions{})
		require.NoError(t, err)
		assert.Equal(t, 300, readAtThen)
		assert.Len(t, read(t, m, "k"), 1000)
	})

	t.Run("err and delete-many", func(t *testing.T) {
		fs := faults.NewStore(mem.New())
		denied := errors.New("denied")
		fs.Add(faults.Rule{Op: store.OpDeleteMany, Key: "b", Kind: faults.Refused, Err: denied})
		require.NoError(t, fs.DeleteMany(ctx, []string{"a", "b"}), "matched by the first key")
		require.ErrorIs(t, fs.DeleteMany(ctx, []string{"b", "a"}), denied)
		fs.Clear()
		require.NoError(t, fs.DeleteMany(ctx, []string{"b", "a"}))
	})
}

// TestStoreGetRangeSuffersTheFaultsOfAGet: a ranged GET is a GET to the
// rules and the rates: a rule on gets strikes it, a held one answers with
// what the store had when the request was made, and a cut breaks its body
// off halfway through the range.
func TestStoreGetRangeSuffersTheFaultsOfAGet(t *testing.T) {
	ctx := context.Background()
	data := make([]byte, 100)
	for i := range data {
		data[i] = byte(i)
	}
	newMem := func(t *testing.T) *mem.Store {
		m := mem.New()
		_, err := m.Put(ctx, "k", bytes.NewReader(data), store.PutOptions{})
		require.NoError(t, err)
		return m
	}
	readRange := func(s store.Store, off, n int64) ([]byte, error) {
		rc, _, err := s.GetRange(ctx, "k", off, n)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}

	t.Run("rule", func(t *testing.T) {
		fs := faults.NewStore(newMem(t))
		fs.Add(faults.Rule{Op: store.OpGet, Key: "k", Kind: faults.Refused, Times: 1})
		_, err := readRange(fs, 1, 2)
		require.ErrorIs(t, err, faults.ErrInjected)
		assert.Contains(t, err.Error(), `get "k"`)
		got, err := readRange(fs, 1, 2)
		require.NoError(t, err, "the rule struck once")
		assert.Equal(t, data[1:3], got)
	})

	t.Run("held", func(t *testing.T) {
		m := newMem(t)
		fs := faults.NewStore(m)
		replaced := false
		fs.Add(faults.Rule{Op: store.OpGet, Key: "k", Kind: faults.Held, Times: 1, Then: func() {
			_, err := m.Put(ctx, "k", strings.NewReader("replaced"), store.PutOptions{})
			require.NoError(t, err)
			replaced = true
		}})
		got, err := readRange(fs, 5, 3)
		require.NoError(t, err)
		assert.True(t, replaced, "the rule did not strike")
		assert.Equal(t, data[5:8], got, "the answer of the request made before Then")
	})

	t.Run("cut", func(t *testing.T) {
		in := faults.New(faults.Config{Rates: faults.Uniform(only(faults.Cut))})
		got, err := readRange(in.Store(newMem(t), 0), 10, 40)
		require.ErrorIs(t, err, faults.ErrInjected)
		assert.Equal(t, data[10:30], got, "cut halfway through the range")
		assert.EqualValues(t, 1, in.Counts().Requests[store.OpGet])
	})
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestConcurrentUse(t *testing.T) {
	in := faults.New(faults.Config{Seed: 7, Rates: faults.Uniform(faults.Rates{faults.Lost: 0.2, faults.Latency: 0.2}), MaxLatency: time.Millisecond})
	s := in.Store(mem.New(), 2)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				key := string(rune('a' + g))
				// Errors are the faults injected; the race detector judges.
				_, _ = s.Put(context.Background(), key, strings.NewReader("v"), store.PutOptions{})
				_, _ = s.Head(context.Background(), key)
				_ = i
			}
		})
	}
	wg.Wait()
	c := in.Counts()
	assert.Positive(t, c.ByKind()[faults.Lost])
	assert.Positive(t, c.ByKind()[faults.Latency])
	t.Log(c)
}

// TestSDKRetryMeetsItsOwnWrite shows the shape every conditional-write
// caller must handle, on every protocol: the response to an applied write
// is lost, the SDK retries, and the retry is refused by the write it
// already made. A create and a write of a version then fail with a failed
// precondition, and a conditional delete succeeds (its key is gone). When
// every attempt's response is lost, the error is the lost response, never
// a failed precondition, a conflict or a missing key: the outcome is
// unknown.
func TestSDKRetryMeetsItsOwnWrite(t *testing.T) {
	for _, driver := range []string{"s3", "minio", "gcs", "azblob"} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			in := faults.New(faults.Config{})
			p := remote.Open(t, driver, in)
			s := p.Faulty
			lose := func(op store.Op, cond faults.Cond, times int) {
				in.Clear()
				in.Add(faults.Rule{Op: op, Key: "k", Cond: cond, Kind: faults.Lost, Times: times})
			}
			unknown := func(err error) {
				t.Helper()
				require.Error(t, err)
				assert.True(t, faults.IsInjected(err), "%v", err)
				for _, class := range []error{store.ErrPrecondition, store.ErrConflict, store.ErrNotExist} {
					assert.NotErrorIs(t, err, class)
				}
			}
			body := func() string {
				t.Helper()
				rc, _, err := p.Clean.Get(ctx, "k")
				require.NoError(t, err)
				defer rc.Close()
				b, err := io.ReadAll(rc)
				require.NoError(t, err)
				return string(b)
			}

			lose(store.OpPut, faults.IfNoneMatch, 1)
			_, err := s.Put(ctx, "k", strings.NewReader("v1"), store.PutOptions{IfNoneMatch: true})
			require.ErrorIs(t, err, store.ErrPrecondition, "the create's retry meets the create")
			assert.Equal(t, "v1", body(), "the refused create is there: it was our own")

			a, err := p.Clean.Head(ctx, "k")
			require.NoError(t, err)
			lose(store.OpPut, faults.IfMatch, 1)
			_, err = s.Put(ctx, "k", strings.NewReader("v2"), store.PutOptions{IfMatch: a.ETag})
			require.ErrorIs(t, err, store.ErrPrecondition, "the write's retry meets the write")
			assert.Equal(t, "v2", body())

			a, err = p.Clean.Head(ctx, "k")
			require.NoError(t, err)
			lose(store.OpPut, faults.IfMatch, 0)
			_, err = s.Put(ctx, "k", strings.NewReader("v3"), store.PutOptions{IfMatch: a.ETag})
			unknown(err)
			assert.Equal(t, "v3", body())

			a, err = p.Clean.Head(ctx, "k")
			require.NoError(t, err)
			lose(store.OpDelete, faults.IfMatch, 1)
			require.NoError(t, s.Delete(ctx, "k", store.DeleteOptions{IfMatch: a.ETag}), "the delete's retry finds the key gone")
			_, err = p.Clean.Head(ctx, "k")
			require.ErrorIs(t, err, store.ErrNotExist)

			lose(store.OpPut, faults.IfNoneMatch, 0)
			_, err = s.Put(ctx, "k", strings.NewReader("v4"), store.PutOptions{IfNoneMatch: true})
			unknown(err)
			assert.Equal(t, "v4", body())
			c := in.Counts()
			assert.GreaterOrEqual(t, c.Injected[store.OpPut][faults.Lost], int64(1+1+2+2), "the SDK retried: %v", c)
		})
	}
}

// TestDriversSurviveEveryFault runs plain operations through each fault
// kind on the real drivers: nothing panics, and each error is classified or
// wrapped with its operation.
func TestDriversSurviveEveryFault(t *testing.T) {
	for _, driver := range []string{"s3", "minio", "gcs", "azblob"} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			in := faults.New(faults.Config{Seed: 9, Rates: faults.Uniform(faults.Rates{
				faults.Lost: 0.05, faults.Reset: 0.05, faults.Refused: 0.05, faults.Internal: 0.05,
				faults.SlowDown: 0.05, faults.Conflict: 0.1, faults.Latency: 0.05, faults.Cut: 0.1, faults.Held: 0.05,
			}), MaxLatency: 5 * time.Millisecond})
			s := remote.Open(t, driver, in).Faulty
			for i := range 12 {
				key := "k" + string(rune('a'+i%5))
				// Errors are the faults injected: only the requests count here.
				_, _ = s.Put(ctx, key, strings.NewReader(strings.Repeat("v", 100)), store.PutOptions{})
				if rc, _, err := s.Get(ctx, key); err == nil {
					_, _ = io.ReadAll(rc)
					rc.Close()
				}
				_, _ = s.Head(ctx, key)
				_ = s.Delete(ctx, key, store.DeleteOptions{IfMatch: "nope"})
				_ = s.DeleteMany(ctx, []string{key + "x"})
				_, err := s.List(ctx, store.ListRequest{Prefix: "k"})
				if err != nil {
					var oe *store.OpError
					assert.ErrorAs(t, err, &oe)
				}
			}
			c := in.Counts()
			t.Log(c)
			assert.Positive(t, c.Total())
		})
	}
}

// TestClockTransport checks that the store's clock is shifted everywhere a
// client reads it, and that DropDate removes only the chosen Dates.
func TestClockTransport(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Date", at.Format(http.TimeFormat))
		w.Header().Set("Last-Modified", at.Format(http.TimeFormat))
		if req.URL.Query().Has("list-type") {
			w.Header().Set("Content-Type", "application/xml")
			_, _ = io.WriteString(w, "<R><Contents><Key>k</Key><LastModified>2030-01-02T03:04:05.250Z</LastModified></Contents>"+
				"<Upload><Initiated>2030-01-02T03:04:05Z</Initiated></Upload></R>")
		}
	}))
	defer srv.Close()
	tr := faults.NewClockTransport(nil, -10*time.Minute)
	client := &http.Client{Transport: tr}
	get := func(url string) (*http.Response, string) {
		t.Helper()
		resp, err := client.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.EqualValues(t, len(b), resp.ContentLength)
		return resp, string(b)
	}
	behind := at.Add(-10 * time.Minute).Format(http.TimeFormat)

	resp, body := get(srv.URL + "/b?list-type=2")
	assert.Equal(t, behind, resp.Header.Get("Date"))
	assert.Equal(t, behind, resp.Header.Get("Last-Modified"))
	assert.Equal(t, "<R><Contents><Key>k</Key><LastModified>2030-01-02T02:54:05.25Z</LastModified></Contents>"+
		"<Upload><Initiated>2030-01-02T02:54:05Z</Initiated></Upload></R>", body)

	tr.DropDate(store.OpGet)
	resp, _ = get(srv.URL + "/b/k")
	assert.Empty(t, resp.Header.Values("Date"))
	assert.Equal(t, behind, resp.Header.Get("Last-Modified"))
	resp, _ = get(srv.URL + "/b?list-type=2")
	assert.Equal(t, behind, resp.Header.Get("Date"), "only GETs of objects lose their Date")

	tr.DropDate(faults.AllOps...)
	resp, _ = get(srv.URL + "/b?uploads=")
	assert.Empty(t, resp.Header.Values("Date"), "a bucket-level GET counts as a listing")
	tr.DropDate()
	resp, _ = get(srv.URL + "/b/k")
	assert.Equal(t, behind, resp.Header.Get("Date"))
}
