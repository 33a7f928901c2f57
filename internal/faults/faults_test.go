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
	"github.com/commitptr/commitptr/internal/s3server"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
	"github.com/commitptr/commitptr/store/minio"
	"github.com/commitptr/commitptr/store/s3"
)

func TestMain(m *testing.M) { os.Exit(s3server.Main(m)) }

// only returns rates with one kind at probability 1.
func only(k faults.Kind) faults.Rates {
	var r faults.Rates
	r[k] = 1
	return r
}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		method, url string
		op          store.Op
		ok          bool
	}{
		{"GET", "http://h/b/k", store.OpGet, true},
		{"GET", "http://h/b/dir/k?x-id=GetObject", store.OpGet, true},
		{"GET", "http://h/b?list-type=2&prefix=p", store.OpList, true},
		{"GET", "http://h/b/?list-type=2", store.OpList, true},
		{"GET", "http://h/b?location=", 0, false},
		{"HEAD", "http://h/b/k", store.OpHead, true},
		{"HEAD", "http://h/b", 0, false},
		{"PUT", "http://h/b/k", store.OpPut, true},
		{"PUT", "http://h/b/k?partNumber=1&uploadId=u", store.OpPut, true},
		{"PUT", "http://h/b", 0, false},
		{"POST", "http://h/b/k?uploads=", store.OpPut, true},
		{"POST", "http://h/b/k?uploadId=u", store.OpPut, true},
		{"POST", "http://h/b?delete=", store.OpDeleteMany, true},
		{"DELETE", "http://h/b/k", store.OpDelete, true},
		{"DELETE", "http://h/b", 0, false},
	} {
		t.Run(c.method+" "+c.url, func(t *testing.T) {
			req := httptest.NewRequest(c.method, c.url, nil)
			op, ok := faults.Classify(req)
			assert.Equal(t, c.ok, ok)
			if c.ok {
				assert.Equal(t, c.op, op)
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
	io.Copy(io.Discard, req.Body)
	w.Header().Set("ETag", `"abc"`)
	if req.Method == http.MethodGet {
		io.WriteString(w, strings.Repeat("x", 1000))
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

func TestConcurrentUse(t *testing.T) {
	in := faults.New(faults.Config{Seed: 7, Rates: faults.Uniform(faults.Rates{faults.Lost: 0.2, faults.Latency: 0.2}), MaxLatency: time.Millisecond})
	s := in.Store(mem.New(), 2)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				key := string(rune('a' + g))
				s.Put(context.Background(), key, strings.NewReader("v"), store.PutOptions{})
				s.Head(context.Background(), key)
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

// remote returns the s3 or minio driver on a fresh bucket of the shared
// test server, sending its requests through in's transport.
func remote(t *testing.T, driver string, in *faults.Injector) store.Store {
	t.Helper()
	srv := s3server.Shared(t)
	srv.UseCredentials()
	bucket := srv.NewBucket(t)
	ctx := context.Background()
	var s store.Store
	var err error
	switch driver {
	case "s3":
		s, err = s3.New(ctx, s3.Options{Bucket: bucket, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
			HTTPClient: &http.Client{Transport: in.Transport(nil)}})
	case "minio":
		s, err = minio.New(ctx, minio.Options{Bucket: bucket, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
			Transport: in.Transport(nil)})
	}
	require.NoError(t, err)
	return s
}

// TestSDKRetryMeetsItsOwnWrite shows the shape every conditional-write
// caller must handle: the response to an applied create is lost, the SDK
// retries, and the retry is refused by the write it already made.
func TestSDKRetryMeetsItsOwnWrite(t *testing.T) {
	for _, driver := range []string{"s3", "minio"} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			// Half the creates lose their response; the SDK retries them
			// and the retry meets the create it already made.
			in := faults.New(faults.Config{Seed: 5, Rates: map[store.Op]faults.Rates{store.OpPut: {faults.Lost: 0.5}}})
			s := remote(t, driver, in)
			var spurious int
			for i := range 20 {
				key := "k" + string(rune('a'+i))
				_, err := s.Put(ctx, key, strings.NewReader("v"), store.PutOptions{IfNoneMatch: true})
				if errors.Is(err, store.ErrPrecondition) {
					spurious++
					_, herr := s.Head(ctx, key)
					for faults.IsInjected(herr) {
						_, herr = s.Head(ctx, key)
					}
					require.NoError(t, herr, "the refused create is there: it was our own")
				}
			}
			t.Logf("%d spurious 412s in 20 creates; %v", spurious, in.Counts())
			assert.Positive(t, spurious)
		})
	}
}

// TestDriversSurviveEveryFault runs plain operations through each fault
// kind on the real drivers: nothing panics, and each error is classified or
// wrapped with its operation.
func TestDriversSurviveEveryFault(t *testing.T) {
	for _, driver := range []string{"s3", "minio"} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			in := faults.New(faults.Config{Seed: 9, Rates: faults.Uniform(faults.Rates{
				faults.Lost: 0.05, faults.Reset: 0.05, faults.Refused: 0.05, faults.Internal: 0.05,
				faults.SlowDown: 0.05, faults.Conflict: 0.1, faults.Latency: 0.05, faults.Cut: 0.1,
			}), MaxLatency: 5 * time.Millisecond})
			s := remote(t, driver, in)
			for i := range 12 {
				key := "k" + string(rune('a'+i%5))
				s.Put(ctx, key, strings.NewReader(strings.Repeat("v", 100)), store.PutOptions{})
				if rc, _, err := s.Get(ctx, key); err == nil {
					io.ReadAll(rc)
					rc.Close()
				}
				s.Head(ctx, key)
				s.Delete(ctx, key, store.DeleteOptions{IfMatch: "nope"})
				s.DeleteMany(ctx, []string{key + "x"})
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
			io.WriteString(w, "<R><Contents><Key>k</Key><LastModified>2030-01-02T03:04:05.250Z</LastModified></Contents>"+
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
