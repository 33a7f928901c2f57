package partupload_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store/internal/partupload"
)

const (
	// noticed bounds how long a test waits to see a request return early,
	// when returning is the failure. A wrapper that does not settle returns
	// within milliseconds of the cancellation; under load it may take
	// longer, which makes the test less sensitive, never flaky.
	noticed = 2 * time.Second
	// hung bounds how long a test waits for a request that must return,
	// when not returning is the failure.
	hung = 30 * time.Second
)

// held is a server whose handler reads the request body, up to limit
// bytes, reports it on got, and answers only once release is closed.
type held struct {
	srv     *httptest.Server
	got     chan int64 // bytes read before holding
	release chan struct{}
	rest    chan error // the error of reading the rest of the body, after release
}

func newHeld(t *testing.T, limit int64) *held {
	h := &held{got: make(chan int64, 1), release: make(chan struct{}), rest: make(chan error, 1)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, limit))
		h.got <- n
		<-h.release
		_, err := io.Copy(io.Discard, r.Body)
		h.rest <- err
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(func() {
		select {
		case <-h.release:
		default:
			close(h.release)
		}
		h.srv.Close()
	})
	return h
}

type result struct {
	resp *http.Response
	err  error
}

// start sends a PUT of size bytes to path on h with rt, on ctx.
func start(ctx context.Context, t *testing.T, rt http.RoundTripper, h *held, path string, size int) <-chan result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, h.srv.URL+path, bytes.NewReader(make([]byte, size)))
	require.NoError(t, err)
	done := make(chan result, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- result{resp, err}
	}()
	return done
}

const partPath = "/bucket/key?partNumber=1&uploadId=u1"

func transport(t *testing.T) http.RoundTripper {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return partupload.RoundTripper(tr)
}

// TestDeliveredPartIsAnswered: a part whose body the server has in full is
// waited for after the caller's context is cancelled, and its answer is
// returned.
func TestDeliveredPartIsAnswered(t *testing.T) {
	const size = 1 << 20
	h := newHeld(t, size)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := start(ctx, t, transport(t), h, partPath, size)
	require.EqualValues(t, size, <-h.got)
	cancel()
	select {
	case r := <-done:
		t.Fatalf("the part returned before the server answered it: %v", r.err)
	case <-time.After(noticed):
	}
	close(h.release)
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusOK, r.resp.StatusCode)
}

// TestUndeliveredPartIsCut: a part whose body has not been handed over in
// full when the context is cancelled returns at once with the caller's
// error, and the server gets a short body.
func TestUndeliveredPartIsCut(t *testing.T) {
	const size = 64 << 20 // far more than the socket buffers hold
	h := newHeld(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := start(ctx, t, transport(t), h, partPath, size)
	require.EqualValues(t, 1, <-h.got)
	cancel()
	select {
	case r := <-done:
		assert.ErrorIs(t, r.err, context.Canceled)
	case <-time.After(hung):
		t.Fatal("a cancelled part with most of its body unsent did not return")
	}
	close(h.release)
	assert.Error(t, <-h.rest, "the server read the whole body of a cut part")
}

// TestOtherRequestsAreNotHeld: a PUT that is not an UploadPart is cancelled
// as the transport below cancels it, even with its body delivered.
func TestOtherRequestsAreNotHeld(t *testing.T) {
	const size = 1 << 10
	h := newHeld(t, size)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := start(ctx, t, transport(t), h, "/bucket/key", size)
	require.EqualValues(t, size, <-h.got)
	cancel()
	select {
	case r := <-done:
		assert.ErrorIs(t, r.err, context.Canceled)
	case <-time.After(hung):
		t.Fatal("a cancelled PUT waited for its answer")
	}
}

// rereading is a transport that sends a request the way net/http does after
// a lost connection: with a fresh body from GetBody. It reads that body to
// the end, then waits for release or the request's context.
type rereading struct{ read, release chan struct{} }

func (rr rereading) RoundTrip(req *http.Request) (*http.Response, error) {
	b, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(io.Discard, b); err != nil {
		return nil, err
	}
	close(rr.read)
	select {
	case <-rr.release:
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
}

// TestResentPartIsAnswered: a body from GetBody counts as handed over too.
func TestResentPartIsAnswered(t *testing.T) {
	rr := rereading{read: make(chan struct{}), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://127.0.0.1:1"+partPath, bytes.NewReader(make([]byte, 100)))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		resp, err := partupload.RoundTripper(rr).RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-rr.read
	cancel()
	select {
	case err := <-done:
		t.Fatalf("a resent part returned before its answer: %v", err)
	case <-time.After(noticed):
	}
	close(rr.release)
	require.NoError(t, <-done)
}

// TestUploadPart: only a PUT with partNumber and uploadId is a part.
func TestUploadPart(t *testing.T) {
	for url, want := range map[string]bool{
		"http://h/b/k?partNumber=1&uploadId=x": true,
		"http://h/b/k?uploadId=x&partNumber=2": true,
		"http://h/b/k?uploadId=x":              false,
		"http://h/b/k?partNumber=1":            false,
		"http://h/b/k":                         false,
	} {
		req, err := http.NewRequest(http.MethodPut, url, nil)
		require.NoError(t, err)
		assert.Equal(t, want, partupload.UploadPart(req), url)
	}
	req, err := http.NewRequest(http.MethodPost, "http://h/b/k?partNumber=1&uploadId=x", nil)
	require.NoError(t, err)
	assert.False(t, partupload.UploadPart(req), "a POST")
}

// lagging is a transport that reads all but the last byte of a request
// body, waits for the request's context to end, and then tries to read the
// rest, as net/http's writer may when a cancellation races with it.
type lagging struct {
	size int
	read chan struct{}
	rest chan []byte
}

func (l lagging) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, err := io.ReadFull(req.Body, make([]byte, l.size-1)); err != nil {
		return nil, err
	}
	close(l.read)
	<-req.Context().Done()
	rest, _ := io.ReadAll(req.Body)
	l.rest <- rest
	return nil, req.Context().Err()
}

// TestCutPartNeverHandsOverItsEnd: once a part is cut, its body hands over
// no more bytes, so a cut request never reaches the server whole.
func TestCutPartNeverHandsOverItsEnd(t *testing.T) {
	l := lagging{size: 100, read: make(chan struct{}), rest: make(chan []byte, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://127.0.0.1:1"+partPath, bytes.NewReader(make([]byte, l.size)))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := partupload.RoundTripper(l).RoundTrip(req)
		done <- err
	}()
	<-l.read
	cancel()
	assert.Empty(t, <-l.rest, "a cut part handed over the rest of its body")
	assert.ErrorIs(t, <-done, context.Canceled)
}
