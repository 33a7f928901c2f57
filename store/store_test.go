package store_test

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// ignoring drops the preconditions of every write, as some S3-compatible
// stores silently do.
type ignoring struct{ store.Store }

func (s ignoring) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	opts.IfMatch, opts.IfNoneMatch = "", false
	return s.Store.Put(ctx, key, body, opts)
}

// ignoringCAS honours create-if-absent but not If-Match.
type ignoringCAS struct{ store.Store }

func (s ignoringCAS) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	opts.IfMatch = ""
	return s.Store.Put(ctx, key, body, opts)
}

// localTokens refuses, without asking the store below, an If-Match token
// that it never handed out, as a driver may refuse a token of a form its
// server never issues; and drops the condition of every other If-Match,
// as a server that ignores it does. A probe that made up its stale token
// would see the local refusal and approve the store.
type localTokens struct {
	store.Store
	mu     sync.Mutex
	issued map[string]bool
}

func (s *localTokens) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	s.mu.Lock()
	known := s.issued[opts.IfMatch]
	s.mu.Unlock()
	if opts.IfMatch != "" && !known {
		return store.Attrs{}, store.Wrap("put", key, store.ErrPrecondition, nil)
	}
	opts.IfMatch = ""
	a, err := s.Store.Put(ctx, key, body, opts)
	if err == nil {
		s.mu.Lock()
		s.issued[a.ETag] = true
		s.mu.Unlock()
	}
	return a, err
}

// sameToken returns one version token for every write.
type sameToken struct{ store.Store }

func (s sameToken) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	opts.IfMatch = ""
	a, err := s.Store.Put(ctx, key, body, opts)
	a.ETag = "1"
	return a, err
}

func TestProbe(t *testing.T) {
	for _, c := range []struct {
		name    string
		s       store.Store
		wantErr string
	}{
		{"enforcing", mem.New(), ""},
		{"drops-all-conditions", ignoring{mem.New()}, "If-None-Match"},
		{"drops-if-match", ignoringCAS{mem.New()}, "If-Match"},
		{"refuses-unknown-tokens-locally", &localTokens{Store: mem.New(), issued: map[string]bool{}}, "stale If-Match"},
		{"token-never-changes", sameToken{mem.New()}, "unchanged"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := store.Probe(context.Background(), c.s)
			if c.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, store.ErrNotEnforced)
			assert.Contains(t, err.Error(), c.wantErr)
			assert.Contains(t, err.Error(), store.ProbePrefix, "the error names the probe key")
		})
	}
}

// undeletable refuses every delete, as a store does to credentials that
// may not delete.
type undeletable struct{ store.Store }

func (s undeletable) Delete(_ context.Context, key string, _ store.DeleteOptions) error {
	return store.Wrap("delete", key, store.ErrAccess, nil)
}

// TestProbeNamesTheScratchObjectItLeft: a store that enforces conditional
// writes but where the probe's scratch object cannot be removed gets a
// *store.ProbeLeftover naming the object, which is still there; one that
// does not enforce them gets that error, whatever the removal did.
func TestProbeNamesTheScratchObjectItLeft(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	err := store.Probe(ctx, undeletable{s})
	var left *store.ProbeLeftover
	require.ErrorAs(t, err, &left)
	assert.ErrorIs(t, err, store.ErrAccess)
	assert.True(t, strings.HasPrefix(left.Key, store.ProbePrefix), left.Key)
	_, err = s.Head(ctx, left.Key)
	assert.NoError(t, err, "the scratch object is left")

	err = store.Probe(ctx, undeletable{ignoring{mem.New()}})
	require.ErrorIs(t, err, store.ErrNotEnforced)
	assert.NotErrorAs(t, err, &left)
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ url, want string }{
		{"", "empty URL"},
		{"gopher://x/y", `unknown URL scheme "gopher"`},
		{"mem://", "no store name"},
		{"mem://x/../y", "bad key prefix"},
		{"://nothing", "missing protocol scheme"},
	} {
		t.Run(c.url, func(t *testing.T) {
			_, err := store.Open(ctx, c.url, store.Config{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestOpenRefusesNegativeTransfers(t *testing.T) {
	_, err := store.Open(context.Background(), "mem://transfers", store.Config{Transfers: -1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-1 transfers")
}

func TestOpenPrefixAndCount(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, "mem://open-test/data/set", store.Config{})
	require.NoError(t, err)
	c := store.Count(s)
	_, err = c.Put(ctx, "k", strings.NewReader("v"), store.PutOptions{})
	require.NoError(t, err)
	_, err = c.Head(ctx, "k")
	require.NoError(t, err)
	require.NoError(t, c.DeleteMany(ctx, make([]string, 1001)))
	assert.Equal(t, "head=1 put=1 delete-many=2", c.Counts().String())

	root, err := store.Open(ctx, "mem://open-test", store.Config{})
	require.NoError(t, err)
	_, err = root.Head(ctx, "data/set/k")
	require.NoError(t, err, "the URL path is a key prefix")
}

func TestParseURL(t *testing.T) {
	u, err := store.ParseURL("rel/dir")
	require.NoError(t, err)
	assert.Equal(t, "file", u.Scheme)
	assert.True(t, strings.HasSuffix(u.Path, "/rel/dir"))
	assert.True(t, strings.HasPrefix(u.Path, "/"))
	u, err = store.ParseURL("S3://bucket/p")
	require.NoError(t, err)
	assert.Equal(t, "s3", u.Scheme)
	assert.Equal(t, "bucket", u.Host)

	// A local path with a colon is written with ./ in front.
	u, err = store.ParseURL("./s3:bucket")
	require.NoError(t, err)
	assert.Equal(t, "file", u.Scheme)
	assert.True(t, strings.HasSuffix(u.Path, "/s3:bucket"))
	u, err = store.ParseURL("dir/s3:bucket")
	require.NoError(t, err)
	assert.Equal(t, "file", u.Scheme)
}

// TestParseURLRefusesRemotes: rclone-style strings are not local paths.
func TestParseURLRefusesRemotes(t *testing.T) {
	for in, want := range map[string]string{
		"s3:bucket":        "write s3://bucket (a local path with a colon is written ./s3:bucket)",
		"s3:/bucket/x":     "write s3://bucket/x",
		"S3:bucket/daily":  "write s3://bucket/daily",
		"gs:bucket":        "write gs://bucket",
		"az:container/x":   "write az://container/x",
		"minio:bucket":     "write minio://bucket",
		"myremote:data/x":  "looks like a remote NAME:PATH",
		"my-remote:":       "written ./my-remote:",
		"backup:/var/data": "write a URL such as s3://bucket/prefix",
	} {
		_, err := store.ParseURL(in)
		if assert.Error(t, err, in) {
			assert.Contains(t, err.Error(), want, in)
		}
	}
}
