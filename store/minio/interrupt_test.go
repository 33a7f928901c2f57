package minio_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/minio"
	"github.com/commitptr/commitptr/store/storetest"
)

// TestInterruptedPutsLeaveNoUploads: a Put whose context is cancelled
// aborts the multipart upload it started, on a context of its own.
func TestInterruptedPutsLeaveNoUploads(t *testing.T) {
	opts := options(t)
	storetest.InterruptedPuts(t, newStore(t, opts), minio.PartSize+4<<20, 10, uploads(opts))
}

// TestCancelledPutSettlesParts: the abort of a cancelled Put waits for
// every part whose body was sent in full (package partupload).
func TestCancelledPutSettlesParts(t *testing.T) {
	opts := options(t)
	storetest.SettledParts(t, func(rt http.RoundTripper) store.Store {
		o := opts
		o.Transport = rt
		return newStore(t, o)
	}, minio.PartSize+4<<20, uploads(opts))
}

// uploads lists the incomplete multipart uploads in opts' bucket.
func uploads(opts minio.Options) func(t *testing.T) []string {
	return func(t *testing.T) []string {
		var keys []string
		for u := range rawCore(t, opts).ListIncompleteUploads(context.Background(), opts.Bucket, "", true) {
			require.NoError(t, u.Err)
			keys = append(keys, u.Key)
		}
		return keys
	}
}
