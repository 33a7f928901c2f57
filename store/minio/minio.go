package minio

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/encrypt"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/httptimeout"
	"github.com/commitptr/commitptr/store/internal/inflight"
	"github.com/commitptr/commitptr/store/internal/partupload"
	"github.com/commitptr/commitptr/store/internal/portable"
	"github.com/commitptr/commitptr/store/internal/versions"
)

// PartSize is the largest body Put sends as a single PutObject, and the size
// of each part of a multipart upload (larger when the known size needs more
// than 10000 parts). Put holds at most one part in memory.
const PartSize = 16 << 20

// maxParts is the most parts one multipart upload may have (the S3 limit).
const maxParts = 10000

// maxObjectSize is the largest object S3 accepts (5 TiB).
const maxObjectSize = 5 << 40

// DefaultEndpoint is the endpoint used when neither Options nor the
// environment names one.
const DefaultEndpoint = "https://s3.amazonaws.com"

// DefaultRegion is the region used when neither Options nor AWS_REGION names
// one.
const DefaultRegion = "us-east-1"

// maxAttempts is how often minio-go sends a request that fails with a
// retryable error, the first attempt included.
const maxAttempts = 3

// abortTimeout bounds the best-effort abort of a failed multipart upload,
// and the request that starts one.
const abortTimeout = 30 * time.Second

// Options configures New. Zero fields fall back to the AWS environment.
type Options struct {
	// Bucket is the bucket name. It is required.
	Bucket string
	// Endpoint is the S3 endpoint URL, e.g. http://127.0.0.1:7070; http://
	// turns TLS off. Empty means AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL,
	// then DefaultEndpoint. A bare host[:port] means https.
	Endpoint string
	// Region is the signing region. Empty means AWS_REGION, then
	// DefaultRegion. The driver always sets a region, so minio-go never
	// looks up a bucket's location.
	Region string
	// Profile names the shared credentials profile. Empty means
	// AWS_PROFILE, then "default".
	Profile string
	// PathStyle addresses buckets as endpoint/bucket rather than
	// bucket.endpoint, as most S3-compatible servers need.
	PathStyle bool
	// Transport, if not nil, sends the HTTP requests; the default is
	// minio-go's DefaultTransport with Timeouts applied.
	Transport http.RoundTripper
	// Timeouts bound each request; zero fields are the defaults.
	Timeouts store.Timeouts
	// Versioning declares whether the bucket keeps versions; the zero
	// value, store.VersioningAuto, asks the bucket once (see
	// Store.Versioning).
	Versioning store.Versioning
	// Encryption is how the objects the store writes are encrypted; with
	// a customer key, every read sends the key too.
	Encryption store.Encryption
	// StorageClass is the storage class of the objects the store writes,
	// such as STANDARD_IA; empty means the bucket's default.
	StorageClass string
	// Transfers is how many requests the store keeps in flight: 0 adapts
	// it, N pins it (store.Config.Transfers).
	Transfers int
	// Credentials, if not nil, replace the credential chain: the
	// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
	// AWS_SESSION_TOKEN), the shared credentials file, then IAM (instance
	// profile, container or web identity).
	Credentials *credentials.Credentials
}

// Store is a store.Store backed by one bucket, through minio-go: the
// portable layer (package portable) over the bucket's requests. It is safe
// for concurrent use.
type Store struct {
	*portable.Bucket
	b *bucket
}

// bucket is the portable.Driver of one bucket.
type bucket struct {
	client   *minio.Client
	core     minio.Core
	bucket   string
	endpoint string // scheme://host, for error messages
	ver      *versions.State
	sse      encrypt.ServerSide // sent when an object is written; nil for the bucket's default
	ssec     encrypt.ServerSide // the customer key, sent with every part and every read; nil without one
	class    string
}

var (
	_ store.Store           = (*Store)(nil)
	_ portable.Versions     = (*bucket)(nil)
	_ store.LeftoverSweeper = (*Store)(nil)
)

// New returns a Store for opts.Bucket. It sends no request, so a wrong
// bucket, endpoint or credential shows up in the first operation.
func New(ctx context.Context, opts Options) (*Store, error) {
	if opts.Bucket == "" {
		return nil, errors.New("minio: no bucket name given")
	}
	if err := s3utils.CheckValidBucketName(opts.Bucket); err != nil {
		return nil, fmt.Errorf("minio: bad bucket name %q: %w", opts.Bucket, err)
	}
	sse, ssec, err := serverSide(opts.Encryption)
	if err != nil {
		return nil, err
	}
	raw := first(opts.Endpoint, os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL"), DefaultEndpoint)
	host, secure, err := parseEndpoint(raw)
	if err != nil {
		return nil, err
	}
	creds := opts.Credentials
	if creds == nil {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.FileAWSCredentials{Profile: opts.Profile},
			&credentials.IAM{},
		})
	}
	base := opts.Transport
	if base == nil {
		tr, err := minio.DefaultTransport(secure)
		if err != nil {
			return nil, fmt.Errorf("minio: %w", err)
		}
		httptimeout.Apply(tr, opts.Timeouts)
		base = tr
	}
	// A part upload is seen through to its answer once its body is sent,
	// so that the abort of a cancelled upload is final.
	rt := partupload.RoundTripper(inflight.RoundTripper(httptimeout.RoundTripper(base, opts.Timeouts), inflight.For(opts.Transfers)))
	mo := &minio.Options{
		Creds:     creds,
		Secure:    secure,
		Transport: transport{base: rt},
		Region:    first(opts.Region, os.Getenv("AWS_REGION"), DefaultRegion),
		// As many attempts as the AWS SDK makes (minio-go's default is 10),
		// so that an endpoint that times out fails an operation after
		// about 3 times the limit.
		MaxRetries: maxAttempts,
	}
	if opts.PathStyle {
		mo.BucketLookup = minio.BucketLookupPath
	}
	client, err := minio.New(host, mo)
	if err != nil {
		return nil, fmt.Errorf("minio: endpoint %q: %w", raw, err)
	}
	b := &bucket{
		client:   client,
		core:     minio.Core{Client: client},
		bucket:   opts.Bucket,
		endpoint: client.EndpointURL().String(),
		sse:      sse,
		ssec:     ssec,
		class:    opts.StorageClass,
		ver:      versions.NewState(opts.Versioning),
	}
	return &Store{Bucket: portable.New(b, portable.Limits{MaxObject: maxObjectSize, Part: partSize}), b: b}, nil
}

// partSize is the part of a multipart upload of size bytes (0: unknown),
// and the largest body sent in one PUT: PartSize, or more when size needs
// more than maxParts parts of it.
func partSize(size int64) int64 {
	part := int64(PartSize)
	if need := (size + maxParts - 1) / maxParts; need > part {
		part = (need + 1<<20 - 1) &^ (1<<20 - 1) // whole MiB
	}
	return part
}

// parseEndpoint splits an endpoint URL into the host[:port] minio-go wants
// and whether to use TLS.
func parseEndpoint(raw string) (host string, secure bool, err error) {
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", false, fmt.Errorf("minio: bad endpoint %q: want http://host[:port] or https://host[:port]", raw)
	}
	return u.Host, u.Scheme == "https", nil
}

// serverSide turns e into what minio-go sends when an object is written
// (sse) and with every part and read (ssec, a customer key only).
func serverSide(e store.Encryption) (sse, ssec encrypt.ServerSide, err error) {
	if err := e.Check(); err != nil {
		return nil, nil, fmt.Errorf("minio: %w", err)
	}
	switch {
	case e.CustomerKey != nil:
		ssec, err = encrypt.NewSSEC(e.CustomerKey)
		return ssec, ssec, err
	case e.SSE == store.SSEAES256:
		return encrypt.NewSSE(), nil, nil
	case e.SSE == store.SSEKMS:
		sse, err = encrypt.NewSSEKMS(e.KMSKeyID, nil)
		return sse, nil, err
	}
	return nil, nil, nil
}

// String names the store's bucket and endpoint; so do %v and %+v, which
// would otherwise print a customer key.
func (s *Store) String() string { return "minio://" + s.b.bucket + " at " + s.b.endpoint }

// Get sends one GET.
func (s *bucket) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	// Core.GetObject sends the request now and returns its headers;
	// Client.GetObject is lazy and would send a HEAD before the GET.
	body, _, h, err := s.core.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{ServerSideEncryption: s.ssec})
	if err != nil {
		return nil, store.Attrs{}, s.err(false, err)
	}
	return body, attrsOf(h), nil
}

// GetRange sends one GET with a Range; a 416 is store.ErrInvalidRange
// (store.ClassOfS3).
func (s *bucket) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	opts := minio.GetObjectOptions{ServerSideEncryption: s.ssec}
	if err := opts.SetRange(off, off+n-1); err != nil {
		return nil, store.Attrs{}, portable.Classify(nil, err)
	}
	body, _, h, err := s.core.GetObject(ctx, s.bucket, key, opts)
	if err != nil {
		return nil, store.Attrs{}, s.err(false, err)
	}
	a := attrsOf(h)
	if a.Size, err = portable.RangeOf(h.Get("Content-Range"), off, n); err != nil {
		body.Close()
		return nil, store.Attrs{}, err
	}
	return body, a, nil
}

// Head sends one HEAD.
func (s *bucket) Head(ctx context.Context, key string) (store.Attrs, error) {
	ctx, x := withExchange(ctx, "", nil)
	info, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{ServerSideEncryption: s.ssec})
	if err != nil {
		return store.Attrs{}, s.err(false, err)
	}
	if h := x.header(); h != nil {
		return attrsOf(h), nil
	}
	return store.Attrs{ // not reached with a working transport; no Date, so no ServerTime
		ETag: info.ETag, Size: info.Size, LastModified: info.LastModified,
		Metadata: lowerKeys(info.UserMetadata), ContentType: info.ContentType,
	}, nil
}

// attrsOf reads an object's attributes from GET or HEAD response headers.
func attrsOf(h http.Header) store.Attrs {
	a := store.Attrs{
		ETag:            trimETag(h.Get("ETag")),
		Size:            -1,
		ServerTime:      serverTime(h),
		ContentType:     h.Get("Content-Type"),
		ContentEncoding: contentEncoding(h.Get("Content-Encoding")),
	}
	if n, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64); err == nil {
		a.Size = n
	}
	if t, err := http.ParseTime(h.Get("Last-Modified")); err == nil {
		a.LastModified = t
	}
	for k, v := range h {
		lk := strings.ToLower(k)
		if name, ok := strings.CutPrefix(lk, "x-amz-meta-"); ok && len(v) > 0 {
			if a.Metadata == nil {
				a.Metadata = map[string]string{}
			}
			a.Metadata[name] = v[0]
		}
	}
	return a
}

// contentEncoding drops the aws-chunked transfer coding, which some servers
// (versitygw) keep in the stored Content-Encoding of an object that another
// client uploaded with a streaming signature.
func contentEncoding(v string) string {
	if !strings.Contains(v, "aws-chunked") {
		return v
	}
	var keep []string
	for _, c := range strings.Split(v, ",") {
		if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "aws-chunked") {
			keep = append(keep, c)
		}
	}
	return strings.Join(keep, ",")
}

func lowerKeys(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.ToLower(k)] = v
	}
	return out
}

func trimETag(etag string) string { return strings.Trim(etag, `"`) }

// Put sends body.Single in one PUT, conditions included, and body.Parts
// as a multipart upload read one part (partSize) at a time, so memory
// stays bounded by the part size.
func (s *bucket) Put(ctx context.Context, key string, b portable.Body, opts store.PutOptions) (store.Attrs, error) {
	if err := checkPut(opts); err != nil {
		return store.Attrs{}, err
	}
	ifMatch := opts.IfMatch != ""

	po := minio.PutObjectOptions{
		UserMetadata:    make(map[string]string, len(opts.Metadata)),
		ContentType:     opts.ContentType,
		ContentEncoding: opts.ContentEncoding,
		// With parts, the upload's creation carries these.
		ServerSideEncryption: s.sse,
		StorageClass:         s.class,
	}
	for k, v := range opts.Metadata {
		// An x-amz- name stops minio-go from treating a key such as
		// "content-type" as a header of its own.
		po.UserMetadata["x-amz-meta-"+k] = v
	}
	setCond := func(o *minio.PutObjectOptions) {
		switch {
		case ifMatch:
			o.SetMatchETag(opts.IfMatch)
		case opts.IfNoneMatch:
			o.SetMatchETagExcept("*")
		}
	}

	ctx, x := withExchange(ctx, "", nil)
	var info minio.UploadInfo
	var err error
	var size int64
	if b.Single != nil {
		size = b.Size
		setCond(&po)
		var md5b64, sha string
		md5b64, sha, err = sums(b.Single)
		if err != nil {
			return store.Attrs{}, fmt.Errorf("read body: %w", err)
		}
		// DisableContentSha256 signs the payload hash given here; without
		// it minio-go on plain http streams an aws-chunked body, and some
		// servers (versitygw) then store "aws-chunked" in Content-Encoding.
		po.DisableContentSha256 = true
		info, err = s.core.PutObject(ctx, s.bucket, key, b.Single, size, md5b64, sha, po)
	} else {
		info, size, err = s.multipart(ctx, key, b.Parts, int(partSize(opts.Size)), po)
	}
	if err != nil {
		return store.Attrs{}, s.err(ifMatch, err)
	}
	s.sawVersionID(info.VersionID)
	ct := opts.ContentType
	if ct == "" {
		ct = "application/octet-stream" // what minio-go sends
	}
	return store.Attrs{
		ETag:            trimETag(info.ETag),
		Size:            size,
		LastModified:    info.LastModified,
		ServerTime:      x.serverTime(),
		Metadata:        lowerKeys(opts.Metadata),
		ContentType:     ct,
		ContentEncoding: opts.ContentEncoding,
	}, nil
}

// multipart uploads body as parts of partLen bytes, and completes the
// upload. It aborts the upload on failure, once
// its part request has returned, which the transport delays until the
// server is done with a part it has in full (package partupload). A body
// that differs from its declared size fails as it is read (package
// portable). Conditional writes never come here.
func (s *bucket) multipart(ctx context.Context, key string, body io.Reader, partLen int, po minio.PutObjectOptions) (info minio.UploadInfo, size int64, err error) {
	// Started on a context of its own: cancelled halfway, the request
	// could create an upload whose id never reaches us to abort it.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	id, err := s.core.NewMultipartUpload(cctx, s.bucket, key, po)
	cancel()
	if err != nil {
		return info, 0, err
	}
	defer func() {
		if err != nil {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
			defer cancel()
			s.core.AbortMultipartUpload(actx, s.bucket, key, id) //nolint:errcheck // best effort; lifecycle rules sweep the rest
		}
	}()
	var buf []byte
	var eof bool
	var parts []minio.CompletePart
	for n := 1; ; n++ {
		buf, eof, err = portable.Fill(body, buf, partLen)
		if err != nil {
			return info, size, fmt.Errorf("read body: %w", err)
		}
		if len(buf) == 0 && n > 1 {
			break
		}
		if n > maxParts {
			return info, size, fmt.Errorf("body exceeds %d parts of %d bytes", maxParts, partLen)
		}
		md5b64, sha, _ := sums(bytes.NewReader(buf)) // a bytes.Reader neither fails nor refuses to seek
		p, err := s.core.PutObjectPart(ctx, s.bucket, key, id, n, bytes.NewReader(buf), int64(len(buf)),
			minio.PutObjectPartOptions{Md5Base64: md5b64, Sha256Hex: sha, SSE: s.ssec, DisableContentSha256: true})
		if err != nil {
			return info, size, err
		}
		parts = append(parts, minio.CompletePart{PartNumber: n, ETag: p.ETag})
		size += int64(len(buf))
		if eof {
			break
		}
	}
	info, err = s.core.CompleteMultipartUpload(ctx, s.bucket, key, id, parts, minio.PutObjectOptions{})
	return info, size, err
}

// sums returns the base64 MD5 (Content-MD5) and hex SHA-256 (the signed
// payload hash) of r from its offset to its end, and rewinds r.
func sums(r io.ReadSeeker) (md5b64, sha256hex string, err error) {
	start, err := r.Seek(0, io.SeekCurrent)
	if err != nil {
		return "", "", err
	}
	m, h := md5.New(), sha256.New()
	if _, err := io.Copy(io.MultiWriter(m, h), r); err != nil {
		return "", "", err
	}
	if _, err := r.Seek(start, io.SeekStart); err != nil {
		return "", "", err
	}
	return base64.StdEncoding.EncodeToString(m.Sum(nil)), hex.EncodeToString(h.Sum(nil)), nil
}

// checkPut rejects headers that S3 would refuse or misread.
func checkPut(opts store.PutOptions) error {
	switch {
	case badETag(opts.IfMatch):
		return fmt.Errorf("bad IfMatch ETag %q", opts.IfMatch)
	case !printable(opts.ContentType) || !printable(opts.ContentEncoding):
		return fmt.Errorf("bad content type %q or encoding %q", opts.ContentType, opts.ContentEncoding)
	}
	for k, v := range opts.Metadata {
		if k == "" || !isToken(k) || strings.ToLower(k) != k {
			return fmt.Errorf("bad metadata key %q: want lower case ASCII letters, digits, dash, underscore or dot", k)
		}
		if !printable(v) {
			return fmt.Errorf("metadata %q: value %q is not printable ASCII", k, v)
		}
	}
	return nil
}

// badETag reports whether etag cannot go in an If-Match header.
func badETag(etag string) bool { return !printable(etag) || strings.Contains(etag, `"`) }

// printable reports whether s is printable ASCII, as S3 header values must be.
func printable(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// isToken reports whether s is an HTTP token (a valid header name).
func isToken(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// Delete sends one DELETE. minio-go has no If-Match for DELETE, so the
// transport adds the header.
func (s *bucket) Delete(ctx context.Context, key, ifMatch string) error {
	var add http.Header
	if ifMatch != "" {
		add = http.Header{"If-Match": {`"` + ifMatch + `"`}}
	}
	ctx, _ = withExchange(ctx, http.MethodDelete, add)
	// Classified without the If-Match rule: a 404 means the key is gone.
	return s.err(false, s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}))
}

// DeleteBatch sends one multi-object DELETE; a key whose name is not valid
// in XML goes in a DELETE of its own (minio-go).
func (s *bucket) DeleteBatch(ctx context.Context, keys []string) ([]portable.KeyError, error) {
	objects := func(yield func(minio.ObjectInfo) bool) {
		for _, k := range keys {
			if !yield(minio.ObjectInfo{Key: k}) {
				return
			}
		}
	}
	results, err := s.client.RemoveObjectsWithIter(ctx, s.bucket, objects, minio.RemoveObjectsOptions{})
	if err != nil {
		return nil, s.err(false, err)
	}
	seen := make(map[string]bool, len(keys))
	var failed []portable.KeyError
	for r := range results {
		seen[r.ObjectName] = true
		if r.Err == nil {
			continue
		}
		if er, ok := errors.AsType[minio.ErrorResponse](r.Err); ok && er.Code == minio.NoSuchKey {
			continue // already gone
		}
		failed = append(failed, portable.KeyError{Key: r.ObjectName, Err: s.err(false, r.Err)})
	}
	if len(failed) == 0 {
		return nil, ctx.Err()
	}
	// minio-go stops after a failed request; the keys it never sent are
	// not deleted either.
	for _, k := range keys {
		if !seen[k] {
			failed = append(failed, portable.KeyError{Key: k, Err: errors.New("no result for it")})
			seen[k] = true
		}
	}
	return failed, nil
}

// List sends one ListObjectsV2.
//
// minio-go's Core.ListObjectsV2 takes no context, so the request runs in a
// goroutine and List returns when ctx ends; the abandoned request finishes
// on its own, bounded by minio-go's retries.
func (s *bucket) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return store.ListPage{}, err
	}
	startAfter := req.StartAfter
	if req.Token != "" {
		startAfter = ""
	}
	type result struct {
		r   minio.ListBucketV2Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := s.core.ListObjectsV2(s.bucket, req.Prefix, startAfter, req.Token, req.Delimiter, req.MaxKeys)
		done <- result{r, err}
	}()
	var res result
	select {
	case <-ctx.Done():
		return store.ListPage{}, ctx.Err()
	case res = <-done:
	}
	if res.err != nil {
		return store.ListPage{}, s.err(false, res.err)
	}
	var page store.ListPage
	for _, o := range res.r.Contents {
		page.Objects = append(page.Objects, store.Object{
			Key: o.Key, Size: o.Size, ETag: trimETag(o.ETag), LastModified: o.LastModified,
		})
	}
	for _, p := range res.r.CommonPrefixes {
		page.Prefixes = append(page.Prefixes, p.Prefix)
	}
	if res.r.IsTruncated {
		page.Next = res.r.NextContinuationToken
	}
	return page, nil
}

// first returns the first non-empty string.
func first(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
