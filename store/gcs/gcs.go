package gcs

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
	"sync/atomic"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/storage"
	"github.com/googleapis/gax-go/v2"
	"golang.org/x/sync/errgroup"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/httptimeout"
	"github.com/commitptr/commitptr/store/internal/inflight"
	"github.com/commitptr/commitptr/store/internal/portable"
)

// PartSize is the largest body Put sends in one retryable request, and the
// chunk size of a resumable upload. Put holds at most one chunk in memory,
// and the client library a copy of it.
const PartSize = 16 << 20

// maxObjectSize is the largest object Cloud Storage accepts (5 TiB).
const maxObjectSize = 5 << 40

// maxAttempts is how often the client sends a request that fails with a
// retryable error, the first attempt included; throttleAttempts, how often
// it sends one that the service throttles (429 or 503), since the window
// of requests in flight shrinks meanwhile (package inflight).
const (
	maxAttempts      = 3
	throttleAttempts = 10
)

// maxBackoff caps the wait before an attempt, the client's default. (A
// variable for the tests, which count attempts without waiting minutes.)
var maxBackoff = 30 * time.Second

// deleteWorkers is how many DELETE requests DeleteMany keeps in flight:
// the JSON API deletes one object per request.
const deleteWorkers = 16

// EmulatorEnv names the environment variable that points the driver at an
// emulator, as Google's client libraries read it: host:port or a URL.
const EmulatorEnv = "STORAGE_EMULATOR_HOST"

// Options configures New.
type Options struct {
	// Bucket is the bucket name. It is required.
	Bucket string
	// Endpoint is the server's base URL, e.g. http://127.0.0.1:4443.
	// Empty means $STORAGE_EMULATOR_HOST, then Cloud Storage itself. An
	// http:// endpoint is an emulator, or a proxy that authenticates on
	// its own: the driver sends it no credentials, so that none travel in
	// clear text. An https:// endpoint gets the credentials of Application
	// Default Credentials, as Cloud Storage does.
	Endpoint string
	// Transport, if not nil, sends the HTTP requests (below the
	// credentials); the default is an http.Transport with Timeouts applied.
	Transport http.RoundTripper
	// Timeouts bound each request; zero fields are the defaults.
	Timeouts store.Timeouts
	// Encryption of the objects written. Cloud Storage encrypts every
	// object with Google-managed keys; SSE store.SSEKMS with a KMSKeyID
	// (a Cloud KMS key name) asks for that key instead, and a CustomerKey
	// for a customer-supplied key, which every read sends too.
	// store.SSEAES256 is refused: it would ask for nothing more.
	Encryption store.Encryption
	// StorageClass is the storage class of the objects written, such as
	// NEARLINE; empty means the bucket's default.
	StorageClass string
	// Transfers is how many requests the store keeps in flight: 0 adapts
	// it, N pins it (store.Config.Transfers).
	Transfers int
}

// Store is a store.Store backed by one Cloud Storage bucket: the portable
// layer (package portable) over the bucket's requests. It is safe for
// concurrent use.
type Store struct {
	*portable.Bucket
	b *bucket
}

// bucket is the portable.Driver of one Cloud Storage bucket.
type bucket struct {
	client   *storage.Client
	bucket   *storage.BucketHandle // without retry settings: see object
	name     string                // the bucket's name
	endpoint string                // scheme://host, for error messages
	enc      store.Encryption
	class    string
}

var _ store.Store = (*Store)(nil)

// New returns a Store for opts.Bucket. It sends no request, so a wrong
// bucket, endpoint or credential shows up in the first operation. Finding
// Application Default Credentials reads the environment and files only;
// the metadata server, where it is the source, is asked on first use.
func New(ctx context.Context, opts Options) (*Store, error) {
	if err := checkBucket(opts.Bucket); err != nil {
		return nil, err
	}
	if err := checkEncryption(opts.Encryption); err != nil {
		return nil, err
	}
	raw := opts.Endpoint
	if raw == "" {
		raw = os.Getenv(EmulatorEnv)
		if raw != "" && !strings.Contains(raw, "://") {
			raw = "http://" + raw
		}
	}
	base := opts.Transport
	if base == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// As many idle connections as the window keeps requests in flight.
		tr.MaxIdleConns = inflight.Adaptive.Max
		tr.MaxIdleConnsPerHost = inflight.Adaptive.Max
		httptimeout.Apply(tr, opts.Timeouts)
		base = tr
	}
	base = inflight.RoundTripper(httptimeout.RoundTripper(transport{base: base}, opts.Timeouts), inflight.For(opts.Transfers))
	endpoint := "https://storage.googleapis.com"
	clientOpts := []option.ClientOption{storage.WithXMLReads(), storage.WithDisabledClientMetrics()}
	if raw != "" {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return nil, fmt.Errorf("gcs: bad endpoint %q: want http://host[:port] or https://host[:port]", raw)
		}
		endpoint = u.Scheme + "://" + u.Host
		clientOpts = append(clientOpts, option.WithEndpoint(endpoint+"/storage/v1/"))
	}
	var rt http.RoundTripper = base
	if strings.HasPrefix(endpoint, "https://") {
		var err error
		rt, err = htransport.NewTransport(ctx, base, option.WithScopes(storage.ScopeFullControl))
		if err != nil {
			return nil, fmt.Errorf("gcs: no credentials: Application Default Credentials found none (set GOOGLE_APPLICATION_CREDENTIALS, or run gcloud auth application-default login): %w: %w", err, store.ErrAccess)
		}
	} else {
		clientOpts = append(clientOpts, option.WithoutAuthentication())
	}
	clientOpts = append(clientOpts, option.WithHTTPClient(&http.Client{Transport: rt}))
	client, err := storage.NewClient(ctx, clientOpts...)
	if err != nil {
		return nil, fmt.Errorf("gcs: endpoint %s: %w", endpoint, err)
	}
	b := client.Bucket(opts.Bucket)
	d := &bucket{
		client: client, bucket: b,
		name: opts.Bucket, endpoint: endpoint, enc: opts.Encryption, class: opts.StorageClass,
	}
	return &Store{Bucket: portable.New(d, portable.Limits{
		MaxObject: maxObjectSize,
		Part:      func(int64) int64 { return PartSize },
	}), b: d}, nil
}

// checkEncryption refuses what Cloud Storage cannot do as asked.
func checkEncryption(e store.Encryption) error {
	if err := e.Check(); err != nil {
		return fmt.Errorf("gcs: %w", err)
	}
	switch {
	case e.SSE == store.SSEAES256:
		return fmt.Errorf("gcs: Cloud Storage encrypts every object with Google-managed keys; sse=%s asks for nothing more: leave it out", store.SSEAES256)
	case e.SSE == store.SSEKMS && e.KMSKeyID == "":
		return fmt.Errorf("gcs: sse=%s needs a KMS key id: the Cloud KMS key name, projects/P/locations/L/keyRings/R/cryptoKeys/K", store.SSEKMS)
	}
	return nil
}

// retries is the retry policy of every request: any request may be
// retried, also an unconditional write or delete, as the S3 drivers do
// (the outcome is the same either way), with as many attempts as the S3
// drivers make (3, and 10 for a throttled request), so that an endpoint
// that times out fails an operation after about 3 times the limit. The
// client's uploads ignore the number of attempts (they retry until a
// deadline), so retryDecider counts them too.
//
// The options go on each object handle, and on the bucket handle of each
// listing, never on the client: a handle's Retryer changes the retry
// settings it shares with the client in place.
func retries() []storage.RetryOption {
	return []storage.RetryOption{
		storage.WithPolicy(storage.RetryAlways),
		storage.WithMaxAttempts(throttleAttempts),
		storage.WithBackoff(gax.Backoff{Initial: min(time.Second, maxBackoff), Max: maxBackoff, Multiplier: 2}),
		storage.WithErrorFunc(retryDecider()),
	}
}

// retryDecider returns the retry decision of one operation: whether a
// request that failed with err is sent again. It counts the failures; the
// client also asks it about requests that succeeded (each chunk of a
// resumable upload), which count for nothing.
func retryDecider() func(error) bool {
	var failed atomic.Int32
	return func(err error) bool {
		if err == nil {
			return false
		}
		sent := failed.Add(1)
		if throttled(err) {
			return sent < throttleAttempts
		}
		return sent < maxAttempts && storage.ShouldRetry(err)
	}
}

// throttled reports whether err is the service asking to slow down: a 429
// or a 503.
func throttled(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && (ge.Code == http.StatusTooManyRequests || ge.Code == http.StatusServiceUnavailable)
}

// object returns a handle on key with the retry policy of one operation.
func (s *bucket) object(key string) *storage.ObjectHandle {
	return s.bucket.Object(key).Retryer(retries()...)
}

// keyed returns a handle on key that sends the customer key, if any: every
// read and write of an object carries it.
func (s *bucket) keyed(key string) *storage.ObjectHandle {
	obj := s.object(key)
	if s.enc.CustomerKey != nil {
		obj = obj.Key(s.enc.CustomerKey)
	}
	return obj
}

// checkBucket refuses names that Cloud Storage would refuse: 3 to 222
// characters of lower case letters, digits, '-', '_' and '.'.
func checkBucket(name string) error {
	if name == "" {
		return errors.New("gcs: no bucket name given")
	}
	if len(name) < 3 || len(name) > 222 {
		return fmt.Errorf("gcs: bad bucket name %q: want 3 to 222 characters", name)
	}
	for i := range len(name) {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("gcs: bad bucket name %q: want lower case letters, digits, '-', '_' and '.'", name)
		}
	}
	return nil
}

// String names the store's bucket and endpoint; so do %v and %+v, which
// would otherwise print a customer key.
func (s *Store) String() string { return "gs://" + s.b.name + " at " + s.b.endpoint }

// Close releases the client's resources.
func (s *Store) Close() error { return s.b.client.Close() }

// token is the version token of a generation: its decimal form.
func token(generation int64) string { return strconv.FormatInt(generation, 10) }

// generation reads a version token that Put, Head, Get or List returned.
// Anything else (another form of the same number, 0, which the API takes
// for "does not exist", or a token of another driver) names no
// generation of the object, so a condition on it cannot hold: ok is
// false, and the caller reports a failed precondition without asking.
func generation(tok string) (gen int64, ok bool) {
	gen, err := strconv.ParseInt(tok, 10, 64)
	if err != nil || gen <= 0 || token(gen) != tok {
		return 0, false
	}
	return gen, true
}

// Get sends one GET, for the stored bytes
// (no decompressive transcoding of gzip objects).
func (s *bucket) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	return s.get(ctx, key, 0, -1)
}

// GetRange sends one GET of the stored bytes with a Range; a 416 is
// store.ErrInvalidRange (s.err). The client reads the whole object's size
// from the Content-Range.
func (s *bucket) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	return s.get(ctx, key, off, n)
}

// get sends one GET of n bytes from off; n < 0 means to the end.
func (s *bucket) get(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	if err := checkKey(key); err != nil {
		return nil, store.Attrs{}, portable.Classify(store.ErrInvalidKey, err)
	}
	ctx, x := withExchange(ctx)
	r, err := s.keyed(key).ReadCompressed(true).NewRangeReader(ctx, off, n)
	if err != nil {
		return nil, store.Attrs{}, s.err("get", err)
	}
	body := &reader{r: r, x: x, key: key}
	h := x.header()
	a := store.Attrs{
		ETag:            token(r.Attrs.Generation),
		Size:            r.Attrs.Size,
		LastModified:    r.Attrs.LastModified,
		ServerTime:      x.serverTime(),
		ContentType:     r.Attrs.ContentType,
		ContentEncoding: r.Attrs.ContentEncoding,
		Metadata:        metadataOf(h),
	}
	return body, a, nil
}

// reader is the body of a Get. The client resumes a download whose body
// fails with a ranged request; when that fails too, its error no longer
// says why the first one did (an idle timeout, naming the endpoint), so
// reader adds that cause.
type reader struct {
	r   *storage.Reader
	x   *exchange
	key string
}

func (b *reader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		if first := b.x.bodyError(); first != nil && !errors.Is(err, first) {
			err = fmt.Errorf("%w (resuming the download failed too: %v)", first, err)
		}
		err = store.Wrap("get", b.key, nil, fmt.Errorf("read body: %w", err))
	}
	return n, err
}

func (b *reader) Close() error { return b.r.Close() }

// metadataOf reads user metadata from the x-goog-meta- headers of a
// download.
func metadataOf(h http.Header) map[string]string {
	var m map[string]string
	for k, v := range h {
		if name, ok := strings.CutPrefix(strings.ToLower(k), "x-goog-meta-"); ok && len(v) > 0 {
			if m == nil {
				m = map[string]string{}
			}
			m[name] = v[0]
		}
	}
	return m
}

// Head sends one GET of the object's metadata.
func (s *bucket) Head(ctx context.Context, key string) (store.Attrs, error) {
	if err := checkKey(key); err != nil {
		return store.Attrs{}, portable.Classify(store.ErrInvalidKey, err)
	}
	ctx, x := withExchange(ctx)
	oa, err := s.keyed(key).Attrs(ctx)
	if err != nil {
		return store.Attrs{}, s.err("head", err)
	}
	a := attrsOf(oa)
	a.ServerTime = x.serverTime()
	return a, nil
}

func attrsOf(oa *storage.ObjectAttrs) store.Attrs {
	return store.Attrs{
		ETag:            token(oa.Generation),
		Size:            oa.Size,
		LastModified:    oa.Updated,
		ContentType:     oa.ContentType,
		ContentEncoding: oa.ContentEncoding,
		Metadata:        lowerKeys(oa.Metadata),
	}
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

// checkKey refuses object names that Cloud Storage refuses: empty, longer
// than 1024 bytes, not UTF-8, or with a carriage return or line feed.
func checkKey(key string) error {
	switch {
	case key == "":
		return errors.New("empty key")
	case len(key) > 1024:
		return fmt.Errorf("key of %d bytes: Cloud Storage takes at most 1024", len(key))
	case strings.ContainsAny(key, "\r\n"):
		return errors.New("key contains a carriage return or line feed")
	case !utf8.ValidString(key):
		return errors.New("key is not UTF-8")
	}
	return nil
}

// Put sends body.Single, and every conditional body, in one request, and
// body.Parts as a resumable upload in chunks of PartSize. A condition goes on the upload as
// ifGenerationMatch: the generation of IfMatch, or 0 (the object does not
// exist) for IfNoneMatch. A conditional write always goes up in one
// request of at most store.MaxConditionalSize bytes, read into memory
// first; up to PartSize bytes it is retried, beyond that not. An
// unconditional body of at most PartSize bytes (or of unknown size that
// turns out to fit) goes up in one request too; a larger one goes up as a
// resumable upload in chunks of PartSize.
func (s *bucket) Put(ctx context.Context, key string, pb portable.Body, opts store.PutOptions) (store.Attrs, error) {
	if err := checkPut(key, opts); err != nil {
		return store.Attrs{}, err
	}
	var conds *storage.Conditions
	switch {
	case opts.IfMatch != "":
		gen, ok := generation(opts.IfMatch)
		if !ok {
			return store.Attrs{}, portable.Classify(store.ErrPrecondition,
				fmt.Errorf("IfMatch %q is not a generation of the object", opts.IfMatch))
		}
		conds = &storage.Conditions{GenerationMatch: gen}
	case opts.IfNoneMatch:
		conds = &storage.Conditions{DoesNotExist: true}
	}
	var src io.Reader = pb.Single
	chunk := int(pb.Size) + 1 // more than the body: one request, retryable
	switch {
	case pb.Single == nil:
		src, chunk = pb.Parts, PartSize
	case pb.Size > PartSize:
		chunk = 0 // a large conditional body: one request, without the library's second copy
	}

	obj := s.keyed(key)
	if conds != nil {
		obj = obj.If(*conds)
	}
	ctx, x := withExchange(ctx)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := obj.NewWriter(wctx)
	w.ChunkSize = chunk
	w.ContentType = opts.ContentType
	w.ContentEncoding = opts.ContentEncoding
	w.ForceEmptyContentType = opts.ContentType == ""
	w.StorageClass = s.class
	w.KMSKeyName = s.enc.KMSKeyID
	if len(opts.Metadata) > 0 {
		w.Metadata = make(map[string]string, len(opts.Metadata))
		for k, v := range opts.Metadata {
			w.Metadata[k] = v
		}
	}
	if _, err := io.Copy(w, src); err != nil {
		cancel() // abandons the upload; Close then reports why
		w.Close()
		return store.Attrs{}, s.putError(ctx, key, err)
	}
	if err := w.Close(); err != nil {
		return store.Attrs{}, s.putError(ctx, key, err)
	}
	a := attrsOf(w.Attrs())
	a.ServerTime = x.serverTime()
	a.Metadata = lowerKeys(opts.Metadata)
	return a, nil
}

// checkPut rejects names that Cloud Storage would refuse or misread.
func checkPut(key string, opts store.PutOptions) error {
	if err := checkKey(key); err != nil {
		return err
	}
	for k := range opts.Metadata {
		if k == "" || strings.ToLower(k) != k {
			return fmt.Errorf("bad metadata key %q: want lower case", k)
		}
	}
	return nil
}

// Delete sends one DELETE, with IfMatch as ifGenerationMatch. An IfMatch
// that is no generation fails without a request, and without asking
// whether the key exists.
func (s *bucket) Delete(ctx context.Context, key, ifMatch string) error {
	if err := checkKey(key); err != nil {
		return portable.Classify(store.ErrInvalidKey, err)
	}
	obj := s.object(key)
	if ifMatch != "" {
		gen, ok := generation(ifMatch)
		if !ok {
			return store.Wrap("delete", key, store.ErrPrecondition, fmt.Errorf("IfMatch %q is not a generation of the object", ifMatch))
		}
		obj = obj.If(storage.Conditions{GenerationMatch: gen})
	}
	return s.err("delete", obj.Delete(ctx))
}

// DeleteBatch sends one DELETE per key, deleteWorkers at a time: the JSON
// API deletes one object per request. store.Count counts requests by kind
// as S3 bills them, one per store.MaxDeleteBatch keys, which is fewer than
// Cloud Storage receives.
func (s *bucket) DeleteBatch(ctx context.Context, keys []string) ([]portable.KeyError, error) {
	errs := make([]error, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(deleteWorkers)
	for i, k := range keys {
		g.Go(func() error {
			if errs[i] = gctx.Err(); errs[i] == nil {
				errs[i] = s.Delete(gctx, k, "")
			}
			return nil
		})
	}
	g.Wait() //nolint:errcheck // the goroutines report through errs
	var failed []portable.KeyError
	for i, err := range errs {
		if err != nil {
			failed = append(failed, portable.KeyError{Key: keys[i], Err: err})
		}
	}
	return failed, nil
}

// List sends one objects.list request. StartAfter
// becomes the API's startOffset (which is inclusive) at the next possible
// name; the page token is the API's.
func (s *bucket) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	q := &storage.Query{Prefix: req.Prefix, Delimiter: req.Delimiter, Projection: storage.ProjectionNoACL}
	if req.Token == "" && req.StartAfter != "" {
		q.StartOffset = req.StartAfter + "\x00"
	}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Generation", "Updated"}); err != nil {
		return store.ListPage{}, err
	}
	it := s.bucket.Retryer(retries()...).Objects(ctx, q)
	it.PageInfo().MaxSize = req.MaxKeys
	it.PageInfo().Token = req.Token
	var page store.ListPage
	for {
		oa, err := it.Next()
		if err == iterator.Done {
			return page, nil
		}
		if err != nil {
			return store.ListPage{}, s.err("list", err)
		}
		if oa.Prefix != "" {
			page.Prefixes = append(page.Prefixes, oa.Prefix)
		} else {
			page.Objects = append(page.Objects, store.Object{
				Key: oa.Name, Size: oa.Size, ETag: token(oa.Generation), LastModified: oa.Updated,
			})
		}
		// One page of the API is one page of ours: stop where its entries
		// end, before the iterator asks for the next one. Its token then
		// continues after it.
		if it.PageInfo().Remaining() == 0 {
			page.Next = it.PageInfo().Token
			return page, nil
		}
	}
}
