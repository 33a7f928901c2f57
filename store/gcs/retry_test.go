package gcs_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/googleapi"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/gcs"
	"github.com/commitptr/commitptr/store/storetest"
)

// cannedRT answers every request with status and counts them.
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
	body := fmt.Sprintf(`{"error":{"code":%d,"message":"canned answer"}}`, c.status)
	return &http.Response{
		StatusCode: c.status, Status: http.StatusText(c.status), Request: r,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   io.NopCloser(strings.NewReader(body)),
	}, nil
}

// TestThrottledRequestsGetMoreAttempts: a read, a write and a listing that
// meet a 500 end after 3 attempts, and after 10 when they meet a 503 or a
// 429, the service's answers to a client that goes too fast; each
// operation counts its own.
func TestThrottledRequestsGetMoreAttempts(t *testing.T) {
	defer gcs.SetMaxBackoff(10 * time.Millisecond)()
	storetest.Attempts(t, []storetest.AttemptCase{
		{Status: http.StatusInternalServerError, Want: 3},
		{Status: http.StatusServiceUnavailable, Want: 10},
		{Status: http.StatusTooManyRequests, Want: 10},
	}, func(t *testing.T, status int) (store.Store, *atomic.Int64) {
		rt := &cannedRT{status: status}
		s, err := gcs.New(context.Background(), gcs.Options{Bucket: "bucket", Endpoint: "http://127.0.0.1:1", Transport: rt})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s, &rt.n
	}, nil)
}

// TestRetriesCountFailuresOnly: the client asks whether to retry after
// each chunk of a resumable upload, successes included; only failures use
// up the attempts of the operation.
func TestRetriesCountFailuresOnly(t *testing.T) {
	throttle := &googleapi.Error{Code: http.StatusServiceUnavailable}
	failure := &googleapi.Error{Code: http.StatusInternalServerError}
	retry := gcs.RetryDecider()
	for range 20 {
		assert.False(t, retry(nil), "a success is never retried")
	}
	for i := range 9 {
		assert.True(t, retry(throttle), "throttle %d of 10 after 20 good chunks", i+1)
	}
	assert.False(t, retry(throttle), "the 10th throttle")

	retry = gcs.RetryDecider()
	for range 20 {
		retry(nil)
	}
	assert.True(t, retry(failure), "failure 1 of 3 after 20 good chunks")
	assert.True(t, retry(failure), "failure 2 of 3")
	assert.False(t, retry(failure), "failure 3 of 3")
}
