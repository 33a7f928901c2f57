package serve_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/serve"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/fs"
)

// fsDataset returns a dataset on a file-system store.
func fsDataset(t testing.TB) *commit.Dataset {
	t.Helper()
	root := t.TempDir()
	s, err := fs.New(root)
	require.NoError(t, err)
	return commit.New(s)
}

// commitFiles commits files as the dataset's next generation.
func commitFiles(t testing.TB, d *commit.Dataset, files map[string]string) {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	for p, body := range files {
		require.NoError(t, tx.PutBytes(ctx, p, []byte(body)))
	}
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
}

// startServer serves the datasets on loopback and returns its URL.
func startServer(t testing.TB, datasets map[string]*commit.Dataset, opts serve.Options) string {
	t.Helper()
	srv, err := serve.New(datasets, opts)
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		require.NoError(t, srv.Close(context.Background()))
	})
	return hs.URL
}

func s3Client(endpoint, access, secret string) *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(endpoint),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(access, secret, ""),
	})
}

func get(t *testing.T, url string, hdr map[string]string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestServeGetsRangesAndConditionalsOfEveryRef(t *testing.T) {
	d := fsDataset(t)
	commitFiles(t, d, map[string]string{"a.txt": "first", "dir/b.txt": "0123456789"})
	commitFiles(t, d, map[string]string{"a.txt": "second", "dir/b.txt": "abcdefghij"})
	ctx := context.Background()
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	_, err = snap.Tag(ctx, "stable", false)
	require.NoError(t, err)
	old, err := d.OpenRef(ctx, commit.SeqRef(1))
	require.NoError(t, err)
	url := startServer(t, map[string]*commit.Dataset{"daily": d}, serve.Options{})

	for ref, want := range map[string]string{
		"current": "second", "@2": "second", "@1": "first", "tag:stable": "second",
		"gen:" + old.Generation(): "first",
	} {
		resp, body, err := get(t, url+"/daily/"+ref+"/a.txt", nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, ref)
		require.Equal(t, want, string(body), ref)
		require.Equal(t, `"`+sha(want)+`"`, resp.Header.Get("ETag"), ref)
	}

	resp, body, err := get(t, url+"/daily/current/dir/b.txt", map[string]string{"Range": "bytes=2-4"})
	require.NoError(t, err)
	require.Equal(t, http.StatusPartialContent, resp.StatusCode)
	require.Equal(t, "cde", string(body))
	require.Equal(t, "bytes 2-4/10", resp.Header.Get("Content-Range"))

	etag := `"` + sha("abcdefghij") + `"`
	resp, _, err = get(t, url+"/daily/current/dir/b.txt", map[string]string{"If-None-Match": etag})
	require.NoError(t, err)
	require.Equal(t, http.StatusNotModified, resp.StatusCode)
	resp, _, err = get(t, url+"/daily/@1/dir/b.txt", map[string]string{"If-Match": etag})
	require.NoError(t, err)
	require.Equal(t, http.StatusPreconditionFailed, resp.StatusCode)
	resp, body, err = get(t, url+"/daily/current/dir/b.txt", map[string]string{"If-Match": etag})
	require.NoError(t, err)
	require.Equal(t, "abcdefghij", string(body))
	require.Equal(t, "2", resp.Header.Get("X-Amz-Meta-Commitptr-Seq"))

	for _, key := range []string{"current/nope", "@7/a.txt", "tag:none/a.txt", "2/a.txt", "a.txt"} {
		resp, body, err := get(t, url+"/daily/"+key, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, resp.StatusCode, key)
		require.Contains(t, string(body), "NoSuchKey", key)
	}
}

func TestServeRefusesEveryWrite(t *testing.T) {
	d := fsDataset(t)
	commitFiles(t, d, map[string]string{"a.txt": "x"})
	url := startServer(t, map[string]*commit.Dataset{"daily": d}, serve.Options{})
	for _, r := range []struct{ method, path string }{
		{http.MethodPut, "/daily/current/a.txt"}, {http.MethodDelete, "/daily/current/a.txt"},
		{http.MethodPut, "/newbucket"}, {http.MethodPost, "/daily?delete"}, {http.MethodPost, "/daily/current/b?uploads"},
	} {
		req, err := http.NewRequest(r.method, url+r.path, strings.NewReader("y"))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode, r)
		require.Contains(t, string(b), "<Code>AccessDenied</Code>", r)
	}
	_, body, err := get(t, url+"/daily/current/a.txt", nil)
	require.NoError(t, err)
	require.Equal(t, "x", string(body))
}

func TestServeNeverCompletesAResponseWithBytesThatDoNotMatchTheManifest(t *testing.T) {
	d := fsDataset(t)
	body := strings.Repeat("good data ", 100_000)
	commitFiles(t, d, map[string]string{"big.bin": body, "small.txt": "hello"})
	snap, err := d.Open(context.Background())
	require.NoError(t, err)
	for _, e := range snap.Files() {
		// Same size, other bytes: only the sha256 tells.
		good, err := snap.ReadFile(context.Background(), e.Path)
		require.NoError(t, err)
		_, err = d.Store().Put(context.Background(), e.Key, strings.NewReader(strings.ToUpper(string(good))), store.PutOptions{})
		require.NoError(t, err)
	}
	url := startServer(t, map[string]*commit.Dataset{"daily": d}, serve.Options{})
	for _, c := range []struct {
		key   string
		rng   string
		whole int
	}{{"big.bin", "", len(body)}, {"small.txt", "", 5}, {"big.bin", "bytes=0-99", 100}, {"small.txt", "bytes=1-2", 2}} {
		hdr := map[string]string{}
		if c.rng != "" {
			hdr["Range"] = c.rng
		}
		resp, got, err := get(t, url+"/daily/current/"+c.key, hdr)
		if err == nil {
			// The response may fail before its headers: never a 2xx with
			// every promised byte.
			require.False(t, resp.StatusCode/100 == 2 && len(got) == c.whole, "%s %s: a complete response of bytes that do not match", c.key, c.rng)
		} else {
			require.True(t, errors.Is(err, io.ErrUnexpectedEOF), "%s %s: %v", c.key, c.rng, err)
		}
	}
}

func TestServeWithAccessKeysAnswersOnlySignedRequests(t *testing.T) {
	d := fsDataset(t)
	commitFiles(t, d, map[string]string{"a.txt": "secret stuff"})
	url := startServer(t, map[string]*commit.Dataset{"daily": d}, serve.Options{AccessKeys: map[string]string{"reader": "s3cr3t-key"}})
	ctx := context.Background()

	out, err := s3Client(url, "reader", "s3cr3t-key").GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("daily"), Key: aws.String("current/a.txt")})
	require.NoError(t, err)
	b, err := io.ReadAll(out.Body)
	out.Body.Close()
	require.NoError(t, err)
	require.Equal(t, "secret stuff", string(b))

	_, err = s3Client(url, "reader", "wrong-key").GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("daily"), Key: aws.String("current/a.txt")})
	require.Error(t, err)
	resp, body, err := get(t, url+"/daily/current/a.txt", nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.NotContains(t, string(body), "secret stuff")
}

func TestServeListsPagesOfOneGenerationWhileCommitsLand(t *testing.T) {
	d := fsDataset(t)
	files := map[string]string{}
	for i := range 10 {
		files[fmt.Sprintf("f%02d", i)] = "v1"
	}
	commitFiles(t, d, files)
	url := startServer(t, map[string]*commit.Dataset{"daily": d}, serve.Options{Refresh: 1})
	c := s3Client(url, "any", "any")
	ctx := context.Background()

	page, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("daily"), Prefix: aws.String("current/"), MaxKeys: aws.Int32(3)})
	require.NoError(t, err)
	seen := map[string]string{}
	for _, o := range page.Contents {
		seen[*o.Key] = *o.ETag
	}
	// A commit lands: other files, other contents.
	next := map[string]string{"g00": "v2"}
	for p := range files {
		next[p] = "v2"
	}
	commitFiles(t, d, next)
	for page.NextContinuationToken != nil {
		page, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("daily"), Prefix: aws.String("current/"), MaxKeys: aws.Int32(3), ContinuationToken: page.NextContinuationToken})
		require.NoError(t, err)
		for _, o := range page.Contents {
			seen[*o.Key] = *o.ETag
		}
	}
	require.Len(t, seen, 10)
	for k, etag := range seen {
		require.Equal(t, `"`+sha("v1")+`"`, etag, k)
	}

	// A new listing sees the commit, and the root names its seq.
	fresh, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("daily"), Prefix: aws.String("current/")})
	require.NoError(t, err)
	require.Len(t, fresh.Contents, 11)
	root, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("daily"), Delimiter: aws.String("/")})
	require.NoError(t, err)
	var prefixes []string
	for _, p := range root.CommonPrefixes {
		prefixes = append(prefixes, *p.Prefix)
	}
	require.Equal(t, []string{"@2/", "current/"}, prefixes)
}

func TestServeListsCommonPrefixesAndPagesThroughThem(t *testing.T) {
	d := fsDataset(t)
	commitFiles(t, d, map[string]string{"a/1": "x", "a/2": "x", "b/c/3": "x", "b/4": "x", "top": "x", "z/5": "x"})
	url := startServer(t, map[string]*commit.Dataset{"daily": d}, serve.Options{})
	c := s3Client(url, "any", "any")
	ctx := context.Background()
	var keys, prefixes []string
	in := &s3.ListObjectsV2Input{Bucket: aws.String("daily"), Prefix: aws.String("@1/"), Delimiter: aws.String("/"), MaxKeys: aws.Int32(1)}
	for {
		page, err := c.ListObjectsV2(ctx, in)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Contents)+len(page.CommonPrefixes), 1)
		for _, o := range page.Contents {
			keys = append(keys, *o.Key)
		}
		for _, p := range page.CommonPrefixes {
			prefixes = append(prefixes, *p.Prefix)
		}
		if page.NextContinuationToken == nil {
			break
		}
		in.ContinuationToken = page.NextContinuationToken
	}
	require.Equal(t, []string{"@1/top"}, keys)
	require.Equal(t, []string{"@1/a/", "@1/b/", "@1/z/"}, prefixes)

	page, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("daily"), Prefix: aws.String("current/b/")})
	require.NoError(t, err)
	keys = nil
	for _, o := range page.Contents {
		keys = append(keys, *o.Key)
	}
	require.Equal(t, []string{"current/b/4", "current/b/c/3"}, keys)

	for prefix, want := range map[string][]string{
		"@1":   {"@1/a/1", "@1/a/2", "@1/b/4", "@1/b/c/3", "@1/top", "@1/z/5"},
		"":     {"current/a/1", "current/a/2", "current/b/4", "current/b/c/3", "current/top", "current/z/5"},
		"@1/b": {"@1/b/4", "@1/b/c/3"},
		"@9":   nil,
	} {
		page, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("daily"), Prefix: aws.String(prefix)})
		require.NoError(t, err)
		keys = nil
		for _, o := range page.Contents {
			keys = append(keys, *o.Key)
		}
		require.Equal(t, want, keys, "prefix %q", prefix)
	}

	buckets, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	require.NoError(t, err)
	require.Len(t, buckets.Buckets, 1)
	require.Equal(t, "daily", *buckets.Buckets[0].Name)
	_, err = c.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String("daily")})
	require.NoError(t, err)
}

func TestServePinsTheGenerationsItServes(t *testing.T) {
	d := fsDataset(t)
	commitFiles(t, d, map[string]string{"a": "x"})
	srv, err := serve.New(map[string]*commit.Dataset{"daily": d}, serve.Options{})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	_, body, err := get(t, hs.URL+"/daily/current/a", nil)
	require.NoError(t, err)
	require.Equal(t, "x", string(body))
	pins := func() []string {
		page, err := d.Store().List(context.Background(), store.ListRequest{Prefix: commit.PinDir})
		require.NoError(t, err)
		var keys []string
		for _, o := range page.Objects {
			keys = append(keys, o.Key)
		}
		return keys
	}
	held := pins()
	require.Len(t, held, 1)
	snap, err := d.Open(context.Background())
	require.NoError(t, err)
	gen, _, err := commit.ParsePinKey(held[0])
	require.NoError(t, err)
	require.Equal(t, snap.Generation(), gen)
	require.NoError(t, srv.Close(context.Background()))
	require.Empty(t, pins(), "Close releases the pins")
}

func TestServeKeepsTheGenerationsItServesFromGc(t *testing.T) {
	d := fsDataset(t)
	big := strings.Repeat("generation one ", 200_000)
	commitFiles(t, d, map[string]string{"big": big})
	url := startServer(t, map[string]*commit.Dataset{"daily": d}, serve.Options{})
	ctx := context.Background()

	// A long read of @1 is under way: its response has begun.
	resp, err := http.Get(url + "/daily/@1/big")
	require.NoError(t, err)
	defer resp.Body.Close()
	head := make([]byte, 10)
	_, err = io.ReadFull(resp.Body, head)
	require.NoError(t, err)

	for i := 2; i <= 4; i++ {
		commitFiles(t, d, map[string]string{"big": fmt.Sprintf("generation %d", i)})
	}
	seq2, err := d.OpenRef(ctx, commit.SeqRef(2))
	require.NoError(t, err)
	rep, err := gc.Run(ctx, d.Store(), gc.Options{Keep: -1, Grace: -1})
	require.NoError(t, err)
	var deleted []string
	for _, g := range rep.Deleted {
		deleted = append(deleted, g.Generation)
	}
	require.Contains(t, deleted, seq2.Generation(), "gc collects what nobody reads")

	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, sha(big), sha(string(head)+string(rest)), "the read under way completes")
	_, body, err := get(t, url+"/daily/@1/big", nil)
	require.NoError(t, err)
	require.Equal(t, sha(big), sha(string(body)), "the pinned generation is still whole after gc")
}

func TestServeAnswersOtherReadsWithNotImplemented(t *testing.T) {
	d := fsDataset(t)
	commitFiles(t, d, map[string]string{"a.txt": "x"})
	url := startServer(t, map[string]*commit.Dataset{"daily": d}, serve.Options{})
	for _, q := range []string{"/daily?versioning", "/daily?acl", "/daily?policy", "/daily?uploads", "/daily?versions",
		"/daily/current/a.txt?acl", "/daily/current/a.txt?tagging", "/daily/current/a.txt?versionId=x", "/daily/current/a.txt?attributes"} {
		resp, body, err := get(t, url+q, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusNotImplemented, resp.StatusCode, q)
		require.Contains(t, string(body), "<Code>NotImplemented</Code>", q)
	}
	resp, body, err := get(t, url+"/daily/current/a.txt?x-id=GetObject&response-content-type=text/plain", nil)
	require.NoError(t, err)
	require.Equal(t, "x", string(body))
	require.Equal(t, "text/plain", resp.Header.Get("Content-Type"))
}

func TestServeReadsThePointerAtMostEveryRefreshAndEachManifestOnce(t *testing.T) {
	s, err := fs.New(t.TempDir())
	require.NoError(t, err)
	commitFiles(t, commit.New(s), map[string]string{"a": "1", "b": "2"})
	counted := store.Count(s)
	d := commit.New(counted)
	url := startServer(t, map[string]*commit.Dataset{"daily": d}, serve.Options{Refresh: time.Hour, PinTTL: -1})
	c := s3Client(url, "any", "any")
	ctx := context.Background()
	for range 5 {
		for _, key := range []string{"current/a", "current/b", "@1/a"} {
			_, body, err := get(t, url+"/daily/"+key, nil)
			require.NoError(t, err)
			require.NotEmpty(t, body)
		}
		_, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("daily"), Prefix: aws.String("current/")})
		require.NoError(t, err)
	}
	// One pointer GET and one manifest GET when current was first
	// resolved, then only the 15 file GETs: @1 is the cached generation.
	got := counted.Counts()
	require.EqualValues(t, 2+15, got[store.OpGet], "GETs: %v", got)
	require.EqualValues(t, 0, got[store.OpList], "a listing reads no store")
}

// readSizes is a store whose object bodies record the largest read asked
// of them, and how many reads.
type readSizes struct {
	store.Store
	largest, reads atomic.Int64
}

func (s *readSizes) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	rc, attrs, err := s.Store.Get(ctx, key)
	if err != nil {
		return nil, attrs, err
	}
	return &sizedBody{ReadCloser: rc, s: s}, attrs, nil
}

type sizedBody struct {
	io.ReadCloser
	s *readSizes
}

func (b *sizedBody) Read(p []byte) (int, error) {
	b.s.reads.Add(1)
	for {
		old := b.s.largest.Load()
		if int64(len(p)) <= old || b.s.largest.CompareAndSwap(old, int64(len(p))) {
			break
		}
	}
	return b.ReadCloser.Read(p)
}

func TestServeReadsAFileFromTheStoreInLargePieces(t *testing.T) {
	s, err := fs.New(t.TempDir())
	require.NoError(t, err)
	body := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	commitFiles(t, commit.New(s), map[string]string{"big": body})
	sized := &readSizes{Store: s}
	url := startServer(t, map[string]*commit.Dataset{"daily": commit.New(sized)}, serve.Options{PinTTL: -1})
	for _, c := range []struct {
		rng       string
		from, end int
	}{{"", 0, len(body)}, {"bytes=1000-", 1000, len(body)}, {"bytes=600000-600099", 600000, 600100}} {
		sized.largest.Store(0)
		sized.reads.Store(0)
		hdr := map[string]string{}
		if c.rng != "" {
			hdr["Range"] = c.rng
		}
		_, got, err := get(t, url+"/daily/current/big", hdr)
		require.NoError(t, err)
		require.Equal(t, body[c.from:c.end], string(got), c.rng)
		// Reads of 32 KiB (io.Copy's) or 8 KiB (io.Discard's) cost a
		// system call each on both sides of serve.
		require.GreaterOrEqual(t, sized.largest.Load(), int64(256<<10), "the largest read of the file, range %q", c.rng)
		require.LessOrEqual(t, sized.reads.Load(), int64(12), "reads of the file, range %q", c.rng)
	}
}

func TestServeAnswersAFailedConditionWithoutReadingTheStore(t *testing.T) {
	s, err := fs.New(t.TempDir())
	require.NoError(t, err)
	commitFiles(t, commit.New(s), map[string]string{"a": "contents of a"})
	counted := store.Count(s)
	url := startServer(t, map[string]*commit.Dataset{"daily": commit.New(counted)}, serve.Options{Refresh: time.Hour, PinTTL: -1})
	_, body, err := get(t, url+"/daily/current/a", nil)
	require.NoError(t, err)
	require.Equal(t, "contents of a", string(body))
	etag := `"` + sha("contents of a") + `"`
	past, future := "Mon, 02 Jan 2006 15:04:05 GMT", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	for _, c := range []struct {
		hdr    map[string]string
		status int
		gets   int64
	}{
		{map[string]string{"If-None-Match": etag}, http.StatusNotModified, 0},
		{map[string]string{"If-None-Match": `"other", W/` + etag}, http.StatusNotModified, 0},
		{map[string]string{"If-None-Match": "*", "Range": "bytes=0-3"}, http.StatusNotModified, 0},
		{map[string]string{"If-Modified-Since": future}, http.StatusNotModified, 0},
		{map[string]string{"If-Match": `"other"`}, http.StatusPreconditionFailed, 0},
		{map[string]string{"If-Unmodified-Since": past}, http.StatusPreconditionFailed, 0},
		{map[string]string{"If-Match": etag}, http.StatusOK, 1},
		{map[string]string{"If-None-Match": `"other"`}, http.StatusOK, 1},
		{map[string]string{"If-Modified-Since": past, "Range": "bytes=9-"}, http.StatusPartialContent, 1},
		{map[string]string{"If-Match": etag, "If-Unmodified-Since": past}, http.StatusOK, 1}, // If-Match wins
	} {
		before := counted.Counts()[store.OpGet]
		resp, body, err := get(t, url+"/daily/current/a", c.hdr)
		require.NoError(t, err)
		require.Equal(t, c.status, resp.StatusCode, "%v", c.hdr)
		if c.status/100 == 2 {
			require.Contains(t, "contents of a", string(body), "%v", c.hdr)
			require.NotEmpty(t, body)
		}
		require.Equal(t, c.gets, counted.Counts()[store.OpGet]-before, "store GETs of %v", c.hdr)
	}
}

func TestServeAnswersAFileGoneFromTheStoreWithAnErrorNotAShortBody(t *testing.T) {
	d := fsDataset(t)
	commitFiles(t, d, map[string]string{"a": "contents of a"})
	snap, err := d.Open(context.Background())
	require.NoError(t, err)
	url := startServer(t, map[string]*commit.Dataset{"daily": d}, serve.Options{PinTTL: -1})
	require.NoError(t, d.Store().Delete(context.Background(), snap.Files()[0].Key, store.DeleteOptions{}))
	for _, hdr := range []map[string]string{nil, {"If-None-Match": `"other"`}, {"Range": "bytes=2-"}} {
		resp, body, err := get(t, url+"/daily/current/a", hdr)
		require.NoError(t, err)
		require.GreaterOrEqual(t, resp.StatusCode, 400, "%v: %s", hdr, body)
	}
}

func TestServeReadsATagAgainWithOneGetWhenItsGenerationIsCached(t *testing.T) {
	s, err := fs.New(t.TempDir())
	require.NoError(t, err)
	writer := commit.New(s)
	ctx := context.Background()
	commitFiles(t, writer, map[string]string{"a": "one"})
	tagCurrent := func() {
		snap, err := writer.Open(ctx)
		require.NoError(t, err)
		_, err = snap.Tag(ctx, "stable", true)
		require.NoError(t, err)
	}
	tagCurrent()
	counted := store.Count(s)
	// Refresh 1 ns: the tag is read again for every request.
	url := startServer(t, map[string]*commit.Dataset{"daily": commit.New(counted)}, serve.Options{Refresh: 1, PinTTL: -1})
	_, body, err := get(t, url+"/daily/tag:stable/a", nil)
	require.NoError(t, err)
	require.Equal(t, "one", string(body))
	before := counted.Counts()
	for range 5 {
		_, body, err := get(t, url+"/daily/tag:stable/a", nil)
		require.NoError(t, err)
		require.Equal(t, "one", string(body))
	}
	got := counted.Counts().Sub(before)
	require.EqualValues(t, 5+5, got.Total(), "a GET of the tag and of the file per request: %v", got)

	commitFiles(t, writer, map[string]string{"a": "two"})
	tagCurrent()
	_, body, err = get(t, url+"/daily/tag:stable/a", nil)
	require.NoError(t, err)
	require.Equal(t, "two", string(body), "a moved tag is followed")
}

func TestServeReadsARangeOfAFileWithPartsFromThePartsItTouchesOnly(t *testing.T) {
	s, err := fs.New(t.TempDir())
	require.NoError(t, err)
	const part = 64 << 10
	body := make([]byte, 16*part)
	for i := range body {
		body[i] = byte(i * 7 / 5)
	}
	d := commit.New(s, commit.WithPartSize(part))
	commitFiles(t, d, map[string]string{"big": string(body)})
	snap, err := d.Open(context.Background())
	require.NoError(t, err)
	e := snap.Files()[0]
	require.Equal(t, 16, e.NumParts())
	logged := &testenv.Gets{Store: s}
	url := startServer(t, map[string]*commit.Dataset{"daily": commit.New(logged)}, serve.Options{PinTTL: -1})

	for _, c := range []struct {
		rng       string
		from, end int
		parts     [2]int64
	}{
		{"bytes=600000-600099", 600000, 600100, [2]int64{9 * part, part}},
		{"bytes=65000-140000", 65000, 140001, [2]int64{0, 3 * part}},
		{"bytes=-10", len(body) - 10, len(body), [2]int64{15 * part, part}},
		{"bytes=1-9223372036854775807", 1, len(body), [2]int64{0, 16 * part}}, // the last byte past the end: the end
	} {
		resp, got, err := get(t, url+"/daily/current/big", map[string]string{"Range": c.rng})
		require.NoError(t, err)
		require.Equal(t, http.StatusPartialContent, resp.StatusCode, c.rng)
		require.Equal(t, body[c.from:c.end], got, c.rng)
		require.Equal(t, [][2]int64{c.parts}, logged.Ranges(), c.rng)
	}

	// Part 9 damaged: a range over it never completes; one beside it does.
	bad := bytes.Clone(body)
	bad[9*part+5] ^= 0xff
	_, err = s.Put(context.Background(), e.Key, bytes.NewReader(bad), store.PutOptions{})
	require.NoError(t, err)
	resp, got, err := get(t, url+"/daily/current/big", map[string]string{"Range": "bytes=500000-700000"})
	if err == nil {
		require.False(t, resp.StatusCode/100 == 2 && len(got) == 200001, "a complete response with a damaged part")
	} else {
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	}
	resp, got, err = get(t, url+"/daily/current/big", map[string]string{"Range": "bytes=0-9999"})
	require.NoError(t, err)
	require.Equal(t, http.StatusPartialContent, resp.StatusCode)
	require.Equal(t, body[:10000], got)
}
