package gcs_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/googleapi"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/gcs"
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

// retryOps are a read, a write and a listing.
var retryOps = map[string]func(context.Context, store.Store) error{
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

// cannedStore opens a store whose every request rt answers.
func cannedStore(t *testing.T, rt http.RoundTripper) *gcs.Store {
	t.Helper()
	s, err := gcs.New(context.Background(), gcs.Options{Bucket: "bucket", Endpoint: "http://127.0.0.1:1", Transport: rt})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestThrottledRequestsGetMoreAttempts: a read, a write and a listing that
// meet a 500 end after 3 attempts, and after 10 when they meet a 503 or a
// 429, the service's answers to a client that goes too fast. Each
// operation counts its own attempts: three in a row on one store, and
// eight at once, each get as many.
func TestThrottledRequestsGetMoreAttempts(t *testing.T) {
	defer gcs.SetMaxBackoff(10 * time.Millisecond)()
	for _, c := range []struct {
		status int
		want   int64
	}{{http.StatusInternalServerError, 3}, {http.StatusServiceUnavailable, 10}, {http.StatusTooManyRequests, 10}} {
		for name, op := range retryOps {
			rt := &cannedRT{status: c.status}
			s := cannedStore(t, rt)
			for range 3 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err := op(ctx, s)
				cancel()
				require.Error(t, err, "%s answered %d", name, c.status)
			}
			assert.Equal(t, 3*c.want, rt.n.Load(), "attempts of 3 %ss in a row answered %d", name, c.status)

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
