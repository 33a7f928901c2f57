package gcs

import (
	"context"
	"fmt"
	"net/url"

	"github.com/commitptr/commitptr/store"
)

func init() { store.Register("gs", open) }

// open opens gs://bucket/prefix?endpoint=...&connect_timeout=...&timeout=...&idle_timeout=....
// Non-zero fields of cfg override the query parameters. The S3 settings
// (region, profile, path_style) mean nothing to Cloud Storage and are
// refused in the URL.
func open(ctx context.Context, u *url.URL, cfg store.Config) (store.Store, error) {
	q := u.Query()
	for _, k := range []string{"region", "profile", "path_style"} {
		if q.Has(k) {
			return nil, fmt.Errorf("store: URL %q: parameter %q is for S3, not gs://", u.Redacted(), k)
		}
	}
	bucket, prefix, c, err := store.BucketURL(u, cfg)
	if err != nil {
		return nil, err
	}
	s, err := New(ctx, Options{
		Bucket: bucket, Endpoint: c.Endpoint, Timeouts: c.Timeouts,
		Encryption: c.Encryption, StorageClass: c.StorageClass, Transfers: c.Transfers,
	})
	if err != nil {
		return nil, err
	}
	return store.WithPrefix(s, prefix), nil
}
