package gcs_test

import (
	"bytes"
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

// TestThrottledRequestsGetMoreAttempts: a read, a write and a listing that
// meet a 500 end after 3 attempts, and after 10 when they meet a 503 or a
// 429, the service's answers to a client that goes too fast.
func TestThrottledRequestsGetMoreAttempts(t *testing.T) {
	defer gcs.SetMaxBackoff(10 * time.Millisecond)()
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
	for _, c := range []struct {
		status int
		want   int64
	}{{http.StatusInternalServerError, 3}, {http.StatusServiceUnavailable, 10}, {http.StatusTooManyRequests, 10}} {
		for name, op := range ops {
			rt := &cannedRT{status: c.status}
			s, err := gcs.New(context.Background(), gcs.Options{Bucket: "bucket", Endpoint: "http://127.0.0.1:1", Transport: rt})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err = op(ctx, s)
			cancel()
			s.Close()
			require.Error(t, err, "%s answered %d", name, c.status)
			assert.Equal(t, c.want, rt.n.Load(), "attempts of a %s answered %d: %v", name, c.status, err)
		}
	}
}
