package s3

import (
	"context"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/s3util"
)

// s3://bucket/prefix?endpoint=... opens a Store (s3util.Opener).
func init() {
	store.Register("s3", s3util.Opener(func(ctx context.Context, bucket string, c store.Config) (store.Store, error) {
		return New(ctx, Options{Bucket: bucket, Endpoint: c.Endpoint, Region: c.Region, Profile: c.Profile, PathStyle: c.PathStyle,
			Timeouts: c.Timeouts, Versioning: c.Versioning, Encryption: c.Encryption, StorageClass: c.StorageClass, Transfers: c.Transfers})
	}))
}
