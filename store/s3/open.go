package s3

import (
	"context"
	"net/url"

	"github.com/commitptr/commitptr/store"
)

func init() { store.Register("s3", open) }

// open opens s3://bucket/prefix?endpoint=...&region=...&profile=...&path_style=true.
// Non-zero fields of cfg override the query parameters.
func open(ctx context.Context, u *url.URL, cfg store.Config) (store.Store, error) {
	bucket, prefix, c, err := store.BucketURL(u, cfg)
	if err != nil {
		return nil, err
	}
	s, err := New(ctx, Options{
		Bucket: bucket, Endpoint: c.Endpoint, Region: c.Region, Profile: c.Profile, PathStyle: c.PathStyle,
		Timeouts: c.Timeouts, Versioning: c.Versioning, Encryption: c.Encryption, StorageClass: c.StorageClass,
	})
	if err != nil {
		return nil, err
	}
	return store.WithPrefix(s, prefix), nil
}
