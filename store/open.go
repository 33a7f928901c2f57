package store

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config carries settings that are not part of a store URL, typically from
// command-line flags. Zero fields fall back to the URL's query parameters
// (endpoint, region, profile, path_style, connect_timeout, timeout,
// idle_timeout, sse, sse_kms_key_id, storage_class) and then to the usual
// AWS environment variables and shared config files, or to the default
// timeouts.
type Config struct {
	Endpoint  string // S3 endpoint URL, e.g. http://127.0.0.1:7070
	Region    string
	Profile   string
	PathStyle bool     // address buckets as endpoint/bucket instead of bucket.endpoint
	Timeouts  Timeouts // per-request limits of the S3 drivers
	// Versioning declares whether an S3 bucket keeps versions; auto (the
	// zero value) asks the bucket once (see Versioner).
	Versioning Versioning
	// Encryption is how the objects the store writes are encrypted; a
	// customer key never comes from a URL.
	Encryption Encryption
	// StorageClass is the storage class of the objects the store writes
	// (on Azure, the access tier); empty means the bucket's default.
	StorageClass string
	// Transfers is how many requests a network store keeps in flight to
	// its endpoint: 0 adapts the number to the service's answers (16 at
	// first, up to MaxTransfers, fewer when it throttles), N pins it at N.
	Transfers int
}

// MaxTransfers is the most requests a network store keeps in flight to its
// endpoint when Config.Transfers lets it adapt.
const MaxTransfers = 256

// Opener opens a store for a parsed URL. Drivers register one per scheme.
type Opener func(ctx context.Context, u *url.URL, cfg Config) (Store, error)

var (
	mu      sync.RWMutex
	openers = map[string]Opener{}
)

// Register makes a driver available to Open under a URL scheme. It panics if
// the scheme is registered twice.
func Register(scheme string, o Opener) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("store: Register called twice for scheme " + scheme)
	}
	openers[scheme] = o
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	mu.RLock()
	defer mu.RUnlock()
	var s []string
	for k := range openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open opens the store a URL names:
//
//	file:///abs/dir, ./rel/dir, /abs/dir   the fs driver (a local directory)
//	mem://name                             an in-memory store shared by name within the process
//	s3://bucket/prefix                     Amazon S3 or an S3-compatible server (aws-sdk-go-v2)
//	minio://bucket/prefix                  the same, through minio-go
//	gs://bucket/prefix                     Google Cloud Storage (cloud.google.com/go/storage)
//	az://container/prefix                  Azure Blob Storage (also az://ACCOUNT.blob.core.windows.net/container/prefix)
//
// The driver packages must be imported (the root commitptr package imports
// all of them). The URL's path below the bucket or directory root, if any,
// becomes a key prefix. Open never panics on bad input.
func Open(ctx context.Context, rawURL string, cfg Config) (Store, error) {
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	mu.RLock()
	o := openers[u.Scheme]
	mu.RUnlock()
	if o == nil {
		return nil, fmt.Errorf("store: unknown URL scheme %q in %q (known: %s)", u.Scheme, rawURL, strings.Join(Schemes(), ", "))
	}
	if cfg.Transfers < 0 {
		return nil, fmt.Errorf("store: %d transfers: want 0 (adaptive) or more", cfg.Transfers)
	}
	return o(ctx, u, cfg)
}

// ParseURL parses a store URL. A string without a scheme is a local path and
// becomes a file:// URL with an absolute path. A string whose first path
// element has a colon, such as rclone's "s3:bucket" or "remote:path" or a
// mistyped "s3:/bucket", is refused with a hint: a local path with a colon
// is written "./s3:bucket".
func ParseURL(rawURL string) (*url.URL, error) {
	if rawURL == "" {
		return nil, fmt.Errorf("store: empty URL")
	}
	if !strings.Contains(rawURL, "://") {
		if err := notRemote(rawURL); err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(rawURL)
		if err != nil {
			return nil, fmt.Errorf("store: path %q: %w", rawURL, err)
		}
		return &url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store: bad URL %q: %w", rawURL, err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("store: URL %q has no scheme", rawURL)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	return u, nil
}

// cloudSchemes are URL schemes of object stores that people write in the
// rclone form "scheme:bucket", whether or not a driver is registered.
var cloudSchemes = []string{"s3", "minio", "gs", "gcs", "az", "azure", "b2", "r2", "swift", "file", "mem"}

// notRemote refuses a local path whose first element has a colon: it is a
// URL or an rclone remote written without "//".
func notRemote(p string) error {
	first, _, _ := strings.Cut(p, "/")
	name, _, ok := strings.Cut(first, ":")
	if !ok || (filepath.VolumeName(p) != "" && len(name) == 1) {
		return nil // no colon, or a Windows drive letter
	}
	_, path, _ := strings.Cut(p, ":")
	path = strings.TrimLeft(path, "/")
	if slices.Contains(cloudSchemes, strings.ToLower(name)) {
		return fmt.Errorf("store: %q is not a URL: write %s://%s (a local path with a colon is written ./%s)", p, strings.ToLower(name), path, p)
	}
	return fmt.Errorf("store: %q looks like a remote NAME:PATH, not a URL: write a URL such as s3://bucket/prefix (a local path with a colon is written ./%s)", p, p)
}

// CleanPrefix turns a URL path into a key prefix: no leading slash, and a
// trailing slash unless it is empty. It rejects "." and ".." segments.
func CleanPrefix(p string) (string, error) {
	p = strings.Trim(p, "/")
	if p == "" {
		return "", nil
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("store: bad key prefix %q", p)
		}
	}
	return p + "/", nil
}

// BucketURL reads the common form of bucket URLs,
// scheme://bucket/prefix?endpoint=...&region=...&profile=...&path_style=true
// &connect_timeout=10s&timeout=30s&idle_timeout=60s&versioning=auto
// &sse=aws:kms&sse_kms_key_id=...&storage_class=..., for the S3 drivers
// (versioning is auto, on or off: see Versioner). The
// three timeouts are the fields of Timeouts; merged.Timeouts has the
// defaults filled in. Non-zero fields of cfg override the query
// parameters. It refuses user information (credentials belong in the AWS
// chain, never in a URL), a port on the bucket, and unknown parameters.
func BucketURL(u *url.URL, cfg Config) (bucket, prefix string, merged Config, err error) {
	bad := func(format string, args ...any) (string, string, Config, error) {
		return "", "", Config{}, fmt.Errorf("store: URL %q: %s", u.Redacted(), fmt.Sprintf(format, args...))
	}
	switch {
	case u.Host == "":
		return bad("names no bucket (want %s://bucket/prefix)", u.Scheme)
	case u.User != nil:
		return bad("carries user information; use the AWS credential chain instead")
	case u.Port() != "":
		return bad("the host part is the bucket; give the server as ?endpoint=http://host:port")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("bad query: %v", err)
	}
	known := []string{"endpoint", "region", "profile", "path_style", "connect_timeout", "timeout", "idle_timeout", "versioning", "sse", "sse_kms_key_id", "storage_class"}
	for k := range q {
		if !slices.Contains(known, k) {
			return bad("unknown parameter %q (known: %s)", k, strings.Join(known, ", "))
		}
	}
	var fromURL Timeouts
	for _, p := range []struct {
		name string
		d    *time.Duration
	}{{"connect_timeout", &fromURL.Connect}, {"timeout", &fromURL.Header}, {"idle_timeout", &fromURL.Idle}} {
		if *p.d, err = parseTimeout(p.name, q.Get(p.name)); err != nil {
			return bad("%v", err)
		}
	}
	merged = Config{
		Endpoint:  cmp.Or(cfg.Endpoint, q.Get("endpoint")),
		Region:    cmp.Or(cfg.Region, q.Get("region")),
		Profile:   cmp.Or(cfg.Profile, q.Get("profile")),
		PathStyle: cfg.PathStyle,
		Timeouts: Timeouts{
			Connect: cmp.Or(cfg.Timeouts.Connect, fromURL.Connect),
			Header:  cmp.Or(cfg.Timeouts.Header, fromURL.Header),
			Idle:    cmp.Or(cfg.Timeouts.Idle, fromURL.Idle),
		}.OrDefaults(),
		Encryption: Encryption{
			SSE:         cmp.Or(cfg.Encryption.SSE, q.Get("sse")),
			KMSKeyID:    cmp.Or(cfg.Encryption.KMSKeyID, q.Get("sse_kms_key_id")),
			CustomerKey: cfg.Encryption.CustomerKey,
		},
		StorageClass: cmp.Or(cfg.StorageClass, q.Get("storage_class")),
	}
	if err := merged.Encryption.Check(); err != nil {
		return bad("%v", err)
	}
	merged.Versioning = cfg.Versioning
	if merged.Versioning == VersioningAuto {
		if merged.Versioning, err = ParseVersioning(q.Get("versioning")); err != nil {
			return bad("versioning=%q: want auto, on or off", q.Get("versioning"))
		}
	}
	if v := q.Get("path_style"); v != "" && !cfg.PathStyle {
		if merged.PathStyle, err = strconv.ParseBool(v); err != nil {
			return bad("path_style=%q is not a boolean", v)
		}
	}
	if prefix, err = CleanPrefix(u.Path); err != nil {
		return "", "", Config{}, err
	}
	return u.Host, prefix, merged, nil
}

// RefuseObjectSettings is for drivers that neither encrypt on request nor
// have storage classes: it refuses a Config that asks for either, so that
// a setting is never silently ignored.
func (c Config) RefuseObjectSettings(scheme string) error {
	if !c.Encryption.IsZero() || c.StorageClass != "" {
		return fmt.Errorf("store: %s:// stores take no server-side encryption, customer key or storage class", scheme)
	}
	return nil
}

// RefuseObjectSettingsInURL is RefuseObjectSettings for the query of u,
// for the same drivers, which read no query parameter: one that asks for
// encryption or a storage class (a remote's sse or storage-class key
// becomes one) is refused rather than dropped.
func RefuseObjectSettingsInURL(u *url.URL) error {
	q, _ := url.ParseQuery(u.RawQuery) // what parses; the rest names nothing
	for _, k := range []string{"sse", "sse_kms_key_id", "storage_class"} {
		if q.Has(k) {
			return fmt.Errorf("store: URL %q: %s:// stores take no server-side encryption, customer key or storage class (parameter %q)", u.Redacted(), u.Scheme, k)
		}
	}
	return nil
}
