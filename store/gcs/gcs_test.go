package gcs_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/gcs"
	"github.com/commitptr/commitptr/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func newStore(t *testing.T) *gcs.Store {
	t.Helper()
	srv := testenv.GCS(t)
	s, err := gcs.New(context.Background(), gcs.Options{Bucket: srv.NewBucket(t), Endpoint: srv.Endpoint})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	srv := testenv.GCS(t)
	storetest.RunWith(t, srv.Conformance, func(t *testing.T) store.Store { return newStore(t) })
}

// recorder is a Transport that records the requests it sends and can
// replace or drop the Date header of responses.
type recorder struct {
	mu     sync.Mutex
	reqs   []string // "METHOD path?uploadType"
	date   string   // if not empty, replaces every response's Date
	noDate bool     // drops every response's Date
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	desc := req.Method + " " + req.URL.Path
	if u := req.URL.Query().Get("uploadType"); u != "" {
		desc += "?uploadType=" + u
	}
	r.reqs = append(r.reqs, desc)
	date, noDate := r.date, r.noDate
	r.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		switch {
		case noDate:
			resp.Header.Del("Date")
		case date != "":
			resp.Header.Set("Date", date)
		}
	}
	return resp, err
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs := r.reqs
	r.reqs = nil
	return reqs
}

func storeWith(t *testing.T, tr http.RoundTripper) *gcs.Store {
	t.Helper()
	srv := testenv.GCS(t)
	s, err := gcs.New(context.Background(), gcs.Options{Bucket: srv.NewBucket(t), Endpoint: srv.Endpoint, Transport: tr})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func put(t *testing.T, s store.Store, key, body string, opts store.PutOptions) store.Attrs {
	t.Helper()
	a, err := s.Put(context.Background(), key, strings.NewReader(body), opts)
	require.NoError(t, err)
	return a
}

func read(t *testing.T, s store.Store, key string) (string, store.Attrs) {
	t.Helper()
	rc, a, err := s.Get(context.Background(), key)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return string(b), a
}

// TestVersionTokens: the token is the generation in decimal, and only that
// form names it. "0" is the API's "does not exist": as IfMatch it must not
// turn a compare-and-swap into a create. Another spelling of the current
// generation must not pass for it.
func TestVersionTokens(t *testing.T) {
	rec := &recorder{}
	s := storeWith(t, rec)
	ctx := context.Background()
	a := put(t, s, "k", "v1", store.PutOptions{})
	gen, err := strconv.ParseInt(a.ETag, 10, 64)
	require.NoError(t, err, "the token is a generation")
	h, err := s.Head(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, a.ETag, h.ETag)
	assert.Equal(t, strconv.FormatInt(gen, 10), a.ETag)

	for _, tok := range []string{"0" + a.ETag, "+" + a.ETag, a.ETag + " ", "0x" + strconv.FormatInt(gen, 16), "-1", "etag"} {
		rec.take()
		_, err := s.Put(ctx, "k", strings.NewReader("forged"), store.PutOptions{IfMatch: tok})
		require.ErrorIs(t, err, store.ErrPrecondition, "IfMatch %q", tok)
		assert.Contains(t, err.Error(), `"k"`)
		assert.Empty(t, rec.take(), "IfMatch %q names no generation: nothing to ask the server", tok)
		require.ErrorIs(t, s.Delete(ctx, "k", store.DeleteOptions{IfMatch: tok}), store.ErrPrecondition, "delete IfMatch %q", tok)
	}
	body, _ := read(t, s, "k")
	assert.Equal(t, "v1", body)

	_, err = s.Put(ctx, "absent", strings.NewReader("x"), store.PutOptions{IfMatch: "0"})
	require.ErrorIs(t, err, store.ErrPrecondition)
	_, err = s.Head(ctx, "absent")
	require.ErrorIs(t, err, store.ErrNotExist, "a compare-and-swap on token 0 created the object")

	// A real generation of another object, on a missing key: the server
	// refuses it.
	rec.take()
	_, err = s.Put(ctx, "absent", strings.NewReader("x"), store.PutOptions{IfMatch: a.ETag})
	require.ErrorIs(t, err, store.ErrPrecondition)
	assert.Len(t, rec.take(), 1)
	_, err = s.Head(ctx, "absent")
	require.ErrorIs(t, err, store.ErrNotExist)
}

func TestServerTime(t *testing.T) {
	large := func(t *testing.T, s store.Store) store.Attrs {
		t.Helper()
		a, err := s.Put(context.Background(), "large", onlyReader{bytes.NewReader(make([]byte, gcs.PartSize+1))}, store.PutOptions{})
		require.NoError(t, err)
		return a
	}
	t.Run("from Date header", func(t *testing.T) {
		// A server clock far from ours shows that ServerTime is the
		// response's Date, not the local clock.
		want := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
		s := storeWith(t, &recorder{date: want.Format(http.TimeFormat)})
		pa := put(t, s, "clock", "x", store.PutOptions{})
		ca := put(t, s, "cond", "x", store.PutOptions{IfNoneMatch: true})
		la := large(t, s)
		_, ga := read(t, s, "clock")
		ha, err := s.Head(context.Background(), "clock")
		require.NoError(t, err)
		for what, ts := range map[string]time.Time{"put": pa.ServerTime, "conditional put": ca.ServerTime, "resumable put": la.ServerTime, "get": ga.ServerTime, "head": ha.ServerTime} {
			assert.True(t, want.Equal(ts), "%s: server time %v, want %v", what, ts, want)
		}
	})
	t.Run("without Date header", func(t *testing.T) {
		// Without a Date, ServerTime stays zero: the local clock is not
		// the store's.
		s := storeWith(t, &recorder{noDate: true})
		pa := put(t, s, "clock", "x", store.PutOptions{})
		la := large(t, s)
		_, ga := read(t, s, "clock")
		ha, err := s.Head(context.Background(), "clock")
		require.NoError(t, err)
		for what, ts := range map[string]time.Time{"put": pa.ServerTime, "resumable put": la.ServerTime, "get": ga.ServerTime, "head": ha.ServerTime} {
			assert.True(t, ts.IsZero(), "%s: server time %v from a response without a Date", what, ts)
		}
		assert.False(t, ha.LastModified.IsZero())
	})
}

// onlyReader hides every method but Read, so the driver sees a stream of
// unknown length.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// TestOneRequestEach: each operation is one HTTP request, a conditional
// write of any size a single (multipart) upload request.
func TestOneRequestEach(t *testing.T) {
	rec := &recorder{}
	s := storeWith(t, rec)
	ctx := context.Background()
	big := bytes.Repeat([]byte("x"), 20<<20)
	for _, c := range []struct {
		name string
		op   func() error
		want string
	}{
		{"put unknown size", func() error {
			_, err := s.Put(ctx, "k", onlyReader{strings.NewReader("hello")}, store.PutOptions{})
			return err
		}, "POST /upload/storage/v1/b/*/o?uploadType=multipart"},
		{"create", func() error {
			_, err := s.Put(ctx, "c", strings.NewReader("hello"), store.PutOptions{IfNoneMatch: true, Size: 5})
			return err
		}, "POST /upload/storage/v1/b/*/o?uploadType=multipart"},
		// Bodies that fill the client's chunks exactly (multiples of 256
		// KiB): a chunk of the body's size would leave the client unsure
		// that the body ended, and it would open a resumable upload, which
		// a condition must never take.
		{"256 KiB create", func() error {
			_, err := s.Put(ctx, "c256", bytes.NewReader(big[:256<<10]), store.PutOptions{IfNoneMatch: true, Size: 256 << 10})
			return err
		}, "POST /upload/storage/v1/b/*/o?uploadType=multipart"},
		{"PartSize put", func() error {
			_, err := s.Put(ctx, "p", onlyReader{bytes.NewReader(big[:gcs.PartSize])}, store.PutOptions{})
			return err
		}, "POST /upload/storage/v1/b/*/o?uploadType=multipart"},
		{"20 MiB compare-and-swap", func() error {
			a, err := s.Put(ctx, "cas", strings.NewReader("v1"), store.PutOptions{})
			if err == nil {
				rec.take()
				_, err = s.Put(ctx, "cas", onlyReader{bytes.NewReader(big)}, store.PutOptions{IfMatch: a.ETag})
			}
			return err
		}, "POST /upload/storage/v1/b/*/o?uploadType=multipart"},
		{"get", func() error {
			rc, _, err := s.Get(ctx, "k")
			if err == nil {
				_, err = io.Copy(io.Discard, rc)
				rc.Close()
			}
			return err
		}, "GET /*/k"},
		{"head", func() error { _, err := s.Head(ctx, "k"); return err }, "GET /storage/v1/b/*/o/k"},
		{"get missing", func() error {
			_, _, err := s.Get(ctx, "missing")
			assert.ErrorIs(t, err, store.ErrNotExist)
			return nil
		}, "GET /*/missing"},
		{"delete", func() error { return s.Delete(ctx, "k", store.DeleteOptions{}) }, "DELETE /storage/v1/b/*/o/k"},
		{"list", func() error { _, err := s.List(ctx, store.ListRequest{}); return err }, "GET /storage/v1/b/*/o"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec.take()
			require.NoError(t, c.op())
			reqs := rec.take()
			require.Len(t, reqs, 1, "%v", reqs)
			pattern := "^" + strings.ReplaceAll(regexp.QuoteMeta(c.want), `\*`, "[^/]+") + "$"
			assert.Regexp(t, pattern, reqs[0])
		})
	}
}

// TestLargeConditional: 20 MiB conditional writes hold on the emulator.
func TestLargeConditional(t *testing.T) {
	storetest.LargeConditional(t, newStore(t))
}

// TestLargeConditionalIsNotCopied: a conditional body above PartSize goes
// up in one request without the client's chunk buffer (ChunkSize 0), so a
// seekable one is streamed, not copied: a buffer of the body's size, up to
// store.MaxConditionalSize (1 GiB), per write.
func TestLargeConditionalIsNotCopied(t *testing.T) {
	s := newStore(t)
	data := make([]byte, 20<<20)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := s.Put(context.Background(), "big", bytes.NewReader(data), store.PutOptions{IfNoneMatch: true, Size: int64(len(data))})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a conditional Put of %d MiB allocated %d MiB", len(data)>>20, alloc>>20)
	assert.Less(t, alloc, uint64(len(data)/2), "a conditional Put of %d MiB allocated %d MiB", len(data)>>20, alloc>>20)
}

// TestStoredBytes: a gzip object reads back as stored, not decompressed,
// with its metadata from the download's headers.
func TestStoredBytes(t *testing.T) {
	s := newStore(t)
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, err := zw.Write(bytes.Repeat([]byte("commitptr "), 1000))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	meta := map[string]string{"writer": "w1", "seq": "7"}
	put(t, s, "z", zipped.String(), store.PutOptions{ContentEncoding: "gzip", ContentType: "text/plain", Metadata: meta})
	body, a := read(t, s, "z")
	assert.Equal(t, zipped.String(), body, "the stored bytes")
	assert.EqualValues(t, zipped.Len(), a.Size)
	assert.Equal(t, "gzip", a.ContentEncoding)
	assert.Equal(t, meta, a.Metadata)
}

func TestMissingBucket(t *testing.T) {
	srv := testenv.GCS(t)
	s, err := gcs.New(context.Background(), gcs.Options{Bucket: "no-such-bucket", Endpoint: srv.Endpoint})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	_, err = s.List(ctx, store.ListRequest{})
	require.ErrorIs(t, err, store.ErrNoBucket)
	assert.Contains(t, err.Error(), `"no-such-bucket"`)
	for _, opts := range []store.PutOptions{{}, {IfNoneMatch: true}, {IfMatch: "1"}} {
		_, err = s.Put(ctx, "k", strings.NewReader("x"), opts)
		require.ErrorIs(t, err, store.ErrNoBucket, "%+v", opts)
		assert.Contains(t, err.Error(), `"k"`)
		assert.Contains(t, err.Error(), `"no-such-bucket"`)
	}
}

func TestRefusedEndpoint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	endpoint := "http://" + l.Addr().String()
	l.Close()
	s, err := gcs.New(context.Background(), gcs.Options{Bucket: "b-b", Endpoint: endpoint})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Head(context.Background(), "k")
	require.Error(t, err)
	assert.Contains(t, err.Error(), endpoint)
}

func TestOpenURL(t *testing.T) {
	srv := testenv.GCS(t)
	bucket := srv.NewBucket(t)
	ctx := context.Background()
	s, err := store.Open(ctx, "gs://"+bucket+"/data/set?endpoint="+srv.Endpoint, store.Config{})
	require.NoError(t, err)
	put(t, s, "k", "v", store.PutOptions{})
	raw, err := gcs.New(ctx, gcs.Options{Bucket: bucket, Endpoint: srv.Endpoint})
	require.NoError(t, err)
	defer raw.Close()
	_, err = raw.Head(ctx, "data/set/k")
	require.NoError(t, err, "the URL path is a key prefix")

	t.Setenv(gcs.EmulatorEnv, strings.TrimPrefix(srv.Endpoint, "http://"))
	s, err = store.Open(ctx, "gs://"+bucket, store.Config{})
	require.NoError(t, err)
	_, err = s.Head(ctx, "data/set/k")
	require.NoError(t, err, "the emulator from %s", gcs.EmulatorEnv)

	for url, want := range map[string]string{
		"gs://" + bucket + "?region=x":         `parameter "region" is for S3`,
		"gs://" + bucket + "?path_style=true":  `parameter "path_style" is for S3`,
		"gs://Bad_Bucket":                      "bad bucket name",
		"gs://" + bucket + "?endpoint=ftp://h": "bad endpoint",
		"gs://" + bucket + "?colour=blue":      `unknown parameter "colour"`,
		"gs://" + bucket + "?timeout=soon":     "not a positive duration",
		"gs://":                                "names no bucket",
	} {
		_, err := store.Open(ctx, url, store.Config{})
		if assert.Error(t, err, url) {
			assert.Contains(t, err.Error(), want, url)
		}
	}
}

// TestStalledEndpoint: requests to an endpoint that never answers, or whose
// answer stops partway, end with an error naming the endpoint and the limit.
func TestStalledEndpoint(t *testing.T) {
	limit := storetest.StallLimit
	storetest.Stalled(t, func(t *testing.T, endpoint string) store.Store {
		s, err := gcs.New(context.Background(), gcs.Options{
			Bucket: "stalled", Endpoint: endpoint,
			Timeouts: store.Timeouts{Connect: limit, Header: limit, Idle: limit},
		})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestNoCredentialLookup: a store on an http:// endpoint consults no
// credential source: the metadata server, here a loopback listener that
// counts connections, is never asked.
func TestNoCredentialLookup(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	var dials atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			c.Close()
		}
	}()
	t.Setenv("GCE_METADATA_HOST", l.Addr().String())
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	s := newStore(t)
	put(t, s, "k", "v", store.PutOptions{IfNoneMatch: true})
	body, _ := read(t, s, "k")
	assert.Equal(t, "v", body)
	_, err = s.List(context.Background(), store.ListRequest{})
	require.NoError(t, err)
	assert.Zero(t, dials.Load(), "the driver asked the metadata server for credentials")
}
