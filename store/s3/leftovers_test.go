package s3_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/s3"
	"github.com/commitptr/commitptr/store/storetest"
)

// TestLeftovers: incomplete multipart uploads, as a writer killed in the
// middle of a large Put leaves them, are aborted by the sweep.
func TestLeftovers(t *testing.T) { testLeftovers(t, server(t)) }

// TestLeftoversGofakes3: the same on a server that answers a listing of a
// bucket without uploads with NoSuchUpload.
func TestLeftoversGofakes3(t *testing.T) { testLeftovers(t, withEnv(testenv.Gofakes3(t))) }

// TestLeftoversExactUploadPrefix: the same on a server that takes the
// prefix of an upload listing for an exact key, as MinIO does.
func TestLeftoversExactUploadPrefix(t *testing.T) {
	spy := &faults.ExactUploadPrefix{}
	testLeftovers(t, server(t), func(o *s3.Options) { o.HTTPClient = &http.Client{Transport: spy} })
	assert.Zero(t, spy.Emptied.Load(), "the sweep relied on the server's prefix filter")
}

func testLeftovers(t *testing.T, srv *testenv.S3Server, mods ...func(*s3.Options)) {
	s, bucket := newStoreOn(t, srv, mods...)
	raw := rawClientOf(t, srv)
	ctx := context.Background()
	storetest.Leftovers(t, s, func(t *testing.T, _ store.Store, key string) int64 {
		up, err := raw.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		require.NoError(t, err)
		part := bytes.Repeat([]byte(key), 1000)
		_, err = raw.UploadPart(ctx, &awss3.UploadPartInput{
			Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader(part),
		})
		require.NoError(t, err)
		return int64(len(part))
	})
}

// rawClient returns an SDK client of the test server.
func rawClient(t *testing.T) *awss3.Client { return rawClientOf(t, server(t)) }

// rawClientOf returns an SDK client of srv.
func rawClientOf(t *testing.T, srv *testenv.S3Server) *awss3.Client {
	cfg, err := config.LoadDefaultConfig(context.Background())
	require.NoError(t, err)
	return awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		o.BaseEndpoint, o.UsePathStyle = aws.String(srv.Endpoint), true
	})
}

// TestLeftoverOfStalledPut: a large Put that stalls past the sweep's age
// loses its multipart upload to the sweep, and then fails: nothing is
// published, whole or in part.
func TestLeftoverOfStalledPut(t *testing.T) {
	s, bucket := newStore(t)
	raw := rawClient(t)
	ctx := context.Background()
	const key = "ds/_gen/g/big"
	finish := testenv.StalledPut(t, s, key, make([]byte, s3.PartThreshold+1<<20))
	require.Eventually(t, func() bool {
		ups, err := raw.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
		return err == nil && len(ups.Uploads) == 1 && aws.ToString(ups.Uploads[0].Key) == key
	}, 20*time.Second, 20*time.Millisecond)
	time.Sleep(3500 * time.Millisecond) // see storetest.Leftovers
	got, err := store.SweepLeftovers(ctx, store.WithPrefix(s, "ds/"), "", time.Second)
	require.NoError(t, err)
	assert.Equal(t, 1, got.Count)
	require.Error(t, finish(), "the put's upload was aborted")
	_, err = s.Head(ctx, key)
	require.ErrorIs(t, err, store.ErrNotExist)
	ups, err := raw.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	require.NoError(t, err)
	assert.Empty(t, ups.Uploads)
}
