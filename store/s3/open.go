package s3

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	"github.com/commitptr/commitptr/store"
)

func init() { store.Register("s3", open) }

// queryParams are the query parameters an s3:// URL may carry.
var queryParams = []string{"endpoint", "region", "profile", "path_style"}

// open opens s3://bucket/prefix?endpoint=...&region=...&profile=...&path_style=true.
// Non-zero fields of cfg override the query parameters.
func open(ctx context.Context, u *url.URL, cfg store.Config) (store.Store, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("s3: URL %q names no bucket (want s3://bucket/prefix)", u.Redacted())
	}
	if u.User != nil {
		return nil, fmt.Errorf("s3: URL %q carries user information; use the AWS credential chain instead", u.Redacted())
	}
	q := u.Query()
	for k := range q {
		if !slices.Contains(queryParams, k) {
			return nil, fmt.Errorf("s3: URL %q: unknown parameter %q (known: endpoint, region, profile, path_style)", u.Redacted(), k)
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
			return nil, fmt.Errorf("s3: URL %q: path_style=%q is not a boolean", u.Redacted(), v)
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

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
