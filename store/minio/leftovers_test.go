package minio_test

import (
	"bytes"
	"context"
	"net/url"
	"testing"

	miniogo "github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/minio"
	"github.com/commitptr/commitptr/store/storetest"
)

// TestLeftovers: incomplete multipart uploads, as a writer killed in the
// middle of a large Put leaves them, are aborted by the sweep.
func TestLeftovers(t *testing.T) {
	opts := options(t)
	s := newStore(t, opts)
	ctx := context.Background()
	raw := rawCore(t, opts)
	storetest.Leftovers(t, s, func(t *testing.T, _ store.Store, key string) int64 {
		id, err := raw.NewMultipartUpload(ctx, opts.Bucket, key, miniogo.PutObjectOptions{})
		require.NoError(t, err)
		part := bytes.Repeat([]byte(key), 1000)
		_, err = raw.PutObjectPart(ctx, opts.Bucket, key, id, 1, bytes.NewReader(part), int64(len(part)), miniogo.PutObjectPartOptions{})
		require.NoError(t, err)
		return int64(len(part))
	})
}

// rawCore returns a minio-go client of the bucket's server, without the
// driver.
func rawCore(t *testing.T, opts minio.Options) *miniogo.Core {
	u, err := url.Parse(opts.Endpoint)
	require.NoError(t, err)
	raw, err := miniogo.NewCore(u.Host, &miniogo.Options{Creds: opts.Credentials, Region: opts.Region, BucketLookup: miniogo.BucketLookupPath})
	require.NoError(t, err)
	return raw
}
