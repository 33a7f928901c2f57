package azblob_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
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
	status    int
	noRequest bool // leave the response's Request unset
	n         atomic.Int64
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
	resp := &http.Response{
		StatusCode: c.status, Status: http.StatusText(c.status), Request: r,
		Header: http.Header{"Content-Type": {"application/xml"}, "X-Ms-Error-Code": {code}},
		Body:   io.NopCloser(strings.NewReader(body)),
	}
	if c.noRequest {
		resp.Request = nil
	}
	return resp, nil
}

// TestThrottledRequestsGetMoreAttempts: a read, a write and a listing that
// meet a 500 or a refused connection end after 3 attempts, and after 10
// when they meet a 503 (ServerBusy) or a 429, the service's answers to a
// client that goes too fast. Each operation counts its own attempts: three
// in a row on one store, and eight at once, each get as many. A refused
// connection is still reported as one, naming the endpoint.
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
			for range 3 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err = op(ctx, s)
				cancel()
				require.Error(t, err, "%s answered %d", name, c.status)
			}
			assert.Equal(t, 3*c.want, rt.n.Load(), "attempts of 3 %ss in a row answered %d: %v", name, c.status, err)
			if c.status == 0 {
				assert.Contains(t, err.Error(), "cannot reach Azure Blob endpoint")
				_, refused := errors.AsType[*net.OpError](err)
				assert.True(t, refused, "the refused connection is not in the chain of %v", err)
			}

			rt.n.Store(0)
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					op(ctx, s) //nolint:errcheck // the attempts are what counts
				})
			}
			wg.Wait()
			assert.Equal(t, 8*c.want, rt.n.Load(), "attempts of 8 %ss at once answered %d", name, c.status)
		}
	}
}

// TestAnswerWithoutItsRequestGetsItsAttempts: a transport that leaves a
// response's Request unset still gets 3 attempts at a 500.
func TestAnswerWithoutItsRequestGetsItsAttempts(t *testing.T) {
	defer azblob.SetRetryDelays(time.Millisecond, 10*time.Millisecond)()
	const endpoint = "http://127.0.0.1:1/" + testenv.AzuriteAccount
	rt := &cannedRT{status: http.StatusInternalServerError, noRequest: true}
	s, err := azblob.New(azblob.Options{Container: "c-1", ServiceURL: endpoint,
		ConnectionString: testenv.AzuriteConnectionString(endpoint), HTTPClient: &http.Client{Transport: rt}})
	require.NoError(t, err)
	_, err = s.Head(context.Background(), "k")
	require.Error(t, err)
	assert.EqualValues(t, 3, rt.n.Load())
}
