package azblob

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/httptimeout"
	"github.com/commitptr/commitptr/store/internal/inflight"
	"github.com/commitptr/commitptr/store/internal/portable"
)

// PartThreshold is the largest unconditional body Put sends as one Put
// Blob. Larger bodies, and bodies of unknown size that turn out larger, go
// up as staged blocks and a Put Block List. A conditional write is always
// one Put Blob.
const PartThreshold = 16 << 20

// maxObjectSize is the largest block blob: 50,000 blocks of 4,000 MiB.
const maxObjectSize = 50_000 * 4000 << 20

// blockSize and blockConcurrency shape a block upload: at most
// blockConcurrency blocks of blockSize bytes are buffered and in flight.
const (
	blockSize        = 8 << 20
	blockConcurrency = 4
)

// deleteConcurrency is how many Delete Blob requests DeleteMany keeps in
// flight.
const deleteConcurrency = 16

// maxIdleConns is the connection pool size, as in the S3 drivers.
const maxIdleConns = 256

// ConnectionStringEnv names the environment variable holding a storage
// account connection string.
const ConnectionStringEnv = "AZURE_STORAGE_CONNECTION_STRING"

// Options configures New.
type Options struct {
	// Container is the container name. It is required.
	Container string
	// ServiceURL is the blob service endpoint of the account, e.g.
	// https://account.blob.core.windows.net or, for Azurite,
	// http://127.0.0.1:10000/devstoreaccount1. Empty means the connection
	// string's BlobEndpoint, or the account's public endpoint.
	ServiceURL string
	// Account is the storage account name: it names the public endpoint
	// when ServiceURL is empty and signs an account key. Empty means the
	// connection string's AccountName, then AZURE_STORAGE_ACCOUNT.
	Account string
	// ConnectionString, if not empty, holds the credentials (an account key
	// or a shared access signature). Empty means
	// AZURE_STORAGE_CONNECTION_STRING; without either, the account key in
	// AZURE_STORAGE_KEY, and without that azidentity's default credential
	// chain.
	ConnectionString string
	// HTTPClient, if not nil, sends the requests; Timeouts do not apply
	// to it.
	HTTPClient *http.Client
	// Timeouts bound each request; zero fields are the defaults.
	Timeouts store.Timeouts
	// Encryption of the blobs written. Azure encrypts every blob with
	// Microsoft-managed keys; a CustomerKey asks for a customer-provided
	// key instead, which every read sends too. SSE is refused: an
	// encryption scope is not supported.
	Encryption store.Encryption
	// StorageClass is the access tier of the blobs written (Hot, Cool,
	// Cold or Archive); empty means the account's default.
	StorageClass string
	// Transfers is how many requests the store keeps in flight: 0 adapts
	// it, N pins it (store.Config.Transfers).
	Transfers int
}

// Store is a store.Store backed by one Azure Blob Storage container: the
// portable layer (package portable) over the container's requests. It is
// safe for concurrent use.
type Store struct {
	*portable.Bucket
	b *bucket
}

// bucket is the portable.Driver of one container.
type bucket struct {
	c         *container.Client
	container string
	endpoint  string           // the service URL, for error messages
	cpk       *blob.CPKInfo    // the customer key, on every write and read; nil without one
	tier      *blob.AccessTier // nil for the account's default
	// noStartFrom is set once the service has refused the startFrom
	// parameter of List Blobs; List then filters by StartAfter alone.
	noStartFrom atomic.Bool
}

var _ store.Store = (*Store)(nil)

// New returns a Store for opts.Container. It sends no request, so a wrong
// container, endpoint or credential shows up in the first operation.
func New(opts Options) (*Store, error) {
	if err := checkContainer(opts.Container); err != nil {
		return nil, err
	}
	cpk, tier, err := objectSettings(opts.Encryption, opts.StorageClass)
	if err != nil {
		return nil, err
	}
	var doer httptimeout.Doer = opts.HTTPClient
	if opts.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = maxIdleConns
		tr.MaxIdleConnsPerHost = maxIdleConns
		// Bodies are stored with their Content-Encoding and must come
		// back as stored, never decoded in transit.
		tr.DisableCompression = true
		httptimeout.Apply(tr, opts.Timeouts)
		doer = &http.Client{Transport: tr}
	}
	clientOpts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport:        inflight.Client(httptimeout.Client(doer, opts.Timeouts), inflight.For(opts.Transfers)),
		Retry:            retryOptions(),
		PerCallPolicies:  []policy.Policy{operationAttempts{}},
		PerRetryPolicies: []policy.Policy{attemptCounter{}},
		// No telemetry beyond the SDK's User-Agent.
		Telemetry: policy.TelemetryOptions{ApplicationID: "commitptr"},
	}}

	conn := opts.ConnectionString
	if conn == "" {
		conn = os.Getenv(ConnectionStringEnv)
	}
	cs, err := parseConnectionString(conn)
	if err != nil {
		return nil, err
	}
	// The account a connection string's key is for wins over the
	// environment's.
	account := cmpOr(opts.Account, cmpOr(cs["accountname"], os.Getenv("AZURE_STORAGE_ACCOUNT")))
	service := opts.ServiceURL
	if service == "" {
		service = cs["blobendpoint"]
	}
	if service == "" {
		if account == "" {
			return nil, errors.New("azblob: no storage account: name it in the URL (az://ACCOUNT.blob.core.windows.net/container), with ?endpoint=, AZURE_STORAGE_ACCOUNT or AZURE_STORAGE_CONNECTION_STRING")
		}
		suffix := cmpOr(cs["endpointsuffix"], "core.windows.net")
		service = cmpOr(cs["defaultendpointsprotocol"], "https") + "://" + account + ".blob." + suffix
	}
	u, err := url.Parse(service)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("azblob: bad endpoint %q: want an http:// or https:// URL", service)
	}
	service = strings.TrimSuffix(service, "/")
	containerURL := service + "/" + url.PathEscape(opts.Container)

	var c *container.Client
	key := cs["accountkey"]
	if conn == "" {
		key = os.Getenv("AZURE_STORAGE_KEY")
	}
	switch {
	case key != "":
		if account == "" {
			return nil, errors.New("azblob: an account key without an account name (AccountName in the connection string, or AZURE_STORAGE_ACCOUNT)")
		}
		cred, err := container.NewSharedKeyCredential(account, key)
		if err != nil {
			return nil, fmt.Errorf("azblob: account key of %q: %w", account, err)
		}
		c, err = container.NewClientWithSharedKeyCredential(containerURL, cred, clientOpts)
		if err != nil {
			return nil, fmt.Errorf("azblob: %w", err)
		}
	case cs["sharedaccesssignature"] != "":
		c, err = container.NewClientWithNoCredential(containerURL+"?"+strings.TrimPrefix(cs["sharedaccesssignature"], "?"), clientOpts)
		if err != nil {
			return nil, fmt.Errorf("azblob: %w", err)
		}
	default:
		// azidentity's chain: environment, workload identity, managed
		// identity, the Azure CLI and Developer CLI. Building it sends
		// no request.
		cred, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{ClientOptions: clientOpts.ClientOptions})
		if err != nil {
			return nil, fmt.Errorf("azblob: no credentials: %w", err)
		}
		c, err = container.NewClient(containerURL, cred, clientOpts)
		if err != nil {
			return nil, fmt.Errorf("azblob: %w", err)
		}
	}
	b := &bucket{c: c, container: opts.Container, endpoint: service, cpk: cpk, tier: tier}
	return &Store{Bucket: portable.New(b, portable.Limits{
		MaxObject: maxObjectSize,
		Part:      func(int64) int64 { return PartThreshold },
	}), b: b}, nil
}

// objectSettings turns e and class into what every write (and, for the
// customer key, every read) sends, refusing what Azure cannot do as asked.
func objectSettings(e store.Encryption, class string) (*blob.CPKInfo, *blob.AccessTier, error) {
	if err := e.Check(); err != nil {
		return nil, nil, fmt.Errorf("azblob: %w", err)
	}
	if e.SSE != "" {
		return nil, nil, fmt.Errorf("azblob: sse=%s: Azure encrypts every blob with Microsoft-managed keys, and encryption scopes are not supported; give a customer key or nothing", e.SSE)
	}
	var tier *blob.AccessTier
	if class != "" {
		i := slices.IndexFunc(blob.PossibleAccessTierValues(), func(t blob.AccessTier) bool { return strings.EqualFold(string(t), class) })
		if i < 0 {
			return nil, nil, fmt.Errorf("azblob: unknown access tier %q (want Hot, Cool, Cold or Archive)", class)
		}
		tier = &blob.PossibleAccessTierValues()[i]
	}
	var cpk *blob.CPKInfo
	if e.CustomerKey != nil {
		sum := sha256.Sum256(e.CustomerKey)
		cpk = &blob.CPKInfo{
			EncryptionAlgorithm: to.Ptr(blob.EncryptionAlgorithmTypeAES256),
			EncryptionKey:       to.Ptr(base64.StdEncoding.EncodeToString(e.CustomerKey)),
			EncryptionKeySHA256: to.Ptr(base64.StdEncoding.EncodeToString(sum[:])),
		}
	}
	return cpk, tier, nil
}

// checkContainer applies Azure's container naming rules: 3 to 63 lower
// case letters, digits and single hyphens, starting and ending with a
// letter or digit.
func checkContainer(name string) error {
	if name == "" {
		return errors.New("azblob: no container name given")
	}
	ok := len(name) >= 3 && len(name) <= 63 && name[0] != '-' && name[len(name)-1] != '-' && !strings.Contains(name, "--")
	for _, r := range name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("azblob: bad container name %q: want 3 to 63 lower case letters, digits and single hyphens", name)
	}
	return nil
}

// parseConnectionString reads "Key=Value;..." into a map with lower case
// keys. A value may contain "=" (account keys and signatures do).
func parseConnectionString(s string) (map[string]string, error) {
	out := map[string]string{}
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" {
			// The part may be a secret: never echo it.
			return nil, fmt.Errorf("azblob: %s: an entry without Key=Value", ConnectionStringEnv)
		}
		out[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	return out, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Get sends one Get Blob.
func (s *bucket) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	out, err := s.c.NewBlobClient(key).DownloadStream(ctx, &blob.DownloadStreamOptions{CPKInfo: s.cpk})
	if err != nil {
		return nil, store.Attrs{}, s.err(false, err)
	}
	return out.Body, downloadAttrs(out), nil
}

// GetRange sends one Get Blob with a range; a 416 is store.ErrInvalidRange
// (classOf).
func (s *bucket) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	out, err := s.c.NewBlobClient(key).DownloadStream(ctx, &blob.DownloadStreamOptions{
		CPKInfo: s.cpk,
		Range:   blob.HTTPRange{Offset: off, Count: n},
	})
	if err != nil {
		return nil, store.Attrs{}, s.err(false, err)
	}
	a := downloadAttrs(out)
	if a.Size, err = portable.RangeOf(deref(out.ContentRange), off, n); err != nil {
		out.Body.Close()
		return nil, store.Attrs{}, err
	}
	return out.Body, a, nil
}

// downloadAttrs reads a blob's attributes from a Get Blob's answer.
func downloadAttrs(out blob.DownloadStreamResponse) store.Attrs {
	return store.Attrs{
		ETag:            etagOf(out.ETag),
		Size:            sizeOf(out.ContentLength),
		LastModified:    timeOf(out.LastModified),
		ServerTime:      timeOf(out.Date),
		Metadata:        decodeMetadata(out.Metadata),
		ContentType:     deref(out.ContentType),
		ContentEncoding: deref(out.ContentEncoding),
	}
}

// Head sends one Get Blob Properties.
func (s *bucket) Head(ctx context.Context, key string) (store.Attrs, error) {
	out, err := s.c.NewBlobClient(key).GetProperties(ctx, &blob.GetPropertiesOptions{CPKInfo: s.cpk})
	if err != nil {
		return store.Attrs{}, s.err(false, err)
	}
	return store.Attrs{
		ETag:            etagOf(out.ETag),
		Size:            sizeOf(out.ContentLength),
		LastModified:    timeOf(out.LastModified),
		ServerTime:      timeOf(out.Date),
		Metadata:        decodeMetadata(out.Metadata),
		ContentType:     deref(out.ContentType),
		ContentEncoding: deref(out.ContentEncoding),
	}, nil
}

// Put sends body.Single, and so every conditional write, in one Put Blob
// with If-None-Match: * or If-Match: the condition is checked by the
// request that writes the object, never by a Put Block List after staged
// blocks. body.Parts goes up as staged blocks.
func (s *bucket) Put(ctx context.Context, key string, b portable.Body, opts store.PutOptions) (store.Attrs, error) {
	meta, err := encodeMetadata(opts.Metadata)
	if err != nil {
		return store.Attrs{}, portable.Classify(store.ErrInvalidKey, err)
	}
	headers := &blob.HTTPHeaders{
		BlobContentType:     optString(opts.ContentType),
		BlobContentEncoding: optString(opts.ContentEncoding),
	}
	attrs := store.Attrs{
		Metadata:        opts.Metadata,
		ContentType:     opts.ContentType,
		ContentEncoding: opts.ContentEncoding,
	}

	bb := s.c.NewBlockBlobClient(key)
	if b.Single != nil {
		mac := &blob.ModifiedAccessConditions{}
		if opts.IfNoneMatch {
			mac.IfNoneMatch = new(azcore.ETagAny)
		}
		if opts.IfMatch != "" {
			mac.IfMatch = quoteETag(opts.IfMatch)
		}
		out, err := bb.Upload(ctx, streaming.NopCloser(b.Single), &blockblob.UploadOptions{
			Metadata:         meta,
			HTTPHeaders:      headers,
			AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: mac},
			CPKInfo:          s.cpk,
			Tier:             s.tier,
		})
		if err != nil {
			return store.Attrs{}, s.err(opts.IfMatch != "", err)
		}
		attrs.ETag = etagOf(out.ETag)
		attrs.Size = b.Size
		attrs.LastModified = timeOf(out.LastModified)
		attrs.ServerTime = timeOf(out.Date)
		return attrs, nil
	}

	cr := &countingReader{r: b.Parts}
	out, err := bb.UploadStream(ctx, cr, &blockblob.UploadStreamOptions{
		BlockSize:   blockSize,
		Concurrency: blockConcurrency,
		Metadata:    meta,
		HTTPHeaders: headers,
		CPKInfo:     s.cpk,
		AccessTier:  s.tier,
	})
	if err != nil {
		return store.Attrs{}, s.err(false, err)
	}
	attrs.ETag = etagOf(out.ETag)
	attrs.Size = cr.n
	attrs.LastModified = timeOf(out.LastModified)
	attrs.ServerTime = timeOf(out.Date)
	return attrs, nil
}

// countingReader counts the bytes read through it. UploadStream reads from
// one goroutine.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Delete sends one Delete Blob. Azure answers a conditional delete of a
// missing blob with 412, which the portable layer reads (portable.Deleted).
func (s *bucket) Delete(ctx context.Context, key, ifMatch string) error {
	var o *blob.DeleteOptions
	if ifMatch != "" {
		o = &blob.DeleteOptions{AccessConditions: &blob.AccessConditions{
			ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: quoteETag(ifMatch)},
		}}
	}
	_, err := s.c.NewBlobClient(key).Delete(ctx, o)
	return s.err(false, err)
}

// DeleteBatch sends one Delete Blob per key, deleteConcurrency at a time
// (Azure's blob batch takes only 256 and bills each subrequest alike).
func (s *bucket) DeleteBatch(ctx context.Context, keys []string) ([]portable.KeyError, error) {
	errs := make([]error, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(deleteConcurrency)
	for i, k := range keys {
		g.Go(func() error {
			if errs[i] = gctx.Err(); errs[i] == nil {
				errs[i] = s.Delete(gctx, k, "")
			}
			return nil
		})
	}
	_ = g.Wait() // the goroutines report through errs
	var failed []portable.KeyError
	for i, err := range errs {
		if err != nil {
			failed = append(failed, portable.KeyError{Key: keys[i], Err: err})
		}
	}
	return failed, nil
}

// List sends one List Blobs request. Azure has no start-after: StartAfter is sent as
// startFrom (inclusive) of its successor, and every page of the listing is
// also filtered by it, so that a service that ignores startFrom still lists
// correctly: the page token carries StartAfter beside the service's marker.
// A service that refuses startFrom (400) is asked again without it, and
// never again with it: a listing then begins at the prefix, its first pages
// may be empty, and with a delimiter the common prefix that holds
// StartAfter is listed even if no key after StartAfter is under it (the
// page cannot tell). Azurite takes startFrom, and the SDK offers it for the
// service version it speaks.
func (s *bucket) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	if req.Token == "" && req.StartAfter != "" && !s.noStartFrom.Load() {
		page, err := s.list(ctx, req, true)
		if !refusedParameter(err) {
			return page, err
		}
		s.noStartFrom.Store(true)
	}
	return s.list(ctx, req, false)
}

// refusedParameter reports whether err is the service refusing a query
// parameter it does not know.
func refusedParameter(err error) bool {
	re, ok := errors.AsType[*azcore.ResponseError](err)
	return ok && re.StatusCode == http.StatusBadRequest &&
		(re.ErrorCode == "UnsupportedQueryParameter" || re.ErrorCode == "InvalidQueryParameterValue")
}

// list sends one List Blobs; withStartFrom says whether it may carry
// startFrom.
func (s *bucket) list(ctx context.Context, req store.ListRequest, withStartFrom bool) (store.ListPage, error) {
	maxKeys := req.MaxKeys
	after := ""
	var marker, startFrom *string
	if req.Token != "" {
		a, m, ok := parseToken(req.Token)
		if !ok {
			return store.ListPage{}, fmt.Errorf("azblob: bad list token %q", req.Token)
		}
		after, marker = a, &m
	} else if req.StartAfter != "" {
		after = req.StartAfter
		if withStartFrom {
			startFrom = optString(after + "\x00")
		}
	}
	var page store.ListPage
	var next *string
	var items []*container.BlobItem
	if req.Delimiter == "" {
		p := s.c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{
			Prefix: optString(req.Prefix), Marker: marker, MaxResults: new(int32(maxKeys)), StartFrom: startFrom,
		})
		out, err := p.NextPage(ctx)
		if err != nil {
			return store.ListPage{}, s.err(false, err)
		}
		if out.Segment != nil {
			items = out.Segment.BlobItems
		}
		next = out.NextMarker
	} else {
		p := s.c.NewListBlobsHierarchyPager(req.Delimiter, &container.ListBlobsHierarchyOptions{
			Prefix: optString(req.Prefix), Marker: marker, MaxResults: new(int32(maxKeys)), StartFrom: startFrom,
		})
		out, err := p.NextPage(ctx)
		if err != nil {
			return store.ListPage{}, s.err(false, err)
		}
		if out.Segment != nil {
			items = out.Segment.BlobItems
			for _, bp := range out.Segment.BlobPrefixes {
				name := deref(bp.Name)
				// A common prefix wholly at or below after has no key
				// after it.
				if after != "" && name <= after && !strings.HasPrefix(after, name) {
					continue
				}
				page.Prefixes = append(page.Prefixes, name)
			}
		}
		next = out.NextMarker
	}
	for _, it := range items {
		name := deref(it.Name)
		if name <= after && after != "" {
			continue
		}
		o := store.Object{Key: name, Size: -1}
		if p := it.Properties; p != nil {
			o.Size = sizeOf(p.ContentLength)
			o.ETag = etagOf(p.ETag)
			o.LastModified = timeOf(p.LastModified)
		}
		page.Objects = append(page.Objects, o)
	}
	page.Next = makeToken(after, deref(next))
	return page, nil
}

// makeToken returns the page token that continues a listing at the
// service's marker, filtered by after. A token that carries a filter is a
// NUL byte, the length of after in decimal, a colon, after and the
// marker; any other is the marker as the service gave it, which never
// begins with a NUL byte.
func makeToken(after, marker string) string {
	if marker == "" || after == "" {
		return marker
	}
	return "\x00" + strconv.Itoa(len(after)) + ":" + after + marker
}

// parseToken returns the filter and the marker of a page token of
// makeToken, and false if the token is not of its form.
func parseToken(tok string) (after, marker string, ok bool) {
	rest, filtered := strings.CutPrefix(tok, "\x00")
	if !filtered {
		return "", tok, true
	}
	n, rest, _ := strings.Cut(rest, ":")
	l, err := strconv.Atoi(n)
	if err != nil || l <= 0 || l >= len(rest) {
		return "", "", false
	}
	return rest[:l], rest[l:], true
}

func etagOf(e *azcore.ETag) string {
	if e == nil {
		return ""
	}
	return strings.Trim(string(*e), `"`)
}

func quoteETag(etag string) *azcore.ETag {
	e := azcore.ETag(`"` + strings.Trim(etag, `"`) + `"`)
	return &e
}

// timeOf returns *t, or the zero time: a missing Date stays unknown, the
// local clock is not the store's.
func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func sizeOf(n *int64) int64 {
	if n == nil {
		return -1
	}
	return *n
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func optString(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}
