package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/wanproxy"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/s3"
)

// putMany puts n small objects under prefix with 256 workers, as put does
// on a remote store, and returns how long they took.
func putMany(t *testing.T, s store.Store, prefix string, n int) time.Duration {
	t.Helper()
	start := time.Now()
	var g errgroup.Group
	g.SetLimit(store.MaxTransfers)
	for i := range n {
		g.Go(func() error {
			_, err := s.Put(context.Background(), fmt.Sprintf("%s%05d", prefix, i), strings.NewReader("x"), store.PutOptions{Size: 1})
			return err
		})
	}
	require.NoError(t, g.Wait(), "puts under %s", prefix)
	return time.Since(start)
}

// TestWindowSettlesAtTheServiceRate: the S3 server, 50 ms away each way,
// answers SlowDown above a rate. Many concurrent puts all succeed. Once
// the window has settled (a first batch of puts shrinks it from the 256
// it reached without a throttle), few requests are throttled and the puts
// go through near the rate. The
// rate is half of what the same puts reach without a throttle in this
// run, so that a loaded machine still serves it; the round trip is long
// enough that the window at that rate holds several requests even then.
func TestWindowSettlesAtTheServiceRate(t *testing.T) {
	srv := server(t)
	p, err := wanproxy.Start("127.0.0.1:0", srv.Endpoint, 50*time.Millisecond, nil)
	require.NoError(t, err)
	defer p.Close()
	s, _ := newStoreOn(t, srv, func(o *s3.Options) { o.Endpoint = p.URL })

	const free = 1000
	capacity := free / putMany(t, s, "free/", free).Seconds()
	rate := capacity / 2
	p.Throttle(rate, max(1, int(rate/4)))
	putMany(t, s, "settling/", int(rate*2))
	p.Reset()
	n := int(rate * 4)
	took := putMany(t, s, "throttled/", n)
	c := p.Counts()
	forwarded, throttled := c.Forwarded, c.Throttled
	got := float64(n) / took.Seconds()
	t.Logf("%.0f puts/s without a throttle; at a rate of %.0f: %d puts in %s, %.0f/s; %d requests forwarded, %d throttled",
		capacity, rate, n, took.Round(time.Millisecond), got, forwarded, throttled)
	require.GreaterOrEqual(t, got, 0.5*rate, "the puts went through well below the service's rate")
	require.LessOrEqual(t, throttled, forwarded/3, "the window did not shrink to the service's rate")
}

// cannedRT answers every request with status and an S3 error code, and
// counts the requests it got.
type cannedRT struct {
	status int
	code   string
	n      atomic.Int64
}

func (c *cannedRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	if r.Body != nil {
		io.Copy(io.Discard, r.Body) //nolint:errcheck // test
		r.Body.Close()
	}
	body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + c.code + `</Code><Message>m</Message><RequestId>r</RequestId></Error>`
	return &http.Response{
		StatusCode: c.status, Status: http.StatusText(c.status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/xml"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}, nil
}

// attemptsOf returns how many requests one Get sends to a service that
// answers status/code to every one, and the error.
func attemptsOf(t *testing.T, status int, code string) (int64, error) {
	t.Helper()
	server(t) // credentials
	rt := &cannedRT{status: status, code: code}
	s, err := s3.New(context.Background(), s3.Options{Bucket: "b", Endpoint: "http://127.0.0.1:1", PathStyle: true,
		HTTPClient: &http.Client{Transport: rt}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rc, _, err := s.Get(ctx, "k")
	if err == nil {
		rc.Close()
	}
	return rt.n.Load(), err
}

// TestThrottledRequestsGetMoreAttempts: a 500 ends an operation after 3
// attempts, a 503 (a throttle, even without its code) after 10, with
// AWS_MAX_ATTEMPTS unset or set to 3; the error keeps the API error in its
// chain.
func TestThrottledRequestsGetMoreAttempts(t *testing.T) {
	defer s3.SetMaxBackoff(10 * time.Millisecond)()
	for _, env := range []string{"", "3"} {
		t.Run("AWS_MAX_ATTEMPTS="+env, func(t *testing.T) {
			t.Setenv("AWS_MAX_ATTEMPTS", env)
			n, err := attemptsOf(t, http.StatusInternalServerError, "InternalError")
			assert.EqualValues(t, 3, n, "attempts of a 500")
			var ae smithy.APIError
			require.True(t, errors.As(err, &ae), "%v", err)
			n, err = attemptsOf(t, http.StatusServiceUnavailable, "ServiceUnavailable")
			assert.EqualValues(t, 10, n, "attempts of a 503")
			require.True(t, errors.As(err, &ae), "%v", err)
			assert.Equal(t, "ServiceUnavailable", ae.ErrorCode())
			assert.NotErrorIs(t, err, store.ErrNotExist)
			assert.NotErrorIs(t, err, store.ErrPrecondition)
		})
	}
}

// holdingRT holds every UploadPart of a key under prefix until release is
// closed or the request's context ends, as a slow link would; it reports
// on created each multipart upload started under other.
type holdingRT struct {
	base    http.RoundTripper
	prefix  string
	other   string
	held    chan struct{}
	created chan struct{}
	release chan struct{}
}

func (h *holdingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	if r.Method == http.MethodPost && q.Has("uploads") && strings.Contains(r.URL.Path, h.other) {
		defer func() {
			select {
			case h.created <- struct{}{}:
			default:
			}
		}()
	}
	if r.Method == http.MethodPut && q.Has("partNumber") && strings.Contains(r.URL.Path, h.prefix) {
		select {
		case h.held <- struct{}{}:
		default:
		}
		select {
		case <-h.release:
		case <-r.Context().Done():
			if r.Body != nil {
				r.Body.Close()
			}
			return nil, r.Context().Err()
		}
	}
	return h.base.RoundTrip(r)
}

// waitOn waits for what to happen (a value on ch), for at most two minutes.
func waitOn(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(2 * time.Minute):
		t.Fatalf("no %s in two minutes", what)
	}
}

// heldWindow returns a store on a fresh bucket whose window of 1 is held
// by the first part of a slow upload (slow/b, under way when it returns),
// the function that releases that part, and where the upload's error
// arrives. Its transport reports on h.created each multipart upload started
// under other.
func heldWindow(t *testing.T, other string) (store.Store, string, *holdingRT, func(), chan error) {
	t.Helper()
	s, bucket, h, release := holdingStore(t, other)
	return s, bucket, h, release, slowUpload(t, s, h)
}

// holdingStore returns a store on a fresh bucket with a window of 1, whose
// part uploads under slow/ are held until release is called.
func holdingStore(t *testing.T, other string) (store.Store, string, *holdingRT, func()) {
	t.Helper()
	srv := server(t)
	bucket := srv.NewBucket(t)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	h := &holdingRT{base: tr, prefix: "/slow/", other: other,
		held: make(chan struct{}, 1), created: make(chan struct{}, 1), release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(h.release) }) }
	t.Cleanup(release)
	s, err := s3.New(context.Background(), s3.Options{Bucket: bucket, Endpoint: srv.Endpoint, PathStyle: true,
		Transfers: 1, HTTPClient: &http.Client{Transport: h}})
	require.NoError(t, err)
	return s, bucket, h, release
}

// slowUpload starts a multipart upload to slow/b on s and returns once its
// first part is held, the only place in the window taken; its outcome
// comes on the channel returned.
func slowUpload(t *testing.T, s store.Store, h *holdingRT) chan error {
	t.Helper()
	const size = 3 * (8 << 20)
	done := make(chan error, 1)
	go func() {
		_, err := s.Put(context.Background(), "slow/b", bytes.NewReader(make([]byte, size)), store.PutOptions{Size: size})
		done <- err
	}()
	waitOn(t, h.held, "the slow upload's first part")
	return done
}

// TestAbortGoesAheadOfTheWindow: with a window of 1 held by a part of a
// slow upload, another upload is cancelled while its parts wait. Its abort
// goes out at once, not behind the held part: the cancelled Put returns
// while the part is still held, and leaves no multipart upload behind.
func TestAbortGoesAheadOfTheWindow(t *testing.T) {
	s, bucket, h, release, bDone := heldWindow(t, "/cancelled/")
	const size = 3 * (8 << 20)
	actx, acancel := context.WithCancel(context.Background())
	defer acancel()
	aDone := make(chan error, 1)
	go func() {
		_, err := s.Put(actx, "cancelled/a", bytes.NewReader(make([]byte, size)), store.PutOptions{Size: size})
		aDone <- err
	}()
	// Its parts queue behind the held one.
	waitOn(t, h.created, "the start of the upload to cancel, behind the held part")
	acancel()
	select {
	case err := <-aDone:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(2 * time.Minute):
		t.Fatal("the cancelled Put waited behind the held part")
	}
	for _, k := range uploads(bucket)(t) {
		assert.False(t, strings.HasPrefix(k, "cancelled/"), "the cancelled Put left its multipart upload %s", k)
	}
	release()
	require.NoError(t, <-bDone)
}

// TestPointerAndLeaseRequestsGoAheadOfTheWindow: with a window of 1 held by
// a part of a slow upload, a pointer's read and write and a lease's
// acquisition, read, renewal and release go out at once.
func TestPointerAndLeaseRequestsGoAheadOfTheWindow(t *testing.T) {
	s, _, _, release, bDone := heldWindow(t, "")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, _, err := pointer.Read(ctx, s)
	require.ErrorIs(t, err, store.ErrNotExist, "the pointer's read")
	gen, err := generation.New()
	require.NoError(t, err)
	p := &pointer.Pointer{Seq: 1, Generation: gen, Manifest: generation.ManifestKey(gen), ManifestSHA256: strings.Repeat("0", 64)}
	_, err = pointer.Write(ctx, s, p, "")
	require.NoError(t, err, "the pointer's write")
	l, err := lease.TryAcquire(ctx, s, "job", lease.Options{Owner: "me", TTL: time.Minute})
	require.NoError(t, err, "the lease's acquisition")
	_, err = lease.TryAcquire(ctx, s, "job", lease.Options{Owner: "other", TTL: time.Minute})
	require.ErrorIs(t, err, lease.ErrHeld, "another owner's attempt, which reads the lease")
	require.NoError(t, l.Renew(ctx), "the lease's renewal")
	require.NoError(t, l.Release(ctx), "the lease's release")
	select {
	case err := <-bDone:
		t.Fatalf("the slow upload ended (%v) while its part was held", err)
	default:
	}
	release()
	require.NoError(t, <-bDone)
}

// TestPinRenewalGoesAheadOfTheWindow: a pin's renewal, which must land
// within its TTL, goes out at once while the window is held by a part of a
// slow upload.
func TestPinRenewalGoesAheadOfTheWindow(t *testing.T) {
	s, _, h, release := holdingStore(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := commit.New(s)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutBytes(ctx, "a", []byte("A")))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	pin, err := snap.Pin(ctx, time.Minute, "reader")
	require.NoError(t, err)

	done := slowUpload(t, s, h)
	// Far longer than a renewal on loopback takes, far shorter than the
	// held part, which waits for release.
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	require.NoError(t, pin.Renew(rctx), "the pin's renewal")
	select {
	case err := <-done:
		t.Fatalf("the slow upload ended (%v) while its part was held", err)
	default:
	}
	release()
	require.NoError(t, <-done)
}

// TestTransfersPinTheWindow: a driver opened with Transfers 2 keeps at
// most 2 requests in flight, however many its callers send at once.
func TestTransfersPinTheWindow(t *testing.T) {
	srv := server(t)
	p, err := wanproxy.Start("127.0.0.1:0", srv.Endpoint, 10*time.Millisecond, nil)
	require.NoError(t, err)
	defer p.Close()
	s, _ := newStoreOn(t, srv, func(o *s3.Options) { o.Endpoint, o.Transfers = p.URL, 2 })
	putMany(t, s, "pinned/", 40)
	if m := p.Counts().MaxInFlight; m > 2 {
		t.Fatalf("%d requests in flight at most, want 2", m)
	}
}
