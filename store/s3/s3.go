package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	tmtypes "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager/types"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithymiddleware "github.com/aws/smithy-go/middleware"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/httptimeout"
	"github.com/commitptr/commitptr/store/internal/inflight"
	"github.com/commitptr/commitptr/store/internal/partupload"
	"github.com/commitptr/commitptr/store/internal/portable"
	"github.com/commitptr/commitptr/store/internal/versions"
)

// PartThreshold is the largest body Put sends as a single PutObject. Larger
// bodies, and bodies of unknown size that turn out larger, go up as a
// multipart upload.
const PartThreshold = 16 << 20

// maxObjectSize is the largest object S3 accepts (5 TiB).
const maxObjectSize = 5 << 40

// maxIdleConns is the connection pool size: as many as the adaptive window
// keeps in flight at most.
const maxIdleConns = 256

// partSize is the size of each part of a multipart upload.
const partSize = 8 << 20

// abortTimeout bounds the abort of a failed multipart upload, and the
// CreateMultipartUpload that starts one; both run on a context that the
// caller's cancellation does not reach.
const abortTimeout = 30 * time.Second

// DefaultRegion is the region used when neither Options nor the AWS
// configuration names one.
const DefaultRegion = "us-east-1"

// Options configures New. Zero fields fall back to the standard AWS
// configuration (environment variables and shared config files).
type Options struct {
	// Bucket is the bucket name. It is required.
	Bucket string
	// Endpoint is the S3 endpoint URL, e.g. http://127.0.0.1:7070. Empty
	// means AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or the AWS endpoint for
	// the region.
	Endpoint string
	// Region is the signing region. Empty means AWS_REGION or the profile's
	// region, and DefaultRegion when none is set.
	Region string
	// Profile names a shared config profile. Empty means AWS_PROFILE or
	// "default".
	Profile string
	// PathStyle addresses buckets as endpoint/bucket rather than
	// bucket.endpoint, as most S3-compatible servers need. The environment
	// variable AWS_S3_USE_PATH_STYLE=true turns it on too.
	PathStyle bool
	// HTTPClient, if not nil, sends the S3 requests. Its TLS settings and
	// timeouts are its own: AWS_CA_BUNDLE and Timeouts apply only to the
	// default client.
	HTTPClient *http.Client
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
}

// Store is a store.Store backed by one S3 bucket: the portable layer
// (package portable) over the bucket's requests. It is safe for concurrent
// use.
type Store struct {
	*portable.Bucket
	b *bucket
}

// bucket is the portable.Driver of one S3 bucket.
type bucket struct {
	client   *awss3.Client
	uploader *transfermanager.Client
	bucket   string
	endpoint string // for error messages
	ver      *versions.State
	enc      store.Encryption
	class    string
}

var (
	_ store.Store           = (*Store)(nil)
	_ portable.Versions     = (*bucket)(nil)
	_ store.LeftoverSweeper = (*Store)(nil)
)

// New returns a Store for opts.Bucket. It loads the AWS configuration but
// sends no request, so a wrong bucket, endpoint or credential shows up in
// the first operation.
func New(ctx context.Context, opts Options) (*Store, error) {
	if opts.Bucket == "" {
		return nil, errors.New("s3: no bucket name given")
	}
	if strings.ContainsAny(opts.Bucket, "/:?#") {
		return nil, fmt.Errorf("s3: bad bucket name %q", opts.Bucket)
	}
	if err := opts.Encryption.Check(); err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	if opts.Endpoint != "" {
		u, err := url.Parse(opts.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("s3: bad endpoint %q: want an http:// or https:// URL", opts.Endpoint)
		}
	}
	pathStyle := opts.PathStyle
	if !pathStyle {
		if v := os.Getenv("AWS_S3_USE_PATH_STYLE"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("s3: AWS_S3_USE_PATH_STYLE=%q is not a boolean", v)
			}
			pathStyle = b
		}
	}

	// The SDK keeps 10 idle connections per host by default; commitptr
	// uploads and downloads 16 or more objects at once, so it would
	// reconnect constantly. The buildable client keeps AWS_CA_BUNDLE
	// working. It has no response header or idle timeout of its own.
	load := []func(*config.LoadOptions) error{
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConns = maxIdleConns
			t.MaxIdleConnsPerHost = maxIdleConns
			httptimeout.Apply(t, opts.Timeouts)
		})),
	}
	if opts.Region != "" {
		load = append(load, config.WithRegion(opts.Region))
	}
	if opts.Profile != "" {
		load = append(load, config.WithSharedConfigProfile(opts.Profile))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("s3: load AWS configuration: %w: %w", err, store.ErrAccess)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}

	window := inflight.For(opts.Transfers)
	client := awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		o.UsePathStyle = pathStyle
		// The retryer takes AWS_MAX_ATTEMPTS for failures other than
		// throttles; left set, the SDK would cap throttles with it too.
		o.Retryer = newRetryer(cfg.RetryMaxAttempts)
		o.RetryMaxAttempts = 0
		if opts.HTTPClient != nil {
			o.HTTPClient = opts.HTTPClient
		}
		// A part upload is seen through to its answer once its body is
		// sent, so that the abort of a cancelled upload is final. Every
		// request, parts included, takes a place in the window.
		o.HTTPClient = partupload.Client(inflight.Client(httptimeout.Client(o.HTTPClient, opts.Timeouts), window))
		// GetObject of a multipart object cannot validate its composite
		// checksum; the SDK would log that on every read.
		o.DisableLogOutputChecksumValidationSkipped = true
		// Readers verify every object's sha256 against its manifest while
		// streaming; the SDK's own CRC of each download would be a second
		// pass over the same bytes.
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	endpoint := aws.ToString(client.Options().BaseEndpoint)
	if endpoint == "" {
		endpoint = "AWS S3 in " + cfg.Region
	}
	b := &bucket{
		client: client,
		uploader: transfermanager.New(detachedCreate{client}, func(o *transfermanager.Options) {
			o.MultipartUploadThreshold = PartThreshold
			o.PartSizeBytes = partSize
			// Without it, the abort of an upload that failed because
			// ctx was cancelled runs on ctx, fails at once, and leaves
			// the upload behind.
			o.FailTimeout = abortTimeout
		}),
		bucket:   opts.Bucket,
		endpoint: endpoint,
		ver:      versions.NewState(opts.Versioning),
		enc:      opts.Encryption,
		class:    opts.StorageClass,
	}
	return &Store{Bucket: portable.New(b, portable.Limits{
		MaxObject: maxObjectSize,
		Part:      func(int64) int64 { return PartThreshold },
	}), b: b}, nil
}

// detachedCreate is the client the uploader uses. It sends
// CreateMultipartUpload on a context of its own, bounded by abortTimeout:
// cancelled halfway, the request could create an upload whose id never
// reaches the uploader, which then cannot abort it. Once the uploader has
// the id, every way a Put can fail ends in an abort.
type detachedCreate struct{ *awss3.Client }

func (c detachedCreate) CreateMultipartUpload(ctx context.Context, in *awss3.CreateMultipartUploadInput, opts ...func(*awss3.Options)) (*awss3.CreateMultipartUploadOutput, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	return c.Client.CreateMultipartUpload(ctx, in, opts...)
}

// String names the store's bucket and endpoint; so do %v and %+v, which
// would otherwise print a customer key.
func (s *Store) String() string { return "s3://" + s.b.bucket + " at " + s.b.endpoint }

// Get opens the object for reading. The caller must close the body. If the
// key does not exist, Get returns an error matching store.ErrNotExist.
func (s *bucket) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	out, err := s.get(ctx, key, nil)
	if err != nil {
		return nil, store.Attrs{}, err
	}
	return out.Body, getAttrs(out), nil
}

// GetRange sends one GetObject with a Range; a 416 is
// store.ErrInvalidRange (store.ClassOfS3).
func (s *bucket) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	out, err := s.get(ctx, key, aws.String(portable.RangeHeader(off, n)))
	if err != nil {
		return nil, store.Attrs{}, err
	}
	a := getAttrs(out)
	if a.Size, err = portable.RangeOf(aws.ToString(out.ContentRange), off, n); err != nil {
		out.Body.Close()
		return nil, store.Attrs{}, err
	}
	return out.Body, a, nil
}

// get sends one GetObject, of rng when it is not nil, with the customer
// key if there is one.
func (s *bucket) get(ctx context.Context, key string, rng *string) (*awss3.GetObjectOutput, error) {
	in := &awss3.GetObjectInput{Bucket: &s.bucket, Key: &key, Range: rng}
	if k, sum, ok := s.enc.CustomerKeyHeaders(); ok {
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String(store.SSEAES256), &k, &sum
	}
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return nil, s.err(false, err)
	}
	return out, nil
}

// getAttrs reads an object's attributes from a GetObject's answer.
func getAttrs(out *awss3.GetObjectOutput) store.Attrs {
	return store.Attrs{
		ETag:            trimETag(out.ETag),
		Size:            sizeOf(out.ContentLength),
		LastModified:    aws.ToTime(out.LastModified),
		ServerTime:      serverTime(out.ResultMetadata),
		Metadata:        lowerKeys(out.Metadata),
		ContentType:     aws.ToString(out.ContentType),
		ContentEncoding: aws.ToString(out.ContentEncoding),
	}
}

// Head returns the object's attributes. If the key does not exist, Head
// returns an error matching store.ErrNotExist.
func (s *bucket) Head(ctx context.Context, key string) (store.Attrs, error) {
	in := &awss3.HeadObjectInput{Bucket: &s.bucket, Key: &key}
	if k, sum, ok := s.enc.CustomerKeyHeaders(); ok {
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String(store.SSEAES256), &k, &sum
	}
	out, err := s.client.HeadObject(ctx, in)
	if err != nil {
		return store.Attrs{}, s.err(false, err)
	}
	return store.Attrs{
		ETag:            trimETag(out.ETag),
		Size:            sizeOf(out.ContentLength),
		LastModified:    aws.ToTime(out.LastModified),
		ServerTime:      serverTime(out.ResultMetadata),
		Metadata:        lowerKeys(out.Metadata),
		ContentType:     aws.ToString(out.ContentType),
		ContentEncoding: aws.ToString(out.ContentEncoding),
	}, nil
}

// Put sends a body of at most PartThreshold bytes, and every conditional
// one, in one PutObject, and a larger one as a multipart upload: servers
// exist that ignore conditions on CompleteMultipartUpload.
func (s *bucket) Put(ctx context.Context, key string, b portable.Body, opts store.PutOptions) (store.Attrs, error) {
	attrs := store.Attrs{
		Metadata:        opts.Metadata,
		ContentType:     opts.ContentType,
		ContentEncoding: opts.ContentEncoding,
	}

	if b.Single != nil {
		in := &awss3.PutObjectInput{
			Bucket:          &s.bucket,
			Key:             &key,
			Body:            b.Single,
			ContentLength:   aws.Int64(b.Size),
			Metadata:        opts.Metadata,
			ContentType:     optString(opts.ContentType),
			ContentEncoding: optString(opts.ContentEncoding),
			IfMatch:         quoteETag(opts.IfMatch),
		}
		if opts.IfNoneMatch {
			in.IfNoneMatch = aws.String("*")
		}
		in.ServerSideEncryption = types.ServerSideEncryption(s.enc.SSE)
		in.SSEKMSKeyId = optString(s.enc.KMSKeyID)
		in.StorageClass = types.StorageClass(s.class)
		if k, sum, ok := s.enc.CustomerKeyHeaders(); ok {
			in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String(store.SSEAES256), &k, &sum
		}
		out, err := s.client.PutObject(ctx, in)
		if err != nil {
			return store.Attrs{}, s.err(opts.IfMatch != "", err)
		}
		s.sawVersionID(out.VersionId)
		attrs.ETag = trimETag(out.ETag)
		attrs.Size = b.Size
		attrs.ServerTime = serverTime(out.ResultMetadata)
		return attrs, nil
	}

	in := &transfermanager.UploadObjectInput{
		Bucket:          &s.bucket,
		Key:             &key,
		Body:            b.Parts,
		Metadata:        opts.Metadata,
		ContentType:     optString(opts.ContentType),
		ContentEncoding: optString(opts.ContentEncoding),
		// The uploader sends these with CreateMultipartUpload, and the
		// customer key with every part too.
		ServerSideEncryption: tmtypes.ServerSideEncryption(s.enc.SSE),
		SSEKMSKeyID:          optString(s.enc.KMSKeyID),
		StorageClass:         tmtypes.StorageClass(s.class),
	}
	if k, sum, ok := s.enc.CustomerKeyHeaders(); ok {
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String(store.SSEAES256), &k, &sum
	}
	out, err := s.uploader.UploadObject(ctx, in)
	if err != nil {
		return store.Attrs{}, s.err(false, err)
	}
	s.sawVersionID(out.VersionID)
	attrs.ETag = trimETag(out.ETag)
	attrs.Size = sizeOf(out.ContentLength)
	attrs.ServerTime = serverTime(out.ResultMetadata)
	return attrs, nil
}

// Delete sends one DeleteObject.
func (s *bucket) Delete(ctx context.Context, key, ifMatch string) error {
	_, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{
		Bucket:  &s.bucket,
		Key:     &key,
		IfMatch: quoteETag(ifMatch),
	})
	// Classified without the If-Match rule: a 404 means the key is gone.
	return s.err(false, err)
}

// DeleteBatch sends one DeleteObjects.
func (s *bucket) DeleteBatch(ctx context.Context, keys []string) ([]portable.KeyError, error) {
	ids := make([]types.ObjectIdentifier, len(keys))
	for i := range keys {
		ids[i] = types.ObjectIdentifier{Key: &keys[i]}
	}
	out, err := s.client.DeleteObjects(ctx, &awss3.DeleteObjectsInput{
		Bucket: &s.bucket,
		Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
	})
	if err != nil {
		return nil, s.err(false, err)
	}
	var failed []portable.KeyError
	for _, e := range out.Errors {
		code := aws.ToString(e.Code)
		failed = append(failed, portable.KeyError{Key: aws.ToString(e.Key), Err: portable.Classify(
			store.ClassOfS3(code, 0, false), fmt.Errorf("%s: %s", code, aws.ToString(e.Message)))})
	}
	return failed, nil
}

// List sends one ListObjectsV2.
func (s *bucket) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	in := &awss3.ListObjectsV2Input{
		Bucket:    &s.bucket,
		Prefix:    optString(req.Prefix),
		Delimiter: optString(req.Delimiter),
		MaxKeys:   aws.Int32(int32(req.MaxKeys)),
	}
	if req.Token != "" {
		in.ContinuationToken = &req.Token
	} else {
		in.StartAfter = optString(req.StartAfter)
	}
	out, err := s.client.ListObjectsV2(ctx, in)
	if err != nil {
		return store.ListPage{}, s.err(false, err)
	}
	var page store.ListPage
	for _, o := range out.Contents {
		page.Objects = append(page.Objects, store.Object{
			Key:          aws.ToString(o.Key),
			Size:         sizeOf(o.Size),
			ETag:         trimETag(o.ETag),
			LastModified: aws.ToTime(o.LastModified),
		})
	}
	for _, p := range out.CommonPrefixes {
		page.Prefixes = append(page.Prefixes, aws.ToString(p.Prefix))
	}
	if aws.ToBool(out.IsTruncated) {
		page.Next = aws.ToString(out.NextContinuationToken)
	}
	return page, nil
}

// serverTime returns the response's Date header, or the zero time if the
// response had none: the local clock is not the store's.
func serverTime(md smithymiddleware.Metadata) time.Time {
	t, _ := awsmiddleware.GetServerTime(md)
	return t
}

func trimETag(p *string) string { return strings.Trim(aws.ToString(p), `"`) }

func quoteETag(etag string) *string {
	if etag == "" {
		return nil
	}
	return aws.String(`"` + strings.Trim(etag, `"`) + `"`)
}

func optString(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

func sizeOf(n *int64) int64 {
	if n == nil {
		return -1
	}
	return *n
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
