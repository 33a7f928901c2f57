package minio_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"testing"

	miniogo "github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/minio"
	"github.com/commitptr/commitptr/store/storetest"
)

// TestLeftovers: incomplete multipart uploads, as a writer killed in the
// middle of a large Put leaves them, are aborted by the sweep.
func TestLeftovers(t *testing.T) { testLeftovers(t, options(t)) }

// TestLeftoversGofakes3: the same on a server that answers a listing of a
// bucket without uploads with NoSuchUpload.
func TestLeftoversGofakes3(t *testing.T) { testLeftovers(t, optionsOn(t, testenv.Gofakes3(t))) }

// TestLeftoversExactUploadPrefix: the same on a server that takes the
// prefix of an upload listing for an exact key, as MinIO does.
func TestLeftoversExactUploadPrefix(t *testing.T) {
	opts := options(t)
	spy := &faults.ExactUploadPrefix{}
	opts.Transport = spy
	testLeftovers(t, opts)
	assert.Zero(t, spy.Emptied.Load(), "the sweep relied on the server's prefix filter")
}

func testLeftovers(t *testing.T, opts minio.Options) {
	s := newStore(t, opts)
	ctx := context.Background()
	raw := rawCore(t, opts)
	storetest.Leftovers(t, s, func(t *testing.T, _ store.Store, key string) int64 {
		id, err := raw.NewMultipartUpload(ctx, opts.Bucket, key, miniogo.PutObjectOptions{})
		require.NoError(t, err)
		part := bytes.Repeat([]byte(key), 1000)
		// A signed payload hash, as the driver sends, not a streaming
		// signature: gofakes3 would store the chunk signatures in the part.
		sum := sha256.Sum256(part)
		_, err = raw.PutObjectPart(ctx, opts.Bucket, key, id, 1, bytes.NewReader(part), int64(len(part)),
			miniogo.PutObjectPartOptions{Sha256Hex: hex.EncodeToString(sum[:]), DisableContentSha256: true})
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
