package s3_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/s3"
	"github.com/commitptr/commitptr/store/storetest"
)

// TestInterruptedPutsLeaveNoUploads: a Put whose context is cancelled
// aborts the multipart upload it started, on a context of its own.
func TestInterruptedPutsLeaveNoUploads(t *testing.T) {
	s, bucket := newStore(t)
	storetest.InterruptedPuts(t, s, s3.PartThreshold+4<<20, 10, uploads(bucket))
}

// TestCancelledPutSettlesParts: the abort of a cancelled Put waits for
// every part whose body was sent in full (package partupload).
func TestCancelledPutSettlesParts(t *testing.T) {
	srv := server(t)
	bucket := srv.NewBucket(t)
	storetest.SettledParts(t, func(rt http.RoundTripper) store.Store {
		s, err := s3.New(context.Background(), s3.Options{Bucket: bucket, Endpoint: srv.Endpoint, PathStyle: true,
			HTTPClient: &http.Client{Transport: rt}})
		require.NoError(t, err)
		return s
	}, s3.PartThreshold+4<<20, uploads(bucket))
}

// uploads lists the incomplete multipart uploads in bucket.
func uploads(bucket string) func(t *testing.T) []string {
	return func(t *testing.T) []string {
		out, err := rawClient(t).ListMultipartUploads(context.Background(), &awss3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
		require.NoError(t, err)
		var keys []string
		for _, u := range out.Uploads {
			keys = append(keys, aws.ToString(u.Key))
		}
		return keys
	}
}
