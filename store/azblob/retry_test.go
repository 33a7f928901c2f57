package azblob_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/azblob"
)

// cannedRT answers every request with status, or with a refused
// connection when status is 0, and counts them.
type cannedRT struct {
	status int
	n      atomic.Int64
}

func (c *cannedRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	if r.Body != nil {
		io.Copy(io.Discard, r.Body) //nolint:errcheck // the answer is canned
		r.Body.Close()
	}
	if c.status == 0 {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	code := map[int]string{http.StatusServiceUnavailable: "ServerBusy", http.StatusTooManyRequests: "ServerBusy"}[c.status]
	if code == "" {
		code = "InternalError"
	}
	body := fmt.Sprintf(`<?xml version="1.0" encoding="utf-8"?><Error><Code>%s</Code><Message>canned answer</Message></Error>`, code)
	return &http.Response{
		StatusCode: c.status, Status: http.StatusText(c.status), Request: r,
		Header: http.Header{"Content-Type": {"application/xml"}, "X-Ms-Error-Code": {code}},
		Body:   io.NopCloser(strings.NewReader(body)),
	}, nil
}

// TestThrottledRequestsGetMoreAttempts: a read, a write and a listing that
// meet a 500 or a refused connection end after 3 attempts, and after 10 when they meet a 503
// (ServerBusy) or a 429, the service's answers to a client that goes too
// fast.
func TestThrottledRequestsGetMoreAttempts(t *testing.T) {
	defer azblob.SetRetryDelays(time.Millisecond, 10*time.Millisecond)()
	ops := map[string]func(context.Context, store.Store) error{
		"get": func(ctx context.Context, s store.Store) error {
			rc, _, err := s.Get(ctx, "k")
			if err == nil {
				rc.Close()
			}
			return err
		},
		"put": func(ctx context.Context, s store.Store) error {
			_, err := s.Put(ctx, "k", bytes.NewReader([]byte("v")), store.PutOptions{Size: 1})
			return err
		},
		"list": func(ctx context.Context, s store.Store) error {
			_, err := s.List(ctx, store.ListRequest{Prefix: "p/"})
			return err
		},
	}
	const endpoint = "http://127.0.0.1:1/" + testenv.AzuriteAccount
	for _, c := range []struct {
		status int
		want   int64
	}{{http.StatusInternalServerError, 3}, {0, 3}, {http.StatusServiceUnavailable, 10}, {http.StatusTooManyRequests, 10}} {
		for name, op := range ops {
			rt := &cannedRT{status: c.status}
			s, err := azblob.New(azblob.Options{Container: "c-1", ServiceURL: endpoint,
				ConnectionString: testenv.AzuriteConnectionString(endpoint), HTTPClient: &http.Client{Transport: rt}})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err = op(ctx, s)
			cancel()
			require.Error(t, err, "%s answered %d", name, c.status)
			assert.Equal(t, c.want, rt.n.Load(), "attempts of a %s answered %d: %v", name, c.status, err)
		}
	}
}
