// Package serve is a read-only S3 endpoint over the snapshots of datasets,
// for readers that do not link this module: the aws CLI, rclone, boto3,
// DuckDB, Spark.
//
// Each dataset is a bucket. Its keys are REF/PATH, where REF names a
// snapshot as commit.ParseRef reads it ("current", "@SEQ", "tag:NAME",
// "gen:ID") and PATH is a file of that snapshot. GetObject (with ranges and
// conditional headers), HeadObject, ListObjects (V1 and V2), ListBuckets and
// GetBucketLocation are answered; any request that would write is refused
// with AccessDenied, and other operations with NotImplemented.
//
// Every byte served is verified against the manifest while it streams, as
// commit.Snapshot.Open verifies: a file whose stored bytes do not match
// ends its response early (the client sees a short body and fails), and
// never completes with wrong data. A range of a file with part checksums
// reads only the parts it touches, in one ranged GET, and delivers each
// part once it matched (commit.Snapshot.OpenRange); a range of any other
// file is read from the file's start and its last bytes are delivered only
// once the whole file matched. The ETag of a file is its sha256 in hex.
//
// A listing of a ref resolves the ref once. Its continuation token carries
// the generation, so the pages of one listing of "current/" all come from
// one generation even if a commit lands while a client pages through it.
// ListObjects V1 without a delimiter gives clients no marker to return
// (S3 sends NextMarker only with a delimiter): they continue from their
// last key, and those pages of "current/" may come from two generations.
// The bucket's root lists "current/" and "@SEQ/" of the current
// generation: a reader that lists the root and then reads under "@SEQ/"
// reads one snapshot across any number of requests. Objects of "current/"
// also carry the seq and generation in the x-amz-meta-commitptr-seq and
// x-amz-meta-commitptr-generation headers.
package serve

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rclone/gofakes3"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
)

// Options configure a Server.
type Options struct {
	// Refresh is how long a read of the pointer, or of a tag, is trusted,
	// from when it began; the default is one second. While requests come,
	// the pointer is read again shortly before that, in the background.
	Refresh time.Duration
	// AccessKeys maps access key ids to secret keys. When it is not
	// empty, every request must be signed with one of them (SigV4).
	AccessKeys map[string]string
	// PinTTL is the TTL of the pins that hold the generations being
	// served; they are renewed every third of it while the generation is
	// in use. The default is five minutes; a negative value pins nothing.
	PinTTL time.Duration
	// Owner names the server in its pins.
	Owner string
	// Logger receives warnings; the default discards.
	Logger *slog.Logger
}

// Server answers S3 requests for the snapshots of its datasets.
type Server struct {
	buckets map[string]*snapshots
	names   []string
	started time.Time
	handler http.Handler
	opts    Options

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// ValidBucketName checks that name can be a bucket name every S3 client
// accepts: 3 to 63 lower-case letters, digits, dots and hyphens, beginning
// and ending with a letter or digit.
func ValidBucketName(name string) error {
	if !bucketName.MatchString(name) || strings.Contains(name, "..") {
		return fmt.Errorf("serve: %q is not a valid bucket name (3 to 63 characters: a-z, 0-9, '.' and '-', beginning and ending with a letter or digit)", name)
	}
	return nil
}

// New returns a Server of the datasets, keyed by bucket name. Close it to
// release its pins.
func New(datasets map[string]*commit.Dataset, opts Options) (*Server, error) {
	if opts.Refresh <= 0 {
		opts.Refresh = time.Second
	}
	if opts.PinTTL == 0 {
		opts.PinTTL = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Owner == "" {
		opts.Owner = "publish serve"
	}
	s := &Server{buckets: map[string]*snapshots{}, started: time.Now().UTC(), opts: opts, stop: make(chan struct{}), done: make(chan struct{})}
	for name, d := range datasets {
		if err := ValidBucketName(name); err != nil {
			return nil, err
		}
		s.buckets[name] = newSnapshots(d, &opts)
		s.names = append(s.names, name)
	}
	sort.Strings(s.names)
	var fo []gofakes3.Option
	if len(opts.AccessKeys) > 0 {
		fo = append(fo, gofakes3.WithV4Auth(opts.AccessKeys))
	}
	fo = append(fo, gofakes3.WithoutVersioning(), gofakes3.WithUnimplementedPageError())
	s.handler = readOnly(gofakes3.New(&backend{s: s}, fo...).Server())
	go s.maintain()
	return s, nil
}

// Handler returns the HTTP handler of the S3 API.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops renewing pins and deletes them.
func (s *Server) Close(ctx context.Context) error {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
	var errs []error
	for _, b := range s.buckets {
		errs = append(errs, b.releaseAll(ctx))
	}
	return errors.Join(errs...)
}

func (s *Server) maintain() {
	defer close(s.done)
	if s.opts.PinTTL < 0 {
		return
	}
	t := time.NewTicker(s.opts.PinTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			for _, b := range s.buckets {
				ctx, cancel := context.WithTimeout(context.Background(), s.opts.PinTTL/3)
				b.maintain(ctx)
				cancel()
			}
		}
	}
}

// readOnly refuses every request that is neither a GET nor a HEAD with the
// S3 error AccessDenied, and a GET or HEAD of anything but an object, a
// listing, the bucket list or a bucket's location with NotImplemented.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			s3Error(w, r, http.StatusForbidden, "AccessDenied", "publish serve is read-only: "+r.Method+" is refused")
			return
		}
		for q := range r.URL.Query() {
			if !readQuery[q] && !strings.HasPrefix(q, "response-") {
				s3Error(w, r, http.StatusNotImplemented, "NotImplemented", "publish serve does not implement the "+q+" operation")
				return
			}
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestHeader{}, r.Header)))
	})
}

// requestHeader is the context key of a request's headers, where GetObject
// finds its conditions.
type requestHeader struct{}

// readQuery are the query parameters of the operations served: GetObject,
// HeadObject, ListObjects (V1 and V2), ListBuckets and GetBucketLocation.
// "x-id" names the operation; SDKs add it.
var readQuery = map[string]bool{
	"list-type": true, "prefix": true, "delimiter": true, "max-keys": true, "continuation-token": true,
	"start-after": true, "encoding-type": true, "fetch-owner": true, "marker": true,
	"max-buckets": true, "bucket-region": true, "location": true, "x-id": true,
}

func s3Error(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource></Error>`,
		code, xmlEscape(msg), xmlEscape(r.URL.Path))
}

func xmlEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// backend is the gofakes3 backend over the Server's datasets.
type backend struct {
	s *Server
}

var errReadOnly = gofakes3.ErrorMessage(gofakes3.ErrNotImplemented, "publish serve is read-only")

func (b *backend) bucket(name string) (*snapshots, error) {
	sn, ok := b.s.buckets[name]
	if !ok {
		return nil, gofakes3.BucketNotFound(name)
	}
	return sn, nil
}

func (b *backend) ListBuckets(context.Context) ([]gofakes3.BucketInfo, error) {
	out := make([]gofakes3.BucketInfo, 0, len(b.s.names))
	for _, n := range b.s.names {
		out = append(out, gofakes3.BucketInfo{Name: n, CreationDate: gofakes3.NewContentTime(b.s.started)})
	}
	return out, nil
}

func (b *backend) BucketExists(_ context.Context, name string) (bool, error) {
	_, ok := b.s.buckets[name]
	return ok, nil
}

// splitKey cuts a key into its ref and path.
func splitKey(key string) (commit.Ref, string, error) {
	refText, path, ok := strings.Cut(key, "/")
	if !ok {
		return commit.Ref{}, "", gofakes3.KeyNotFound(key)
	}
	ref, err := parseKeyRef(refText)
	if err != nil {
		return commit.Ref{}, "", gofakes3.KeyNotFound(key)
	}
	return ref, path, nil
}

// parseKeyRef reads the ref of a key: only the forms "current", "@SEQ",
// "tag:NAME" and "gen:ID", not the bare ones the command line takes.
func parseKeyRef(s string) (commit.Ref, error) {
	ref, err := commit.ParseRef(s)
	if err != nil {
		return ref, err
	}
	if ref.String() != s {
		return ref, fmt.Errorf("serve: %q is not a ref of a key (current, @SEQ, tag:NAME or gen:ID)", s)
	}
	return ref, nil
}

// resolveErr turns an error resolving a ref into the S3 error a client
// expects: a ref that names nothing is a missing key.
func resolveErr(key string, err error) error {
	if errors.Is(err, commit.ErrNotFound) || errors.Is(err, commit.ErrNoCommits) || errors.Is(err, commit.ErrCollected) {
		return gofakes3.KeyNotFound(key)
	}
	return err
}

// object resolves key to its snapshot and entry.
func (b *backend) object(ctx context.Context, bucket, key string) (*commit.Snapshot, commit.Ref, generation.Entry, error) {
	sn, err := b.bucket(bucket)
	if err != nil {
		return nil, commit.Ref{}, generation.Entry{}, err
	}
	ref, path, err := splitKey(key)
	if err != nil {
		return nil, ref, generation.Entry{}, err
	}
	snap, err := sn.resolve(ctx, ref)
	if err != nil {
		return nil, ref, generation.Entry{}, resolveErr(key, err)
	}
	e, ok := snap.Manifest.Find(path)
	if !ok {
		return nil, ref, generation.Entry{}, gofakes3.KeyNotFound(key)
	}
	return snap, ref, e, nil
}

// lastModified is the time a listing and the headers give a file: its
// recorded modification time, or the time its generation was staged.
func lastModified(snap *commit.Snapshot, e generation.Entry) time.Time {
	if !e.MTime.IsZero() {
		return e.MTime.UTC()
	}
	return snap.Manifest.StagingStart.UTC()
}

func describeObject(snap *commit.Snapshot, key string, e generation.Entry) (*gofakes3.Object, error) {
	sum, err := hex.DecodeString(e.SHA256)
	if err != nil {
		return nil, fmt.Errorf("serve: %q: manifest sha256 %q: %w", key, e.SHA256, err)
	}
	meta := map[string]string{
		"Last-Modified":                   lastModified(snap, e).Format(http.TimeFormat),
		"Content-Type":                    "application/octet-stream",
		"X-Amz-Meta-Commitptr-Seq":        strconv.FormatUint(snap.Seq(), 10),
		"X-Amz-Meta-Commitptr-Generation": snap.Generation(),
	}
	if !e.MTime.IsZero() {
		// rclone reads a file's modification time from this header.
		meta["X-Amz-Meta-Mtime"] = strconv.FormatFloat(float64(e.MTime.UnixNano())/1e9, 'f', -1, 64)
	}
	return &gofakes3.Object{Name: key, Metadata: meta, Size: e.Size, Hash: sum}, nil
}

func (b *backend) HeadObject(ctx context.Context, bucket, key string) (*gofakes3.Object, error) {
	snap, _, e, err := b.object(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	obj, err := describeObject(snap, key, e)
	if err != nil {
		return nil, err
	}
	obj.Contents = io.NopCloser(strings.NewReader(""))
	return obj, nil
}

func (b *backend) GetObject(ctx context.Context, bucket, key string, rangeRequest *gofakes3.ObjectRangeRequest) (obj *gofakes3.Object, err error) {
	snap, _, e, err := b.object(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	sn, err := b.bucket(bucket)
	if err != nil {
		return nil, err
	}
	done := sn.reading(ctx, snap)
	defer func() {
		if err != nil {
			done()
		}
	}()
	obj, err = describeObject(snap, key, e)
	if err != nil {
		return nil, err
	}
	rng, err := rangeRequest.Range(e.Size)
	if err != nil {
		return nil, err
	}
	if rng != nil && rng.Length > e.Size-rng.Start {
		// A last byte past the end means the end; the front end's sum of
		// the two can overflow.
		rng.Length = e.Size - rng.Start
	}
	open := func() (io.ReadCloser, error) { return snap.OpenEntry(ctx, e) }
	if rng != nil {
		open = func() (io.ReadCloser, error) { return snap.OpenRange(ctx, e, rng.Start, rng.Length) }
	}
	var rc io.ReadCloser
	if h, _ := ctx.Value(requestHeader{}).(http.Header); h != nil && conditionsFail(h, e.SHA256, lastModified(snap, e)) {
		// The front end answers 304 or 412 without reading the body, so
		// the file is opened only if it is read after all.
		rc = &lazyFile{open: open}
	} else if rc, err = open(); err != nil {
		// Opened before the response begins, so that a file that cannot
		// be read is answered with an error rather than a short body.
		if errors.Is(err, commit.ErrCollected) {
			return nil, gofakes3.KeyNotFound(key)
		}
		return nil, err
	}
	obj.Range = rng
	obj.Contents = bigCopy{rc, done}
	return obj, nil
}

// conditionsFail tells whether the conditions of a GET fail for a file of
// ETag sum last modified at modified, as S3 has them: If-Match, or without
// it If-Unmodified-Since, fails with 412; If-None-Match, or without it
// If-Modified-Since, with 304. Times count in whole seconds.
func conditionsFail(h http.Header, sum string, modified time.Time) bool {
	modified = modified.Truncate(time.Second)
	if v := h.Get("If-Match"); v != "" {
		if !etagListed(v, sum) {
			return true
		}
	} else if t, err := http.ParseTime(h.Get("If-Unmodified-Since")); err == nil && modified.After(t) {
		return true
	}
	if v := h.Get("If-None-Match"); v != "" {
		return etagListed(v, sum)
	}
	t, err := http.ParseTime(h.Get("If-Modified-Since"))
	return err == nil && !modified.After(t)
}

// etagListed tells whether a list of entity tags, or "*", names sum; a
// weak tag counts as the strong one.
func etagListed(list, sum string) bool {
	for tag := range strings.SplitSeq(list, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == "*" || strings.Trim(tag, `"`) == sum {
			return true
		}
	}
	return false
}

// lazyFile opens its file at its first read.
type lazyFile struct {
	open func() (io.ReadCloser, error)
	rc   io.ReadCloser
	err  error
}

func (f *lazyFile) Read(p []byte) (int, error) {
	if f.rc == nil && f.err == nil {
		f.rc, f.err = f.open()
	}
	if f.err != nil {
		return 0, f.err
	}
	return f.rc.Read(p)
}

func (f *lazyFile) Close() error {
	if f.rc == nil {
		return nil
	}
	return f.rc.Close()
}

// copyBuffer is the size of the reads of a file from the store and of its
// writes to the client: large ones mean fewer system calls than io.Copy's
// 32 KiB.
const copyBuffer = 256 << 10

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBuffer); return &b }}

// bigCopy copies its reader to the response in large reads and writes.
type bigCopy struct {
	io.ReadCloser
	done func() // called once the body is closed
}

func (c bigCopy) Close() error {
	err := c.ReadCloser.Close()
	c.done()
	return err
}

func (c bigCopy) WriteTo(w io.Writer) (int64, error) {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	// Neither side's ReadFrom or WriteTo may take over: the response's
	// ReadFrom copies in 32 KiB pieces.
	return io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{c.ReadCloser}, *buf)
}

// A continuation token (the NextMarker the front end hides in it) names the
// generation a listing began on and the last key it returned.
const tokenPrefix = "!cpt1!"

func makeToken(gen, lastKey string) string {
	return tokenPrefix + gen + "!" + base64.RawURLEncoding.EncodeToString([]byte(lastKey))
}

func parseToken(marker string) (gen, lastKey string, ok bool) {
	rest, ok := strings.CutPrefix(marker, tokenPrefix)
	if !ok {
		return "", "", false
	}
	gen, enc, ok := strings.Cut(rest, "!")
	if !ok || generation.Valid(gen) != nil {
		return "", "", false
	}
	k, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", "", false
	}
	return gen, string(k), true
}

func (b *backend) ListBucket(ctx context.Context, bucket string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	sn, err := b.bucket(bucket)
	if err != nil {
		return nil, err
	}
	if prefix == nil {
		prefix = &gofakes3.Prefix{}
	}
	maxKeys := page.MaxKeys
	if maxKeys <= 0 {
		maxKeys = gofakes3.DefaultMaxBucketKeys
	}
	marker, tokenGen := page.Marker, ""
	if page.HasMarker {
		if gen, last, ok := parseToken(page.Marker); ok {
			tokenGen, marker = gen, last
		} else if strings.HasPrefix(page.Marker, tokenPrefix) {
			return nil, gofakes3.ErrorMessage(gofakes3.ErrInvalidToken, "the continuation token is not one this server gave")
		}
	}

	refText, _, hasRef := strings.Cut(prefix.Prefix, "/")
	if !hasRef {
		return b.listRoot(ctx, sn, prefix, marker, tokenGen, maxKeys)
	}
	ref, err := parseKeyRef(refText)
	if err != nil {
		return gofakes3.NewObjectList(), nil
	}
	snap, err := b.listSnapshot(ctx, sn, ref, tokenGen)
	if err != nil {
		if errors.Is(err, commit.ErrNotFound) || errors.Is(err, commit.ErrNoCommits) {
			return gofakes3.NewObjectList(), nil
		}
		return nil, err
	}
	return listEntries(snap, refText+"/", prefix, marker, maxKeys), nil
}

// listSnapshot returns the snapshot a page of a listing comes from: the
// generation its continuation token names, or ref resolved now.
func (b *backend) listSnapshot(ctx context.Context, sn *snapshots, ref commit.Ref, tokenGen string) (*commit.Snapshot, error) {
	if tokenGen == "" {
		return sn.resolve(ctx, ref)
	}
	snap, err := sn.generation(ctx, tokenGen)
	if err != nil {
		return nil, gofakes3.ErrorMessagef(gofakes3.ErrInvalidToken, "the listing's generation %s cannot be read any more: %v", tokenGen, err)
	}
	return snap, nil
}

// listRoot lists the bucket's root. With a delimiter it holds the refs
// "current/" and "@SEQ/" of the current generation; without one, the keys
// under the ref the prefix names ("@7" lists "@7/..."), or under
// "current/".
func (b *backend) listRoot(ctx context.Context, sn *snapshots, prefix *gofakes3.Prefix, marker, tokenGen string, maxKeys int64) (*gofakes3.ObjectList, error) {
	if prefix.Delimiter == "" {
		ref, err := parseKeyRef(prefix.Prefix)
		if err != nil || prefix.Prefix == "" {
			ref = commit.Current
		}
		snap, err := b.listSnapshot(ctx, sn, ref, tokenGen)
		if errors.Is(err, commit.ErrNoCommits) || errors.Is(err, commit.ErrNotFound) {
			return gofakes3.NewObjectList(), nil
		}
		if err != nil {
			return nil, err
		}
		return listEntries(snap, ref.String()+"/", prefix, marker, maxKeys), nil
	}
	out := gofakes3.NewObjectList()
	snap, err := sn.current(ctx)
	if errors.Is(err, commit.ErrNoCommits) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, ref := range []string{commit.SeqRef(snap.Seq()).String(), "current"} { // sorted
		p := ref + "/"
		if pre, _, cut := strings.Cut(p[len(prefix.Prefix):], prefix.Delimiter); strings.HasPrefix(p, prefix.Prefix) && cut && p > marker {
			out.AddPrefix(prefix.Prefix + pre + prefix.Delimiter)
		}
	}
	return out, nil
}

// listEntries lists the files of snap under the key prefix refPrefix
// ("REF/"), in key order, from after marker, at most maxKeys keys and
// common prefixes.
func listEntries(snap *commit.Snapshot, refPrefix string, prefix *gofakes3.Prefix, marker string, maxKeys int64) *gofakes3.ObjectList {
	out := gofakes3.NewObjectList()
	if !strings.HasPrefix(prefix.Prefix, refPrefix) && !strings.HasPrefix(refPrefix, prefix.Prefix) {
		return out
	}
	pathPrefix := strings.TrimPrefix(prefix.Prefix, refPrefix)
	if len(prefix.Prefix) < len(refPrefix) {
		pathPrefix = ""
	}
	entries := snap.Manifest.Entries
	start := pathPrefix
	if after, ok := strings.CutPrefix(marker, refPrefix); ok && after > start {
		start = after
	} else if !ok && marker > refPrefix {
		return out // the marker is past every key of this ref
	}
	i, _ := slices.BinarySearchFunc(entries, start, func(e generation.Entry, p string) int { return strings.Compare(e.Path, p) })
	var n int64
	var last string
	for i < len(entries) {
		e := entries[i]
		if !strings.HasPrefix(e.Path, pathPrefix) {
			break
		}
		if prefix.Delimiter != "" {
			if before, _, ok := strings.Cut(e.Path[len(pathPrefix):], prefix.Delimiter); ok {
				cp := pathPrefix + before + prefix.Delimiter
				if refPrefix+cp > marker {
					if n == maxKeys {
						out.IsTruncated = true
						out.NextMarker = makeToken(snap.Generation(), last)
						return out
					}
					out.AddPrefix(refPrefix + cp)
					n++
					last = refPrefix + cp
				}
				// Skip every file under the common prefix.
				i += sort.Search(len(entries)-i, func(j int) bool { return !strings.HasPrefix(entries[i+j].Path, cp) })
				continue
			}
		}
		if refPrefix+e.Path <= marker {
			i++
			continue
		}
		if n == maxKeys {
			out.IsTruncated = true
			out.NextMarker = makeToken(snap.Generation(), last)
			return out
		}
		sum := e.SHA256
		out.Add(&gofakes3.Content{
			Key:          refPrefix + e.Path,
			LastModified: gofakes3.NewContentTime(lastModified(snap, e)),
			ETag:         `"` + sum + `"`,
			Size:         e.Size,
			StorageClass: "STANDARD",
		})
		n++
		last = refPrefix + e.Path
		i++
	}
	return out
}

// The operations that write are refused; the front end refuses their
// requests before they reach these.

func (b *backend) CreateBucket(context.Context, string) error { return errReadOnly }
func (b *backend) DeleteBucket(context.Context, string) error { return errReadOnly }
func (b *backend) DeleteObject(context.Context, string, string) (gofakes3.ObjectDeleteResult, error) {
	return gofakes3.ObjectDeleteResult{}, errReadOnly
}
func (b *backend) PutObject(context.Context, string, string, map[string]string, io.Reader, int64) (gofakes3.PutObjectResult, error) {
	return gofakes3.PutObjectResult{}, errReadOnly
}
func (b *backend) DeleteMulti(context.Context, string, ...string) (gofakes3.MultiDeleteResult, error) {
	return gofakes3.MultiDeleteResult{}, errReadOnly
}
func (b *backend) CopyObject(context.Context, string, string, string, string, map[string]string) (gofakes3.CopyObjectResult, error) {
	return gofakes3.CopyObjectResult{}, errReadOnly
}
