package httptimeout_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/httptimeout"
)

// The slow transfers below last longer than every limit, one byte at a
// time, with gaps 30 times shorter than the limits.
const (
	limit = 3 * time.Second
	gap   = 100 * time.Millisecond
	steps = 45 // 4.5 s in all
)

func client() *http.Client {
	tr := &http.Transport{}
	t := store.Timeouts{Connect: limit, Header: limit, Idle: limit}
	httptimeout.Apply(tr, t)
	return &http.Client{Transport: httptimeout.RoundTripper(tr, t)}
}

// trickle yields one byte every gap.
type trickle struct{ left int }

func (r *trickle) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	time.Sleep(gap)
	r.left--
	p[0] = 'x'
	return 1, nil
}

// TestSlowTransfersAreNotCut: downloads and uploads that take longer than
// the limits but keep moving bytes succeed.
func TestSlowTransfersAreNotCut(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			_, _ = w.Write(b) // the client judges what arrived
			return
		}
		w.WriteHeader(http.StatusOK)
		for range steps {
			time.Sleep(gap)
			_, _ = w.Write([]byte("x"))
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	c := client()

	start := time.Now()
	resp, err := c.Get(srv.URL)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("x", steps), string(b))
	require.Greater(t, time.Since(start), limit, "the download must outlast the limits")

	start = time.Now()
	req, err := http.NewRequest(http.MethodPut, srv.URL, &trickle{left: steps})
	require.NoError(t, err)
	resp, err = c.Do(req)
	require.NoError(t, err)
	b, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("x", steps), string(b))
	require.Greater(t, time.Since(start), limit, "the upload must outlast the limits")
}
