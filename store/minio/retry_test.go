package minio_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
)

// brokenUpload fails the first PUT the way a connection reset mid-upload
// does in net/http: RoundTrip returns an error while a writer goroutine
// still reads the request body. minio-go then seeks that body back to the
// start and sends it again.
type brokenUpload struct {
	failed atomic.Bool
	// last is the error that ended the stray reads of the failed attempt.
	last chan error
}

func (b *brokenUpload) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPut || !b.failed.CompareAndSwap(false, true) {
		return http.DefaultTransport.RoundTrip(req)
	}
	body := req.Body
	go func() {
		buf := make([]byte, 512)
		for {
			if _, err := body.Read(buf); err != nil {
				b.last <- err
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return nil, &net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET}
}

// TestRetryAfterBrokenUpload: the failed attempt's stray reads never reach
// the body that minio-go rewinds for its retry (under -race, they would be
// a data race), and the retry stores exactly the bytes given.
func TestRetryAfterBrokenUpload(t *testing.T) {
	tr := &brokenUpload{last: make(chan error, 1)}
	opts := options(t)
	opts.Transport = tr
	s := newStore(t, opts)
	ctx := context.Background()
	data := make([]byte, 256<<10)
	_, err := rand.Read(data)
	require.NoError(t, err)

	_, err = s.Put(ctx, "k", bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
	require.NoError(t, err)
	require.True(t, tr.failed.Load(), "the first attempt was broken")
	select {
	case err := <-tr.last:
		assert.ErrorContains(t, err, "after its round trip ended", "the stray reads were cut off, not served from the retried body")
	case <-time.After(10 * time.Second):
		t.Fatal("the stray reads of the failed attempt never ended")
	}
	got, _ := read(t, s, "k")
	assert.Equal(t, data, []byte(got))
}

// TestRetryFromTheBodysOffset: minio-go rewinds a body with Seek(0,
// io.SeekStart) for its retry; a seekable body at a nonzero offset is
// sent again from that offset, not from the caller's 0.
func TestRetryFromTheBodysOffset(t *testing.T) {
	tr := &brokenUpload{last: make(chan error, 1)}
	opts := options(t)
	opts.Transport = tr
	s := newStore(t, opts)
	ctx := context.Background()
	const offset = 7
	data := make([]byte, offset+256<<10)
	_, err := rand.Read(data)
	require.NoError(t, err)
	body := bytes.NewReader(data)
	_, err = body.Seek(offset, io.SeekStart)
	require.NoError(t, err)

	_, err = s.Put(ctx, "k", body, store.PutOptions{Size: int64(len(data) - offset)})
	require.NoError(t, err)
	require.True(t, tr.failed.Load(), "the first attempt was broken")
	got, _ := read(t, s, "k")
	assert.True(t, bytes.Equal(data[offset:], []byte(got)), "the retry sent other bytes than the body from its offset")
}
