package reliability_test

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/fs"
	"github.com/commitptr/commitptr/store/mem"
	"github.com/commitptr/commitptr/store/minio"
	"github.com/commitptr/commitptr/store/s3"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// long reports whether COMMITPTR_LONG asks for the long runs.
func long() bool {
	v, _ := strconv.ParseBool(os.Getenv("COMMITPTR_LONG"))
	return v
}

// seed returns COMMITPTR_SEED, or def.
func seed(t testing.TB, def uint64) uint64 {
	v := os.Getenv("COMMITPTR_SEED")
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	require.NoError(t, err, "COMMITPTR_SEED")
	return n
}

// drivers returns the drivers a test runs on: mem and s3, plus fs and
// minio in long mode.
func drivers() []string {
	if long() {
		return []string{"mem", "fs", "s3", "minio"}
	}
	return []string{"mem", "s3"}
}

// defaultRates are the fault probabilities per request of the
// linearizability and soak runs. With the SDKs' retries on, most faults are
// absorbed; the lost responses of conditional writes come back as spurious
// 412s, which the commit protocol must resolve.
var defaultRates = faults.Rates{
	faults.Lost:     0.03,
	faults.Reset:    0.01,
	faults.Refused:  0.01,
	faults.Internal: 0.01,
	faults.SlowDown: 0.01,
	faults.Conflict: 0.02,
	faults.Latency:  0.05,
	faults.Cut:      0.005,
}

// target is a store under test: faulty sends requests through the
// injector; clean reaches the same data without faults, for verification.
type target struct {
	name   string
	faulty store.Store
	clean  store.Store
	in     *faults.Injector
}

// newTarget returns a fresh, empty store of the driver with faults from in.
// The emulated retries of mem and fs match the SDKs' default of 3 attempts.
func newTarget(t testing.TB, driver string, in *faults.Injector) target {
	t.Helper()
	switch driver {
	case "mem":
		m := mem.New()
		return target{driver, in.Store(m, 2), m, in}
	case "fs":
		s, err := fs.New(t.TempDir())
		require.NoError(t, err)
		return target{driver, in.Store(s, 2), s, in}
	}
	bucket := newBucket(t)
	base := newHTTPTransport()
	t.Cleanup(base.CloseIdleConnections)
	return target{driver, openRemote(t, driver, bucket, in.Transport(base)), openRemote(t, driver, bucket, base), in}
}

// newBucket returns a fresh bucket of the shared S3 test server.
func newBucket(t testing.TB) string {
	t.Helper()
	srv := testenv.S3(t)
	srv.UseCredentials()
	return srv.NewBucket(t)
}

// openRemote opens the s3 or minio driver on bucket of the shared S3 test
// server, sending its requests through rt.
func openRemote(t testing.TB, driver, bucket string, rt http.RoundTripper) store.Store {
	t.Helper()
	srv := testenv.S3(t)
	ctx := context.Background()
	var s store.Store
	var err error
	switch driver {
	case "s3":
		s, err = s3.New(ctx, s3.Options{Bucket: bucket, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
			HTTPClient: &http.Client{Transport: rt}})
	case "minio":
		s, err = minio.New(ctx, minio.Options{Bucket: bucket, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
			Transport: rt})
	default:
		t.Fatalf("unknown driver %q", driver)
	}
	require.NoError(t, err)
	return s
}

// newHTTPTransport returns a transport that keeps enough idle connections
// for many concurrent clients on one host, so that thousands of requests do
// not churn through ephemeral ports.
func newHTTPTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 64
	tr.IdleConnTimeout = 30 * time.Second
	return tr
}

// envDuration returns the duration in env var name, or def.
func envDuration(t testing.TB, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, name)
	return d
}
