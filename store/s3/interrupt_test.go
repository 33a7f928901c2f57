package s3_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store/s3"
	"github.com/commitptr/commitptr/store/storetest"
)

// TestInterruptedPutsLeaveNoUploads: a Put whose context is cancelled
// aborts the multipart upload it started, on a context of its own.
func TestInterruptedPutsLeaveNoUploads(t *testing.T) {
	s, bucket := newStore(t)
	raw := rawClient(t)
	storetest.InterruptedPuts(t, s, s3.PartThreshold+4<<20, 10, func(t *testing.T) []string {
		out, err := raw.ListMultipartUploads(context.Background(), &awss3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
		require.NoError(t, err)
		var keys []string
		for _, u := range out.Uploads {
			keys = append(keys, aws.ToString(u.Key))
		}
		return keys
	})
}
