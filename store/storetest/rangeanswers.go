package storetest

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
)

// rangeAnswer answers every request as a service would answer a ranged
// GET of the object "0123456789": with the status, Content-Range and body
// given, whatever the request asked for.
type rangeAnswer struct {
	status       int
	contentRange string
	body         string
}

func (a rangeAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	h := http.Header{
		"Etag":           {`"e1"`},
		"Last-Modified":  {"Mon, 02 Jan 2006 15:04:05 GMT"},
		"Date":           {"Mon, 02 Jan 2006 15:04:06 GMT"},
		"Content-Length": {strconv.Itoa(len(a.body))},
	}
	if a.contentRange != "" {
		h.Set("Content-Range", a.contentRange)
	}
	return &http.Response{
		StatusCode: a.status, Status: http.StatusText(a.status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader(a.body)),
		ContentLength: int64(len(a.body)), Request: r,
	}, nil
}

// RangeAnswers checks that a driver takes a ranged GET's answer as the
// range only when it is: GetRange(5, 3) of "0123456789" answered with
// "bytes 5-7/10" gives "567" and the object's size, and an answer of the
// whole object (a service that ignores Range), of another start, or of
// more bytes than asked, fails. open returns the driver sending its
// requests through rt.
func RangeAnswers(t *testing.T, open func(t *testing.T, rt http.RoundTripper) store.Store) {
	ctx := context.Background()
	s := open(t, rangeAnswer{status: http.StatusPartialContent, contentRange: "bytes 5-7/10", body: "567"})
	rc, a, err := s.GetRange(ctx, "k", 5, 3)
	require.NoError(t, err)
	b, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	require.Equal(t, "567", string(b))
	require.Equal(t, int64(10), a.Size)
	for name, ans := range map[string]rangeAnswer{
		"the whole object":      {status: http.StatusOK, body: "0123456789"},
		"another start":         {status: http.StatusPartialContent, contentRange: "bytes 0-2/10", body: "012"},
		"more bytes than asked": {status: http.StatusPartialContent, contentRange: "bytes 5-9/10", body: "56789"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := open(t, ans).GetRange(ctx, "k", 5, 3)
			require.ErrorContains(t, err, "Content-Range")
			require.ErrorContains(t, err, `"k"`)
		})
	}
}
