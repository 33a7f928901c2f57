// Package s3util is what the two S3 drivers, s3 (aws-sdk-go-v2) and minio
// (minio-go), share beyond the portable layer and the version deletes
// (package versions): how their URLs open a bucket.
package s3util

import (
	"context"
	"net/url"

	"github.com/commitptr/commitptr/store"
)

// Opener is an S3 driver's store.Opener for
// scheme://bucket/prefix?endpoint=...&region=...&profile=...&path_style=true:
// non-zero fields of cfg override the query parameters, open opens the
// bucket with the merged settings, and the prefix goes on top.
func Opener(open func(ctx context.Context, bucket string, c store.Config) (store.Store, error)) store.Opener {
	return func(ctx context.Context, u *url.URL, cfg store.Config) (store.Store, error) {
		bucket, prefix, c, err := store.BucketURL(u, cfg)
		if err != nil {
			return nil, err
		}
		s, err := open(ctx, bucket, c)
		if err != nil {
			return nil, err
		}
		return store.WithPrefix(s, prefix), nil
	}
}
