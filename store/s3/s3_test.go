package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/s3"
	"github.com/commitptr/commitptr/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

var envOnce sync.Once

// server returns the shared test server and points the AWS credential chain
// at it, once per process, through the environment. Tests that change the
// environment further use t.Setenv and so cannot run in parallel.
func server(t *testing.T) *testenv.S3Server {
	t.Helper()
	return withEnv(testenv.S3(t))
}

// withEnv points the AWS credential chain at srv, once per process: every
// test server has the same credentials.
func withEnv(srv *testenv.S3Server) *testenv.S3Server {
	envOnce.Do(func() {
		dir, err := os.MkdirTemp("", "commitptr-s3-test-")
		if err != nil {
			panic(err)
		}
		for k, v := range map[string]string{
			"AWS_ACCESS_KEY_ID":           srv.AccessKey,
			"AWS_SECRET_ACCESS_KEY":       srv.SecretKey,
			"AWS_REGION":                  srv.Region,
			"AWS_CONFIG_FILE":             filepath.Join(dir, "config"),
			"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
			"AWS_EC2_METADATA_DISABLED":   "true",
		} {
			os.Setenv(k, v)
		}
	})
	return srv
}

// newStore returns a driver on a fresh bucket of the shared server.
func newStore(t *testing.T, mods ...func(*s3.Options)) (*s3.Store, string) {
	t.Helper()
	return newStoreOn(t, server(t), mods...)
}

// newStoreOn returns a driver on a fresh bucket of srv.
func newStoreOn(t *testing.T, srv *testenv.S3Server, mods ...func(*s3.Options)) (*s3.Store, string) {
	t.Helper()
	bucket := srv.NewBucket(t)
	opts := s3.Options{Bucket: bucket, Endpoint: srv.Endpoint, PathStyle: true}
	for _, m := range mods {
		m(&opts)
	}
	s, err := s3.New(context.Background(), opts)
	require.NoError(t, err)
	return s, bucket
}

func putString(t *testing.T, s store.Store, key, body string, opts store.PutOptions) store.Attrs {
	t.Helper()
	a, err := s.Put(context.Background(), key, strings.NewReader(body), opts)
	require.NoError(t, err, "put %q", key)
	require.NotEmpty(t, a.ETag)
	return a
}

func getString(t *testing.T, s store.Store, key string) (string, store.Attrs) {
	t.Helper()
	rc, a, err := s.Get(context.Background(), key)
	require.NoError(t, err, "get %q", key)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return string(b), a
}

func TestRoundTrip(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	meta := map[string]string{"writer": "w1", "seq": "7"}
	pa := putString(t, s, "dir/obj", "hello", store.PutOptions{
		Metadata: meta, ContentType: "text/plain", ContentEncoding: "gzip",
	})
	assert.NotContains(t, pa.ETag, `"`)
	assert.EqualValues(t, 5, pa.Size)

	body, ga := getString(t, s, "dir/obj")
	assert.Equal(t, "hello", body, "a gzip Content-Encoding must not be decoded in transit")
	assert.Equal(t, pa.ETag, ga.ETag)
	assert.EqualValues(t, 5, ga.Size)
	assert.Equal(t, meta, ga.Metadata)
	assert.Equal(t, "text/plain", ga.ContentType)
	assert.Equal(t, "gzip", ga.ContentEncoding)

	ha, err := s.Head(ctx, "dir/obj")
	require.NoError(t, err)
	assert.Equal(t, pa.ETag, ha.ETag)
	assert.Equal(t, meta, ha.Metadata)
	assert.False(t, ha.LastModified.IsZero())
}

func TestServerTime(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	pa := putString(t, s, "clock", "x", store.PutOptions{})
	_, ga := getString(t, s, "clock")
	ha, err := s.Head(ctx, "clock")
	require.NoError(t, err)
	page, err := s.List(ctx, store.ListRequest{})
	require.NoError(t, err)
	require.Len(t, page.Objects, 1)
	for name, ts := range map[string]time.Time{"put": pa.ServerTime, "get": ga.ServerTime, "head": ha.ServerTime} {
		assert.WithinDuration(t, time.Now(), ts, time.Minute, name)
		// The Date header has a resolution of one second.
		assert.Zero(t, ts.Nanosecond(), "%s: server time %v does not come from the Date header", name, ts)
	}
}

// TestServerTimeWithoutDate: a response without a Date leaves ServerTime
// zero. The local clock is not the store's, and standing it in would let
// leases, pins and the collector judge ages by it.
func TestServerTimeWithoutDate(t *testing.T) {
	tr := faults.NewClockTransport(nil, 0)
	tr.DropDate(faults.AllOps...)
	s, _ := newStore(t, func(o *s3.Options) { o.HTTPClient = &http.Client{Transport: tr} })
	ctx := context.Background()
	pa := putString(t, s, "clock", "x", store.PutOptions{})
	_, ga := getString(t, s, "clock")
	ha, err := s.Head(ctx, "clock")
	require.NoError(t, err)
	for name, ts := range map[string]time.Time{"put": pa.ServerTime, "get": ga.ServerTime, "head": ha.ServerTime} {
		assert.True(t, ts.IsZero(), "%s: server time %v from a response without a Date", name, ts)
	}
	assert.False(t, ha.LastModified.IsZero())
	_, err = s.SweepLeftovers(ctx, "", time.Minute)
	require.ErrorIs(t, err, store.ErrNoServerTime)
}

func TestConditions(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	body := func(s string) io.Reader { return strings.NewReader(s) }

	t.Run("IfMatchMissingKey", func(t *testing.T) {
		_, err := s.Put(ctx, "missing", body("x"), store.PutOptions{IfMatch: "0123456789abcdef0123456789abcdef"})
		require.ErrorIs(t, err, store.ErrPrecondition)
		assert.Contains(t, err.Error(), `"missing"`)
		_, err = s.Head(ctx, "missing")
		require.ErrorIs(t, err, store.ErrNotExist)
	})
	t.Run("IfNoneMatchExisting", func(t *testing.T) {
		putString(t, s, "once", "1", store.PutOptions{IfNoneMatch: true})
		_, err := s.Put(ctx, "once", body("2"), store.PutOptions{IfNoneMatch: true})
		require.ErrorIs(t, err, store.ErrPrecondition)
	})
	t.Run("IfMatch", func(t *testing.T) {
		a1 := putString(t, s, "cas", "1", store.PutOptions{})
		a2 := putString(t, s, "cas", "2", store.PutOptions{IfMatch: a1.ETag})
		_, err := s.Put(ctx, "cas", body("3"), store.PutOptions{IfMatch: a1.ETag})
		require.ErrorIs(t, err, store.ErrPrecondition)
		// A quoted ETag is accepted too.
		putString(t, s, "cas", "3", store.PutOptions{IfMatch: `"` + a2.ETag + `"`})
	})
	t.Run("Delete", func(t *testing.T) {
		require.NoError(t, s.Delete(ctx, "never", store.DeleteOptions{}))
		require.NoError(t, s.Delete(ctx, "never", store.DeleteOptions{IfMatch: "0123456789abcdef0123456789abcdef"}))
		a1 := putString(t, s, "del", "1", store.PutOptions{})
		a2 := putString(t, s, "del", "2", store.PutOptions{})
		require.ErrorIs(t, s.Delete(ctx, "del", store.DeleteOptions{IfMatch: a1.ETag}), store.ErrPrecondition)
		require.NoError(t, s.Delete(ctx, "del", store.DeleteOptions{IfMatch: a2.ETag}))
		_, err := s.Head(ctx, "del")
		require.ErrorIs(t, err, store.ErrNotExist)
	})
	t.Run("Exclusive", func(t *testing.T) {
		_, err := s.Put(ctx, "both", body("x"), store.PutOptions{IfNoneMatch: true, IfMatch: "abc"})
		require.Error(t, err)
	})
}

func TestWrongCredentials(t *testing.T) {
	srv := server(t)
	bucket := srv.NewBucket(t)
	const secret = "not-the-secret-c2VjcmV0"
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	s, err := s3.New(context.Background(), s3.Options{Bucket: bucket, Endpoint: srv.Endpoint, PathStyle: true})
	require.NoError(t, err)
	ctx := context.Background()

	_, err = s.Put(ctx, "k", strings.NewReader("x"), store.PutOptions{})
	checkAccess(t, err, secret)
	_, _, err = s.Get(ctx, "k")
	checkAccess(t, err, secret)
	_, err = s.Head(ctx, "k")
	checkAccess(t, err, secret)
	_, err = s.List(ctx, store.ListRequest{})
	checkAccess(t, err, secret)
	err = s.DeleteMany(ctx, []string{"a", "b"})
	checkAccess(t, err, secret)

	t.Setenv("AWS_ACCESS_KEY_ID", "no-such-user")
	s, err = s3.New(ctx, s3.Options{Bucket: bucket, Endpoint: srv.Endpoint, PathStyle: true})
	require.NoError(t, err)
	// versitygw answers an unknown access key with 404 XAdminUserNotFound;
	// a HEAD response has no body to tell that from a missing key.
	_, _, err = s.Get(ctx, "k")
	checkAccess(t, err, secret)
	checkAccess(t, s.Delete(ctx, "k", store.DeleteOptions{}), secret)
}

func checkAccess(t *testing.T, err error, secret string) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrAccess)
	assert.NotContains(t, err.Error(), secret)
	assert.NotErrorIs(t, err, store.ErrNotExist)
}

func TestMissingBucket(t *testing.T) {
	srv := server(t)
	ctx := context.Background()
	s, err := s3.New(ctx, s3.Options{Bucket: "no-such-bucket-x7", Endpoint: srv.Endpoint, PathStyle: true})
	require.NoError(t, err)

	check := func(what string, err error) {
		t.Helper()
		require.ErrorIs(t, err, store.ErrNoBucket, what)
		assert.Contains(t, err.Error(), "no-such-bucket-x7", what)
	}
	_, err = s.Put(ctx, "k", strings.NewReader("x"), store.PutOptions{})
	check("put", err)
	_, err = s.Put(ctx, "k", strings.NewReader("x"), store.PutOptions{IfNoneMatch: true})
	check("conditional put", err)
	_, _, err = s.Get(ctx, "k")
	check("get", err)
	_, err = s.List(ctx, store.ListRequest{})
	check("list", err)
	check("delete-many", s.DeleteMany(ctx, []string{"a"}))
}

func TestRefusedEndpoint(t *testing.T) {
	server(t) // credentials in the environment
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	endpoint := "http://" + l.Addr().String()
	require.NoError(t, l.Close())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := s3.New(ctx, s3.Options{Bucket: "b", Endpoint: endpoint, PathStyle: true})
	require.NoError(t, err, "opening must not send requests")
	_, _, err = s.Get(ctx, "k")
	require.Error(t, err)
	assert.Contains(t, err.Error(), endpoint)
	assert.Contains(t, err.Error(), `"k"`)
	for _, class := range []error{store.ErrNotExist, store.ErrAccess, store.ErrNoBucket, store.ErrPrecondition} {
		assert.NotErrorIs(t, err, class)
	}
	_, err = s.Put(ctx, "k", strings.NewReader("x"), store.PutOptions{IfMatch: "abc"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), endpoint)
}

func TestNewBadConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		opts s3.Options
		want string
	}{
		{"no bucket", s3.Options{}, "bucket"},
		{"bad bucket", s3.Options{Bucket: "a/b"}, "a/b"},
		{"endpoint without scheme", s3.Options{Bucket: "b", Endpoint: "127.0.0.1:9000"}, "127.0.0.1:9000"},
		{"endpoint not http", s3.Options{Bucket: "b", Endpoint: "ftp://host"}, "ftp://host"},
		{"unknown profile", s3.Options{Bucket: "b", Profile: "no-such-profile-q"}, "no-such-profile-q"},
	} {
		t.Run(c.name, func(t *testing.T) {
			server(t) // a hermetic AWS environment
			_, err := s3.New(context.Background(), c.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestOpenURL(t *testing.T) {
	srv := server(t)
	bucket := srv.NewBucket(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("AWS_ENDPOINT_URL", "") // the URL names the endpoint
	ctx := context.Background()

	s, err := store.Open(ctx, "s3://"+bucket+"/data/set1?endpoint="+srv.Endpoint+"&path_style=true", store.Config{})
	require.NoError(t, err)
	putString(t, s, "obj", "via url", store.PutOptions{})
	body, _ := getString(t, s, "obj")
	assert.Equal(t, "via url", body)

	raw, err := s3.New(ctx, s3.Options{Bucket: bucket, Endpoint: srv.Endpoint, PathStyle: true})
	require.NoError(t, err)
	body, _ = getString(t, raw, "data/set1/obj")
	assert.Equal(t, "via url", body, "the URL path is a key prefix")

	// store.Config overrides the query, and AWS_ENDPOINT_URL is honoured.
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint)
	s, err = store.Open(ctx, "s3://"+bucket+"?endpoint=http://127.0.0.1:1", store.Config{Endpoint: srv.Endpoint, PathStyle: true})
	require.NoError(t, err)
	body, _ = getString(t, s, "data/set1/obj")
	assert.Equal(t, "via url", body)
	s, err = store.Open(ctx, "s3://"+bucket+"/data", store.Config{PathStyle: true})
	require.NoError(t, err)
	body, _ = getString(t, s, "set1/obj")
	assert.Equal(t, "via url", body)

	// AWS_S3_USE_PATH_STYLE; with a host name, the SDK would otherwise
	// address bucket.localhost.
	t.Setenv("AWS_S3_USE_PATH_STYLE", "true")
	local := strings.Replace(srv.Endpoint, "127.0.0.1", "localhost", 1)
	s, err = store.Open(ctx, "s3://"+bucket+"?endpoint="+local, store.Config{})
	require.NoError(t, err)
	body, _ = getString(t, s, "data/set1/obj")
	assert.Equal(t, "via url", body)
}

func TestOpenURLErrors(t *testing.T) {
	server(t)
	for _, c := range []struct {
		name, url, want string
	}{
		{"no bucket", "s3:///prefix", "no bucket"},
		{"unknown parameter", "s3://b?endpiont=http://x", "endpiont"},
		{"bad path_style", "s3://b?path_style=maybe", "path_style"},
		{"bad versioning", "s3://b?versioning=yes", `versioning="yes": want auto, on or off`},
		{"bad endpoint", "s3://b?endpoint=localhost:9000", "localhost:9000"},
		{"bad prefix", "s3://b/a/../c", "prefix"},
		{"user info", "s3://key:secret@b/p", "user information"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := store.Open(context.Background(), c.url, store.Config{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "secret@")
		})
	}
}

// countingTransport counts DeleteObjects requests.
type countingTransport struct{ deletes atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.URL.Query().Has("delete") {
		c.deletes.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestDeleteManyBatches(t *testing.T) {
	ct := &countingTransport{}
	s, _ := newStore(t, func(o *s3.Options) { o.HTTPClient = &http.Client{Transport: ct} })
	ctx := context.Background()
	const n = store.MaxDeleteBatch + 7
	keys := make([]string, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range keys {
		keys[i] = fmt.Sprintf("k/%05d", i)
		g.Go(func() error {
			_, err := s.Put(gctx, keys[i], strings.NewReader("x"), store.PutOptions{})
			return err
		})
	}
	require.NoError(t, g.Wait())
	putString(t, s, "keep", "x", store.PutOptions{})

	require.NoError(t, s.DeleteMany(ctx, append(keys, "k/missing")))
	assert.EqualValues(t, 2, ct.deletes.Load())
	page, err := s.List(ctx, store.ListRequest{})
	require.NoError(t, err)
	require.Len(t, page.Objects, 1)
	assert.Equal(t, "keep", page.Objects[0].Key)
	require.NoError(t, s.DeleteMany(ctx, nil))
	assert.EqualValues(t, 2, ct.deletes.Load(), "no keys, no request")
}

func TestList(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	for _, k := range []string{"a/1", "a/2", "a/3", "b/x/1", "b/y", "c"} {
		putString(t, s, k, "xy", store.PutOptions{})
	}
	p, err := s.List(ctx, store.ListRequest{Prefix: "a/", MaxKeys: 2})
	require.NoError(t, err)
	require.Len(t, p.Objects, 2)
	assert.Equal(t, "a/1", p.Objects[0].Key)
	assert.EqualValues(t, 2, p.Objects[0].Size)
	assert.NotEmpty(t, p.Objects[0].ETag)
	assert.NotContains(t, p.Objects[0].ETag, `"`)
	assert.False(t, p.Objects[0].LastModified.IsZero())
	require.NotEmpty(t, p.Next)
	p, err = s.List(ctx, store.ListRequest{Prefix: "a/", MaxKeys: 2, Token: p.Next, StartAfter: "zzz"})
	require.NoError(t, err)
	require.Len(t, p.Objects, 1, "StartAfter is ignored with a token")
	assert.Equal(t, "a/3", p.Objects[0].Key)
	assert.Empty(t, p.Next)

	p, err = s.List(ctx, store.ListRequest{Delimiter: "/"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a/", "b/"}, p.Prefixes)
	require.Len(t, p.Objects, 1)
	assert.Equal(t, "c", p.Objects[0].Key)

	p, err = s.List(ctx, store.ListRequest{StartAfter: "a/3"})
	require.NoError(t, err)
	require.Len(t, p.Objects, 3)
	assert.Equal(t, "b/x/1", p.Objects[0].Key)
}

// onlyReader hides every method but Read.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestMultipart(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	const size = 40 << 20
	data := make([]byte, size)
	_, err := rand.Read(data)
	require.NoError(t, err)
	want := sha256.Sum256(data)

	for _, c := range []struct {
		name string
		body func() io.Reader
		size int64
	}{
		{"known-size", func() io.Reader { return bytes.NewReader(data) }, size},
		{"seeker", func() io.Reader { return bytes.NewReader(data) }, 0},
		{"stream", func() io.Reader { return onlyReader{bytes.NewReader(data)} }, 0},
		{"stream-known-size", func() io.Reader { return onlyReader{bytes.NewReader(data)} }, size},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "big/" + c.name
			a, err := s.Put(ctx, key, c.body(), store.PutOptions{Size: c.size, ContentType: "application/octet-stream", Metadata: map[string]string{"m": "1"}})
			require.NoError(t, err)
			require.NotEmpty(t, a.ETag)
			assert.EqualValues(t, size, a.Size)
			assert.WithinDuration(t, time.Now(), a.ServerTime, time.Minute)

			rc, ga, err := s.Get(ctx, key)
			require.NoError(t, err)
			defer rc.Close()
			h := sha256.New()
			n, err := io.Copy(h, rc)
			require.NoError(t, err)
			assert.EqualValues(t, size, n)
			assert.EqualValues(t, size, ga.Size)
			assert.Equal(t, a.ETag, ga.ETag)
			assert.Equal(t, map[string]string{"m": "1"}, ga.Metadata)
			assert.Equal(t, want[:], h.Sum(nil), "content differs after the round trip")
		})
	}

	t.Run("conditional", func(t *testing.T) {
		a, err := s.Head(ctx, "big/stream")
		require.NoError(t, err)
		refused(t, s, "big/stream", a.ETag, data, store.PutOptions{Size: size, IfNoneMatch: true})
		refused(t, s, "big/stream", a.ETag, data, store.PutOptions{Size: size, IfMatch: "0" + a.ETag})
		_, err = s.Put(ctx, "big/stream", bytes.NewReader(data), store.PutOptions{Size: size, IfMatch: a.ETag})
		require.NoError(t, err)
		_, err = s.Put(ctx, "big/new", bytes.NewReader(data), store.PutOptions{Size: size, IfNoneMatch: true})
		require.NoError(t, err)
	})
}

// refused puts data at key under opts, whose condition fails, and requires
// the store's refusal. versitygw may answer a failed condition before it has
// read a large body and then close the connection; a client still sending
// sees the reset, not the answer, and the driver rightly reports an unknown
// outcome. Then the object must be unchanged (etag), and the put is sent
// again until the answer gets through.
func refused(t *testing.T, s *s3.Store, key, etag string, data []byte, opts store.PutOptions) {
	t.Helper()
	ctx := context.Background()
	for attempt := 1; ; attempt++ {
		_, err := s.Put(ctx, key, bytes.NewReader(data), opts)
		if errors.Is(err, store.ErrPrecondition) {
			return
		}
		require.Error(t, err, "a put whose condition fails must not succeed")
		require.NotErrorIs(t, err, store.ErrConflict)
		require.Less(t, attempt, 5, "the refusal never reached the client: %v", err)
		a, herr := s.Head(ctx, key)
		require.NoError(t, herr)
		require.Equal(t, etag, a.ETag, "a put whose condition fails changed %s: %v", key, err)
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := newStore(t)
		return s
	})
}

// TestConformanceGofakes3 runs the suite against a second S3
// implementation, with the capabilities it lacks declared.
func TestConformanceGofakes3(t *testing.T) {
	srv := withEnv(testenv.Gofakes3(t))
	storetest.RunWith(t, srv.Conformance, func(t *testing.T) store.Store {
		s, _ := newStoreOn(t, srv)
		return s
	})
}

// TestLargeConditionalGofakes3: on a real server that ignores conditions
// on multipart completion, 20 MiB conditional writes still hold.
func TestLargeConditionalGofakes3(t *testing.T) {
	s, _ := newStoreOn(t, withEnv(testenv.Gofakes3(t)))
	storetest.LargeConditional(t, s)
}

// TestConditionalNeverMultipart: against a server without conditional
// multipart completion, a 20 MiB conditional write still holds,
// because it goes up as one PutObject.
func TestConditionalNeverMultipart(t *testing.T) {
	spy := &faults.ConditionalMultipartSpy{}
	s, _ := newStore(t, func(o *s3.Options) { o.HTTPClient = &http.Client{Transport: spy} })
	storetest.LargeConditional(t, s)
	assert.Zero(t, spy.Refused.Load(), "a conditional write went up as a multipart upload")
}

// TestEncryptionAndStorageClassReachTheWire: the store's encryption and
// storage class go with every request that creates an object, in one
// request or in parts, and a customer key with every part and every read.
func TestEncryptionAndStorageClassReachTheWire(t *testing.T) {
	for _, c := range testenv.S3ObjectSettingsCases() {
		t.Run(c.Name, func(t *testing.T) {
			rec := &faults.Recorder{}
			s, _ := newStore(t, func(o *s3.Options) {
				o.HTTPClient = &http.Client{Transport: rec}
				o.Encryption, o.StorageClass = c.Encryption, c.Class
			})
			testenv.CheckS3ObjectSettings(t, s, rec, c, s3.PartThreshold+1)
		})
	}
}
