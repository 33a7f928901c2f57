package minio_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store/minio"
	"github.com/commitptr/commitptr/store/storetest"
)

// TestInterruptedPutsLeaveNoUploads: a Put whose context is cancelled
// aborts the multipart upload it started, on a context of its own.
func TestInterruptedPutsLeaveNoUploads(t *testing.T) {
	opts := options(t)
	s := newStore(t, opts)
	storetest.InterruptedPuts(t, s, minio.PartSize+4<<20, 10, func(t *testing.T) []string {
		var keys []string
		for u := range rawCore(t, opts).ListIncompleteUploads(context.Background(), opts.Bucket, "", true) {
			require.NoError(t, u.Err)
			keys = append(keys, u.Key)
		}
		return keys
	})
}
