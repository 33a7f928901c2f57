package azblob

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/commitptr/commitptr/store"
)

func init() { store.Register("az", open) }

// open opens az://container/prefix or az://ACCOUNT.blob.core.windows.net/container/prefix,
// with the optional query parameters endpoint, connect_timeout, timeout and
// idle_timeout. Non-zero fields of cfg override them.
func open(ctx context.Context, u *url.URL, cfg store.Config) (store.Store, error) {
	host, prefix, c, err := store.BucketURL(u, cfg)
	if err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) (store.Store, error) {
		return nil, fmt.Errorf("store: URL %q: %s", u.Redacted(), fmt.Sprintf(format, args...))
	}
	q := u.Query()
	for _, k := range []string{"region", "profile", "path_style"} {
		if q.Has(k) {
			return bad("parameter %q is for S3; an az:// URL takes endpoint, connect_timeout, timeout and idle_timeout", k)
		}
	}
	if cfg.Region != "" || cfg.Profile != "" || cfg.PathStyle {
		return bad("a region, profile or path style is for S3, not Azure Blob Storage")
	}
	opts := Options{
		Container: host, ServiceURL: c.Endpoint, Timeouts: c.Timeouts,
		Encryption: c.Encryption, StorageClass: c.StorageClass, Transfers: c.Transfers,
	}
	if account, _, ok := strings.Cut(host, "."); ok {
		// The account URL form: the host is the account's blob endpoint
		// and the first path element the container.
		container, rest, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
		if container == "" {
			return bad("names no container (want az://%s/container/prefix)", host)
		}
		if prefix, err = store.CleanPrefix(rest); err != nil {
			return nil, err
		}
		opts.Container, opts.Account = container, account
		if opts.ServiceURL == "" {
			opts.ServiceURL = "https://" + host
		}
	}
	s, err := New(opts)
	if err != nil {
		return nil, err
	}
	return store.WithPrefix(s, prefix), nil
}
