package storetest

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/store"
)

// StallLimit is the timeout Stalled configures: short, so the test is quick,
// but far above any scheduling delay.
const StallLimit = 2 * time.Second

// stallSlack is how much longer than StallLimit an operation against a
// stalled endpoint may take: the driver's further attempts, their back-off
// and a loaded machine.
const stallSlack = 20 * time.Second

// stallGuard ends an operation that hangs, so that the test fails rather
// than waits forever.
const stallGuard = time.Minute

// Stalled checks that operations on an endpoint that stalls end with an
// error that names the endpoint and the limit, within StallLimit plus some
// slack. open returns a store for a bucket at the endpoint with every one of
// its Timeouts set to StallLimit.
func Stalled(t *testing.T, open func(t *testing.T, endpoint string) store.Store) {
	get := func(ctx context.Context, s store.Store) error {
		rc, _, err := s.Get(ctx, "k")
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.ReadAll(rc)
		return err
	}
	list := func(ctx context.Context, s store.Store) error {
		_, err := s.List(ctx, store.ListRequest{Prefix: "p/"})
		return err
	}
	put := func(ctx context.Context, s store.Store) error {
		_, err := s.Put(ctx, "k", bytes.NewReader([]byte("hello")), store.PutOptions{Size: 5})
		return err
	}
	tests := []struct {
		name string
		mode faults.Stall
		op   func(context.Context, store.Store) error
		want string // a regular expression for the end of the message
	}{
		// With all limits equal, an unanswered request meets the header
		// and the idle limit at once; either may report it.
		{"no answer to get", faults.StallAnswer, get, `\((response header|idle) timeout\)`},
		{"no answer to list", faults.StallAnswer, list, `\((response header|idle) timeout\)`},
		{"no answer to put", faults.StallAnswer, put, `\((response header|idle) timeout\)`},
		{"get body stalls", faults.StallBody, get, `\(idle timeout\)`},
		{"list body stalls", faults.StallBody, list, `\(idle timeout\)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each waits out its limits on a listener of its own
			endpoint := faults.Stalled(t, tt.mode)
			u, err := url.Parse(endpoint)
			require.NoError(t, err)
			s := open(t, endpoint)
			ctx, cancel := context.WithTimeout(context.Background(), stallGuard)
			defer cancel()
			start := time.Now()
			err = tt.op(ctx, s)
			elapsed := time.Since(start)
			require.Error(t, err)
			require.NoError(t, ctx.Err(), "the operation hung until the test's guard ended it: %v", err)
			assert.Less(t, elapsed, StallLimit+stallSlack)
			assert.GreaterOrEqual(t, elapsed, StallLimit, "it cannot have waited for the limit")
			assert.Contains(t, err.Error(), u.Host)
			assert.Regexp(t, regexp.QuoteMeta(StallLimit.String())+" "+tt.want, err.Error())
			t.Logf("%s: %v after %s", tt.name, err, elapsed.Round(time.Millisecond))
		})
	}
}
