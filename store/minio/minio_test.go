package minio_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/minio"
	"github.com/commitptr/commitptr/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// options returns Options for a fresh bucket on the shared test server.
func options(t *testing.T) minio.Options {
	t.Helper()
	return optionsOn(t, testenv.S3(t))
}

// optionsOn returns Options for a fresh bucket on srv.
func optionsOn(t *testing.T, srv *testenv.S3Server) minio.Options {
	t.Helper()
	return minio.Options{
		Bucket:      srv.NewBucket(t),
		Endpoint:    srv.Endpoint,
		Region:      srv.Region,
		PathStyle:   true,
		Credentials: credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, ""),
	}
}

func newStore(t *testing.T, opts minio.Options) *minio.Store {
	t.Helper()
	s, err := minio.New(context.Background(), opts)
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t, options(t)) })
}

// TestConformanceGofakes3 runs the suite against a second S3
// implementation, with the capabilities it lacks declared.
func TestConformanceGofakes3(t *testing.T) {
	srv := testenv.Gofakes3(t)
	storetest.RunWith(t, srv.Conformance, func(t *testing.T) store.Store { return newStore(t, optionsOn(t, srv)) })
}

// recorder is a Transport that records the requests it sends and can
// rewrite the Date header of responses.
type recorder struct {
	mu   sync.Mutex
	reqs []string // "METHOD ?query"
	hdrs []http.Header
	date string // if not empty, replaces every response's Date
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req.Method+" ?"+req.URL.RawQuery)
	r.hdrs = append(r.hdrs, req.Header.Clone())
	date := r.date
	r.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && date != "" {
		resp.Header.Set("Date", date)
	}
	return resp, err
}

func (r *recorder) take() ([]string, []http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	reqs, hdrs := r.reqs, r.hdrs
	r.reqs, r.hdrs = nil, nil
	return reqs, hdrs
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

func TestIfMatchMissingKey(t *testing.T) {
	s := newStore(t, options(t))
	_, err := s.Put(context.Background(), "absent", strings.NewReader("x"), store.PutOptions{IfMatch: "d41d8cd98f00b204e9800998ecf8427e"})
	require.ErrorIs(t, err, store.ErrPrecondition)
	assert.Contains(t, err.Error(), "absent")
	_, err = s.Head(context.Background(), "absent")
	require.ErrorIs(t, err, store.ErrNotExist)
}

func TestIfNoneMatchTwice(t *testing.T) {
	s := newStore(t, options(t))
	put(t, s, "once", "1", store.PutOptions{IfNoneMatch: true})
	_, err := s.Put(context.Background(), "once", strings.NewReader("2"), store.PutOptions{IfNoneMatch: true})
	require.ErrorIs(t, err, store.ErrPrecondition)
	body, _ := read(t, s, "once")
	assert.Equal(t, "1", body)
}

func TestConditionalDelete(t *testing.T) {
	rec := &recorder{}
	opts := options(t)
	opts.Transport = rec
	s := newStore(t, opts)
	ctx := context.Background()
	a := put(t, s, "k", "v", store.PutOptions{})
	_, err := s.Versioning(ctx) // asked once per Store (TestVersioningAskedOnce)
	require.NoError(t, err)

	rec.take()
	err = s.Delete(ctx, "k", store.DeleteOptions{IfMatch: "0" + a.ETag})
	require.ErrorIs(t, err, store.ErrPrecondition)
	reqs, hdrs := rec.take()
	// A 412 is followed by a HEAD: some servers answer a conditional
	// delete of a missing key with 412, which is not a failure.
	require.Equal(t, []string{"DELETE ?", "HEAD ?"}, reqs)
	assert.Equal(t, `"0`+a.ETag+`"`, hdrs[0].Get("If-Match"), "the transport must add If-Match to the DELETE")
	body, _ := read(t, s, "k")
	assert.Equal(t, "v", body, "a failed conditional delete must keep the object")

	require.NoError(t, s.Delete(ctx, "k", store.DeleteOptions{IfMatch: a.ETag}))
	_, err = s.Head(ctx, "k")
	require.ErrorIs(t, err, store.ErrNotExist)

	// A missing key is not an error, with or without If-Match.
	require.NoError(t, s.Delete(ctx, "k", store.DeleteOptions{}))
	require.NoError(t, s.Delete(ctx, "k", store.DeleteOptions{IfMatch: a.ETag}))
	// Only the DELETE gets the header.
	_, _, err = s.Get(ctx, "k")
	require.ErrorIs(t, err, store.ErrNotExist)
	reqs, hdrs = rec.take()
	assert.Equal(t, "GET ?", reqs[len(reqs)-1])
	assert.Empty(t, hdrs[len(hdrs)-1].Get("If-Match"))
}

func TestServerTime(t *testing.T) {
	t.Run("live", func(t *testing.T) {
		s := newStore(t, options(t))
		pa := put(t, s, "clock", "x", store.PutOptions{})
		_, ga := read(t, s, "clock")
		ha, err := s.Head(context.Background(), "clock")
		require.NoError(t, err)
		for what, ts := range map[string]time.Time{"put": pa.ServerTime, "get": ga.ServerTime, "head": ha.ServerTime} {
			assert.WithinDuration(t, time.Now(), ts, time.Minute, what)
		}
	})
	t.Run("from Date header", func(t *testing.T) {
		// A server clock far from ours shows that ServerTime is the
		// response's Date, not the local clock.
		want := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
		opts := options(t)
		opts.Transport = &recorder{date: want.Format(http.TimeFormat)}
		s := newStore(t, opts)
		pa := put(t, s, "clock", "x", store.PutOptions{})
		large, err := s.Put(context.Background(), "large", onlyReader{bytes.NewReader(make([]byte, minio.PartSize+1))}, store.PutOptions{})
		require.NoError(t, err)
		_, ga := read(t, s, "clock")
		ha, err := s.Head(context.Background(), "clock")
		require.NoError(t, err)
		for what, ts := range map[string]time.Time{"put": pa.ServerTime, "multipart put": large.ServerTime, "get": ga.ServerTime, "head": ha.ServerTime} {
			assert.True(t, want.Equal(ts), "%s: server time %v, want %v", what, ts, want)
		}
	})
	t.Run("without Date header", func(t *testing.T) {
		// The local clock is not the store's: without a Date, ServerTime
		// stays zero, and whoever would judge an age by it refuses.
		tr := faults.NewClockTransport(nil, 0)
		tr.DropDate(faults.AllOps...)
		opts := options(t)
		opts.Transport = tr
		s := newStore(t, opts)
		pa := put(t, s, "clock", "x", store.PutOptions{})
		large, err := s.Put(context.Background(), "large", onlyReader{bytes.NewReader(make([]byte, minio.PartSize+1))}, store.PutOptions{})
		require.NoError(t, err)
		_, ga := read(t, s, "clock")
		ha, err := s.Head(context.Background(), "clock")
		require.NoError(t, err)
		for what, ts := range map[string]time.Time{"put": pa.ServerTime, "multipart put": large.ServerTime, "get": ga.ServerTime, "head": ha.ServerTime} {
			assert.True(t, ts.IsZero(), "%s: server time %v from a response without a Date", what, ts)
		}
		assert.False(t, ha.LastModified.IsZero())
		_, err = s.SweepLeftovers(context.Background(), "", time.Minute)
		require.ErrorIs(t, err, store.ErrNoServerTime)
	})
}

func TestOneRequestEach(t *testing.T) {
	rec := &recorder{}
	opts := options(t)
	opts.Transport = rec
	s := newStore(t, opts)
	ctx := context.Background()
	_, err := s.Versioning(ctx) // asked once per Store (TestVersioningAskedOnce)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		op   func() error
		want []string
	}{
		{"put unknown size", func() error {
			_, err := s.Put(ctx, "k", onlyReader{strings.NewReader("hello")}, store.PutOptions{})
			return err
		}, []string{"PUT ?"}},
		{"get", func() error {
			rc, _, err := s.Get(ctx, "k")
			if err == nil {
				_, err = io.Copy(io.Discard, rc)
				rc.Close()
			}
			return err
		}, []string{"GET ?"}},
		{"head", func() error { _, err := s.Head(ctx, "k"); return err }, []string{"HEAD ?"}},
		{"get missing", func() error {
			_, _, err := s.Get(ctx, "missing")
			assert.ErrorIs(t, err, store.ErrNotExist)
			return nil
		}, []string{"GET ?"}},
		{"delete", func() error { return s.Delete(ctx, "k", store.DeleteOptions{}) }, []string{"DELETE ?"}},
		{"delete many", func() error { return s.DeleteMany(ctx, []string{"a", "b"}) }, []string{"POST ?delete="}},
		{"list", func() error { _, err := s.List(ctx, store.ListRequest{}); return err }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec.take()
			require.NoError(t, c.op())
			reqs, _ := rec.take()
			if c.want == nil {
				assert.Len(t, reqs, 1)
				return
			}
			assert.Equal(t, c.want, reqs)
		})
	}
}

// TestVersioningAskedOnce shows the one request that finding out whether
// the bucket keeps versions costs a Store: the first delete asks, later
// ones do not, and a Store told the answer never asks.
func TestVersioningAskedOnce(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		declared store.Versioning
		first    []string
	}{
		{store.VersioningAuto, []string{"GET ?versioning=", "DELETE ?"}},
		{store.VersioningOff, []string{"DELETE ?"}},
	} {
		t.Run(c.declared.String(), func(t *testing.T) {
			rec := &recorder{}
			opts := options(t)
			opts.Transport = rec
			opts.Versioning = c.declared
			s := newStore(t, opts)
			put(t, s, "k", "v", store.PutOptions{})
			rec.take()
			require.NoError(t, s.Delete(ctx, "k", store.DeleteOptions{}))
			reqs, _ := rec.take()
			assert.Equal(t, c.first, reqs)
			require.NoError(t, s.DeleteMany(ctx, []string{"a", "b"}))
			reqs, _ = rec.take()
			assert.Equal(t, []string{"POST ?delete="}, reqs)
		})
	}
	t.Run("concurrent", func(t *testing.T) {
		rec := &recorder{}
		opts := options(t)
		opts.Transport = rec
		s := newStore(t, opts)
		var g errgroup.Group
		for i := range 8 {
			g.Go(func() error { return s.Delete(ctx, fmt.Sprint("k", i), store.DeleteOptions{}) })
		}
		require.NoError(t, g.Wait())
		reqs, _ := rec.take()
		n := map[string]int{}
		for _, r := range reqs {
			n[r]++
		}
		assert.Equal(t, map[string]int{"GET ?versioning=": 1, "DELETE ?": 8}, n, "eight deletes at once ask once")
	})
}

func TestMetadataAndHeaders(t *testing.T) {
	// The recorder sends through http.DefaultTransport, which would decode
	// a gzip body by itself if the driver let it.
	opts := options(t)
	opts.Transport = &recorder{}
	s := newStore(t, opts)
	meta := map[string]string{"writer": "w-1", "content-type": "not/a-header", "x.y_z": "1"}
	pa := put(t, s, "m", "{}", store.PutOptions{Metadata: meta, ContentType: "application/json", ContentEncoding: "gzip"})
	assert.Equal(t, meta, pa.Metadata)
	body, ga := read(t, s, "m")
	assert.Equal(t, "{}", body, "the body must come back as stored, not decoded")
	assert.Equal(t, meta, ga.Metadata)
	assert.Equal(t, "application/json", ga.ContentType)
	assert.Equal(t, "gzip", ga.ContentEncoding)
	assert.Equal(t, pa.ETag, ga.ETag)
	assert.NotContains(t, ga.ETag, `"`)
	ha, err := s.Head(context.Background(), "m")
	require.NoError(t, err)
	assert.Equal(t, meta, ha.Metadata)
	assert.Equal(t, "application/json", ha.ContentType)
	assert.Equal(t, "gzip", ha.ContentEncoding)
	assert.EqualValues(t, 2, ha.Size)
}

func TestBadInput(t *testing.T) {
	s := newStore(t, options(t))
	ctx := context.Background()
	for _, c := range []struct {
		name string
		key  string
		body io.Reader
		opts store.PutOptions
	}{
		{"nil body", "k", nil, store.PutOptions{}},
		{"upper-case metadata key", "k", strings.NewReader("x"), store.PutOptions{Metadata: map[string]string{"Writer": "w"}}},
		{"metadata key with a space", "k", strings.NewReader("x"), store.PutOptions{Metadata: map[string]string{"a b": "w"}}},
		{"metadata value with a newline", "k", strings.NewReader("x"), store.PutOptions{Metadata: map[string]string{"a": "x\ny"}}},
		{"both conditions", "k", strings.NewReader("x"), store.PutOptions{IfMatch: "abc", IfNoneMatch: true}},
		{"quote in ETag", "k", strings.NewReader("x"), store.PutOptions{IfMatch: `a"b`}},
		{"short body", "k", strings.NewReader("xy"), store.PutOptions{Size: 3}},
		{"long body", "k", strings.NewReader("xyzw"), store.PutOptions{Size: 3}},
		{"negative size", "k", strings.NewReader("x"), store.PutOptions{Size: -2}},
		{"huge size", "k", strings.NewReader("x"), store.PutOptions{Size: 1 << 62}},
		{"empty key", "", strings.NewReader("x"), store.PutOptions{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Put(ctx, c.key, c.body, c.opts)
			require.Error(t, err)
		})
	}
	_, _, err := s.Get(ctx, "")
	require.Error(t, err)
	require.Error(t, s.Delete(ctx, "k", store.DeleteOptions{IfMatch: "a\nb"}))
	page, err := s.List(ctx, store.ListRequest{})
	require.NoError(t, err)
	assert.Empty(t, page.Objects, "bad input must not write anything")
}

func TestWrongCredentials(t *testing.T) {
	opts := options(t)
	const secret = "wrong-secret-do-not-print"
	opts.Credentials = credentials.NewStaticV4(testenv.S3(t).AccessKey, secret, "")
	s := newStore(t, opts)
	ctx := context.Background()
	_, err := s.Put(ctx, "k", strings.NewReader("x"), store.PutOptions{})
	require.ErrorIs(t, err, store.ErrAccess)
	assert.NotContains(t, err.Error(), secret)
	_, _, err = s.Get(ctx, "k")
	require.ErrorIs(t, err, store.ErrAccess)
	assert.NotContains(t, err.Error(), secret)
	_, err = s.Head(ctx, "k")
	require.ErrorIs(t, err, store.ErrAccess)
	_, err = s.List(ctx, store.ListRequest{})
	require.ErrorIs(t, err, store.ErrAccess)

	opts.Credentials = credentials.NewStaticV4("no-such-user", secret, "")
	_, err = newStore(t, opts).Put(ctx, "k", strings.NewReader("x"), store.PutOptions{})
	require.ErrorIs(t, err, store.ErrAccess)
	assert.NotContains(t, err.Error(), secret)
}

func TestMissingBucket(t *testing.T) {
	opts := options(t)
	opts.Bucket = "no-such-bucket-here"
	s := newStore(t, opts)
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		require.ErrorIs(t, err, store.ErrNoBucket, what)
		assert.Contains(t, err.Error(), opts.Bucket, what)
	}
	_, err := s.Put(ctx, "k", strings.NewReader("x"), store.PutOptions{})
	check("put", err)
	_, _, err = s.Get(ctx, "k")
	check("get", err)
	_, err = s.List(ctx, store.ListRequest{})
	check("list", err)
	err = s.Delete(ctx, "k", store.DeleteOptions{})
	check("delete", err)
	err = s.DeleteMany(ctx, []string{"a", "b"})
	check("delete-many", err)
	assert.Contains(t, err.Error(), `"a"`)
}

func TestRefusedEndpoint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	endpoint := "http://" + l.Addr().String()
	require.NoError(t, l.Close())

	s, err := minio.New(context.Background(), minio.Options{
		Bucket: "bucket", Endpoint: endpoint, Region: "us-east-1", PathStyle: true,
		Credentials: credentials.NewStaticV4("a", "b", ""),
	})
	require.NoError(t, err, "opening must not contact the server")
	_, err = s.Put(context.Background(), "k", strings.NewReader("x"), store.PutOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), endpoint)
	assert.Contains(t, err.Error(), `put "k"`)

	// A cancelled context ends List at once, even though minio-go's list
	// call takes no context.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.List(ctx, store.ListRequest{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestOpenURL(t *testing.T) {
	srv := testenv.S3(t)
	bucket := srv.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", srv.Region)
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1") // the URL's endpoint must win
	ctx := context.Background()

	s, err := store.Open(ctx, "minio://"+bucket+"/pfx/sub?endpoint="+srv.Endpoint+"&path_style=true", store.Config{})
	require.NoError(t, err)
	put(t, s, "k", "v", store.PutOptions{})
	body, _ := read(t, s, "k")
	assert.Equal(t, "v", body)

	raw, err := store.Open(ctx, "minio://"+bucket, store.Config{Endpoint: srv.Endpoint, PathStyle: true})
	require.NoError(t, err)
	page, err := raw.List(ctx, store.ListRequest{})
	require.NoError(t, err)
	require.Len(t, page.Objects, 1)
	assert.Equal(t, "pfx/sub/k", page.Objects[0].Key)

	// The environment alone is enough.
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint)
	env, err := store.Open(ctx, "minio://"+bucket+"/pfx/sub?path_style=true", store.Config{})
	require.NoError(t, err)
	body, _ = read(t, env, "k")
	assert.Equal(t, "v", body)
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		url, want string
	}{
		{"minio:///prefix", "no bucket"},
		{"minio://", "no bucket"},
		{"minio://user:pw@bucket/x", "user information"},
		{"minio://bucket:9000/x", "endpoint"},
		{"minio://bucket?path_style=maybe", "path_style"},
		{"minio://bucket?endpont=http://x", "unknown parameter"},
		{"minio://bucket?endpoint=ftp://x", "bad endpoint"},
		{"minio://bucket?endpoint=http://x/some/path", "bad endpoint"},
		{"minio://bucket/a/../b", "bad key prefix"},
		{"minio://ab/x", "bad bucket name"},
		{"minio://bucket?%zz", "query"},
	} {
		t.Run(c.url, func(t *testing.T) {
			_, err := store.Open(ctx, c.url, store.Config{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "pw@", "no password in messages")
		})
	}
}

// onlyReader hides every method but Read, so the driver sees a stream of
// unknown length.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestLargeUnknownSize(t *testing.T) {
	rec := &recorder{}
	opts := options(t)
	opts.Transport = rec
	s := newStore(t, opts)
	ctx := context.Background()
	data := make([]byte, 40<<20)
	_, err := rand.Read(data)
	require.NoError(t, err)
	want := sha256.Sum256(data)

	rec.take()
	a, err := s.Put(ctx, "big", onlyReader{bytes.NewReader(data)}, store.PutOptions{})
	require.NoError(t, err)
	assert.EqualValues(t, len(data), a.Size)
	reqs, hdrs := rec.take()
	// initiate, 3 parts of 16+16+8 MiB, complete
	require.Len(t, reqs, 5, "%v", reqs)
	for _, h := range hdrs {
		assert.Empty(t, h.Get("If-None-Match"))
	}

	// A conditional body of unknown size goes up in one PUT, whatever its
	// size: some servers ignore conditions on multipart completion.
	_, err = s.Put(ctx, "big-cond", onlyReader{bytes.NewReader(data)}, store.PutOptions{IfNoneMatch: true})
	require.NoError(t, err)
	reqs, hdrs = rec.take()
	require.Len(t, reqs, 1, "%v", reqs)
	assert.Equal(t, "*", hdrs[0].Get("If-None-Match"))

	rc, ga, err := s.Get(ctx, "big")
	require.NoError(t, err)
	h := sha256.New()
	n, err := io.Copy(h, rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	assert.EqualValues(t, len(data), n)
	assert.EqualValues(t, len(data), ga.Size)
	assert.Equal(t, want[:], h.Sum(nil))
	assert.Equal(t, a.ETag, ga.ETag)

	// The conditions hold for large bodies too: they go up in one PUT.
	_, err = s.Put(ctx, "big", onlyReader{bytes.NewReader(data)}, store.PutOptions{IfNoneMatch: true})
	storetest.RequireRefused(t, err, "create-if-absent of an existing key, large body")
	_, err = s.Put(ctx, "big", bytes.NewReader(data), store.PutOptions{IfMatch: "0" + a.ETag, Size: int64(len(data))})
	storetest.RequireRefused(t, err, "If-Match on a changed key, large body")
	_, err = s.Put(ctx, "absent", onlyReader{bytes.NewReader(data)}, store.PutOptions{IfMatch: a.ETag})
	storetest.RequireRefused(t, err, "If-Match on a missing key, large body")
	unchanged, err := s.Head(ctx, "big")
	require.NoError(t, err)
	assert.Equal(t, a.ETag, unchanged.ETag, "a refused write changed the object")
	_, err = s.Head(ctx, "absent")
	require.ErrorIs(t, err, store.ErrNotExist)
	rec.take()
	_, err = s.Put(ctx, "short", onlyReader{bytes.NewReader(data)}, store.PutOptions{Size: 30 << 20})
	require.Error(t, err, "a body longer than Size must fail")
	reqs, _ = rec.take()
	assert.Equal(t, "DELETE", strings.Fields(reqs[len(reqs)-1])[0], "the failed upload is aborted: %v", reqs)
	b, err := s.Put(ctx, "big", bytes.NewReader(data[:20<<20]), store.PutOptions{IfMatch: a.ETag, Size: 20 << 20})
	require.NoError(t, err)
	ha, err := s.Head(ctx, "big")
	require.NoError(t, err)
	assert.Equal(t, b.ETag, ha.ETag)
	assert.EqualValues(t, 20<<20, ha.Size)
}

// TestLargeConditionalGofakes3: on a real server that ignores conditions
// on multipart completion, 20 MiB conditional writes still hold.
func TestLargeConditionalGofakes3(t *testing.T) {
	storetest.LargeConditional(t, newStore(t, optionsOn(t, testenv.Gofakes3(t))))
}

// TestConditionalNeverMultipart: against a server without conditional
// multipart completion, a 20 MiB conditional write still holds,
// because it goes up as one PUT.
func TestConditionalNeverMultipart(t *testing.T) {
	spy := &faults.ConditionalMultipartSpy{}
	opts := options(t)
	opts.Transport = spy
	storetest.LargeConditional(t, newStore(t, opts))
	assert.Zero(t, spy.Refused.Load(), "a conditional write went up as a multipart upload")
}

// TestMultipartReadsEachPartIntoOneBuffer: a streamed body in parts is
// read into one buffer of a part, which the first part, the one Put reads
// to choose between one request and parts, is sent from: with
// --concurrency uploads at once, a second copy of each first part is
// another 16 MiB per upload. A 40 MiB body of known size allocates
// 16 MiB, one of unknown size 32 MiB (the buffer grows). A seekable
// body's length is known even when no Size is declared.
func TestMultipartReadsEachPartIntoOneBuffer(t *testing.T) {
	s := newStore(t, options(t))
	ctx := context.Background()
	data := make([]byte, 40<<20)
	for _, c := range []struct {
		name  string
		body  io.Reader
		size  int64
		limit uint64
	}{
		{"stream", onlyReader{bytes.NewReader(data)}, int64(len(data)), minio.PartSize + minio.PartSize/2},
		{"stream of unknown size", onlyReader{bytes.NewReader(data)}, 0, 2*minio.PartSize + minio.PartSize/2},
		// Its length is known: the buffer is allocated at once.
		{"seekable", bytes.NewReader(data), int64(len(data)), minio.PartSize + minio.PartSize/2},
		{"seekable of undeclared size", bytes.NewReader(data), 0, minio.PartSize + minio.PartSize/2},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := s.Put(ctx, "big", c.body, store.PutOptions{Size: c.size})
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: a Put of %d MiB in parts allocated %d MiB", c.name, len(data)>>20, alloc>>20)
		assert.Less(t, alloc, c.limit, "%s: a Put of %d MiB in parts allocated %d MiB", c.name, len(data)>>20, alloc>>20)
	}
}

// TestMultipartAtPartBoundaries: a body that ends on a part boundary goes
// up in as many parts as it fills, with no empty part after them (which
// costs a request and changes the ETag), and one a byte longer in one part
// more, whether its size is declared, measured or unknown.
func TestMultipartAtPartBoundaries(t *testing.T) {
	rec := &recorder{}
	opts := options(t)
	opts.Transport = rec
	s := newStore(t, opts)
	ctx := context.Background()
	data := make([]byte, 2*minio.PartSize+1)
	_, err := rand.Read(data)
	require.NoError(t, err)
	for _, n := range []int{2 * minio.PartSize, 2*minio.PartSize + 1} {
		parts := (n + minio.PartSize - 1) / minio.PartSize
		for name, body := range map[string]func() (io.Reader, int64){
			"stream":            func() (io.Reader, int64) { return onlyReader{bytes.NewReader(data[:n])}, 0 },
			"stream-known-size": func() (io.Reader, int64) { return onlyReader{bytes.NewReader(data[:n])}, int64(n) },
			"seekable":          func() (io.Reader, int64) { return bytes.NewReader(data[:n]), 0 },
		} {
			key := fmt.Sprintf("%s-%d", name, n)
			r, size := body()
			rec.take()
			a, err := s.Put(ctx, key, r, store.PutOptions{Size: size})
			require.NoError(t, err, key)
			reqs, _ := rec.take()
			assert.Len(t, reqs, parts+2, "%s: initiate, %d parts, complete: %v", key, parts, reqs)
			assert.True(t, strings.HasSuffix(a.ETag, fmt.Sprintf("-%d", parts)), "%s: ETag %s", key, a.ETag)
			got, _ := read(t, s, key)
			assert.True(t, bytes.Equal(data[:n], []byte(got)), "%s: the stored bytes differ", key)
		}
	}
}

// TestEncryptionAndStorageClassReachTheWire: the store's encryption and
// storage class go with every request that creates an object, in one
// request or in parts, and a customer key with every part and every read.
func TestEncryptionAndStorageClassReachTheWire(t *testing.T) {
	for _, c := range testenv.S3ObjectSettingsCases() {
		t.Run(c.Name, func(t *testing.T) {
			rec := &faults.Recorder{Base: http.DefaultTransport}
			o := options(t)
			o.Transport, o.Encryption, o.StorageClass = rec, c.Encryption, c.Class
			testenv.CheckS3ObjectSettings(t, newStore(t, o), rec, c, minio.PartSize+1)
		})
	}
}
