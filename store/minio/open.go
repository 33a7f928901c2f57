package minio

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	"github.com/commitptr/commitptr/store"
)

func init() { store.Register("minio", open) }

// queryParams are the query parameters a minio:// URL may carry.
var queryParams = []string{"endpoint", "region", "profile", "path_style"}

// open opens minio://bucket/prefix?endpoint=...&region=...&profile=...&path_style=true.
// Non-zero fields of cfg override the query parameters.
func open(ctx context.Context, u *url.URL, cfg store.Config) (store.Store, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("minio: URL %q names no bucket (want minio://bucket/prefix)", u.Redacted())
	}
	if u.User != nil {
		return nil, fmt.Errorf("minio: URL %q carries user information; use the AWS credential chain instead", u.Redacted())
	}
	if u.Port() != "" {
		return nil, fmt.Errorf("minio: URL %q: the host part is the bucket; give the server as ?endpoint=http://host:port", u.Redacted())
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("minio: URL %q: bad query: %w", u.Redacted(), err)
	}
	for k := range q {
		if !slices.Contains(queryParams, k) {
			return nil, fmt.Errorf("minio: URL %q: unknown parameter %q (known: endpoint, region, profile, path_style)", u.Redacted(), k)
		}
	}
	opts := Options{
		Bucket:   u.Host,
		Endpoint: first(cfg.Endpoint, q.Get("endpoint")),
		Region:   first(cfg.Region, q.Get("region")),
		Profile:  first(cfg.Profile, q.Get("profile")),
	}
	if v := q.Get("path_style"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("minio: URL %q: path_style=%q is not a boolean", u.Redacted(), v)
		}
		opts.PathStyle = b
	}
	if cfg.PathStyle {
		opts.PathStyle = true
	}
	prefix, err := store.CleanPrefix(u.Path)
	if err != nil {
		return nil, err
	}
	s, err := New(ctx, opts)
	if err != nil {
		return nil, err
	}
	return store.WithPrefix(s, prefix), nil
}
