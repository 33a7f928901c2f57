package azblob_test

import (
	"context"
	"errors"
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
	"github.com/commitptr/commitptr/store/storetest"
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
// client that goes too fast; each operation counts its own. A refused
// connection is still reported as one, naming the endpoint.
func TestThrottledRequestsGetMoreAttempts(t *testing.T) {
	defer azblob.SetRetryDelays(time.Millisecond, 10*time.Millisecond)()
	const endpoint = "http://127.0.0.1:1/" + testenv.AzuriteAccount
	storetest.Attempts(t, []storetest.AttemptCase{
		{Status: http.StatusInternalServerError, Want: 3},
		{Status: 0, Want: 3},
		{Status: http.StatusServiceUnavailable, Want: 10},
		{Status: http.StatusTooManyRequests, Want: 10},
	}, func(t *testing.T, status int) (store.Store, *atomic.Int64) {
		rt := &cannedRT{status: status}
		s, err := azblob.New(azblob.Options{Container: "c-1", ServiceURL: endpoint,
			ConnectionString: testenv.AzuriteConnectionString(endpoint), HTTPClient: &http.Client{Transport: rt}})
		require.NoError(t, err)
		return s, &rt.n
	}, func(t *testing.T, status int, err error) {
		if status == 0 {
			assert.Contains(t, err.Error(), "cannot reach Azure Blob endpoint")
			_, refused := errors.AsType[*net.OpError](err)
			assert.True(t, refused, "the refused connection is not in the chain of %v", err)
		}
	})
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
