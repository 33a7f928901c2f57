package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/store"
)

// VersionPages: a listing of versions that is truncated says where the next
// page starts (NextKeyMarker). gofakes3 says a page is truncated but not
// where to go on, so a bucket holding more than one page of versions under
// the keys a delete lists cannot be reclaimed there; the drivers stop with
// store.ErrListingStuck rather than list the first page forever.
const VersionPages Capability = "VersionPages"

// ObjectVersion is one entry of the server's listing of versions.
type ObjectVersion struct {
	Key    string
	ID     string
	Latest bool
	Marker bool
	Size   int64
}

// Versioned is a driver on a fresh bucket with versioning enabled, with
// what the versioned cases need beside it.
type Versioned struct {
	// Store is the driver, which asks the bucket whether it keeps versions.
	Store store.Store
	// Plain is a second driver on the same bucket declared to keep no
	// versions (versioning=off): its deletes only add delete markers, as
	// a driver that knew nothing of versions would.
	Plain store.Store
	// Versions lists the versions and delete markers under prefix, past
	// the drivers, in one page of at most 1000 entries (it fails t if
	// there are more).
	Versions func(t *testing.T, prefix string) []ObjectVersion
	// BeforeDeleteObjects, if set, is called by Store's transport before
	// each multi-object DELETE request it sends, with its number from 1.
	BeforeDeleteObjects func(f func(n int))
}

// RunVersioned runs the cases of a bucket that keeps versions: the driver
// detects it, and its deletes remove every version of the keys deleted and
// nothing else, older versions first, and never a version written after
// it listed them.
func RunVersioned(t *testing.T, opts Options, open func(t *testing.T) Versioned) {
	cases := []struct {
		name  string
		fn    func(t *testing.T, v Versioned)
		needs Capability
	}{
		{"Detect", testVersionedDetect, ""},
		{"DeleteManyEveryVersion", testVersionedDeleteMany, ""},
		{"DeleteEveryVersion", testVersionedDelete, ""},
		{"DeleteIfMatch", testVersionedDeleteIfMatch, ""},
		{"OlderFirst", testVersionedOlderFirst, ""},
		{"WriteAfterListing", testVersionedWriteAfterListing, ""},
		{"Probe", testVersionedProbe, ""},
		{"ManyPages", testVersionedManyPages, VersionPages},
	}
	for c := range opts.Lacks {
		require.Equalf(t, VersionPages, c, "unknown capability %q for the versioned cases", c)
	}
	for _, c := range cases {
		if why, lacks := opts.Lacks[c.needs]; c.needs != "" && lacks {
			t.Logf("case %s not run: the driver does not claim %s here: %s", c.name, c.needs, why)
			continue
		}
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
	if _, lacks := opts.Lacks[VersionPages]; lacks {
		t.Run("ManyPagesStuck", func(t *testing.T) { testVersionedStuck(t, open(t)) })
	}
}

func putBody(t *testing.T, s store.Store, key, body string) store.Attrs {
	t.Helper()
	a, err := s.Put(context.Background(), key, strings.NewReader(body), store.PutOptions{})
	require.NoError(t, err, "put %q", key)
	return a
}

// versionsOf returns the bucket's entries for key.
func versionsOf(t *testing.T, v Versioned, key string) []ObjectVersion {
	t.Helper()
	var out []ObjectVersion
	for _, e := range v.Versions(t, key) {
		if e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

func testVersionedDetect(t *testing.T, v Versioned) {
	got, err := store.BucketVersioning(context.Background(), v.Store)
	require.NoError(t, err)
	assert.Equal(t, store.VersioningOn, got)
	got, err = store.BucketVersioning(context.Background(), v.Plain)
	require.NoError(t, err)
	assert.Equal(t, store.VersioningOff, got, "declared")
}

func testVersionedDeleteMany(t *testing.T, v Versioned) {
	ctx := context.Background()
	for i := range 3 {
		putBody(t, v.Store, "k1", fmt.Sprintf("k1 body %d", i))
	}
	putBody(t, v.Store, "k2", "k2")
	// A marker left by a delete that knew nothing of versions.
	putBody(t, v.Store, "k3", "k3 old")
	require.NoError(t, v.Plain.Delete(ctx, "k3", store.DeleteOptions{}))
	// Keys the listing under the common prefix shows, not to be touched.
	putBody(t, v.Store, "k10", "k10")
	putBody(t, v.Store, "k", "k")
	require.Len(t, v.Versions(t, ""), 8)

	tctx, tr := store.TrackFreed(ctx)
	require.NoError(t, v.Store.DeleteMany(tctx, []string{"k1", "k2", "k3", "k1", "missing"}))
	for _, k := range []string{"k1", "k2", "k3", "missing"} {
		assert.Empty(t, versionsOf(t, v, k), "every version of %q, and no marker", k)
	}
	assert.Len(t, versionsOf(t, v, "k10"), 1, "a key beside the deleted ones")
	assert.Len(t, versionsOf(t, v, "k"), 1, "a key beside the deleted ones")
	f := tr.Freed()
	assert.True(t, f.Versioned)
	assert.Equal(t, 5, f.Versions)
	assert.Equal(t, 1, f.Markers)
	assert.EqualValues(t, 3*len("k1 body 0")+len("k2")+len("k3 old"), f.Bytes)
	assert.Positive(t, f.Requests[store.OpList])
	assert.EqualValues(t, 2, f.Requests[store.OpDeleteMany], "older versions, then the latest")
}

func testVersionedDelete(t *testing.T, v Versioned) {
	ctx := context.Background()
	putBody(t, v.Store, "key", "one")
	putBody(t, v.Store, "key", "two")
	putBody(t, v.Store, "keyed", "beside")
	require.NoError(t, v.Store.Delete(ctx, "key", store.DeleteOptions{}))
	assert.Empty(t, versionsOf(t, v, "key"))
	assert.Len(t, versionsOf(t, v, "keyed"), 1)
	_, err := v.Store.Head(ctx, "key")
	require.ErrorIs(t, err, store.ErrNotExist)
	require.NoError(t, v.Store.Delete(ctx, "key", store.DeleteOptions{}), "a missing key")

	// The driver declared to keep no versions only hides the key, and
	// says it freed nothing: its write was answered with a version id.
	putBody(t, v.Plain, "hidden", "x")
	tctx, tr := store.TrackFreed(ctx)
	require.NoError(t, v.Plain.DeleteMany(tctx, []string{"hidden"}))
	assert.Equal(t, store.Freed{Versioned: true}, tr.Freed())
	assert.Len(t, versionsOf(t, v, "hidden"), 2, "the version and a marker")
}

func testVersionedDeleteIfMatch(t *testing.T, v Versioned) {
	ctx := context.Background()
	old := putBody(t, v.Store, "key", "one")
	cur := putBody(t, v.Store, "key", "two")
	err := v.Store.Delete(ctx, "key", store.DeleteOptions{IfMatch: old.ETag})
	require.ErrorIs(t, err, store.ErrPrecondition, "the ETag of an older version")
	assert.Len(t, versionsOf(t, v, "key"), 2, "nothing deleted")
	require.NoError(t, v.Store.Delete(ctx, "key", store.DeleteOptions{IfMatch: cur.ETag}))
	assert.Empty(t, versionsOf(t, v, "key"))
	require.NoError(t, v.Store.Delete(ctx, "key", store.DeleteOptions{IfMatch: cur.ETag}), "a missing key")
}

// testVersionedOlderFirst checks that the key reads as it was while its
// older versions go: the latest is deleted in the last request.
func testVersionedOlderFirst(t *testing.T, v Versioned) {
	ctx := context.Background()
	putBody(t, v.Store, "key", "old")
	putBody(t, v.Store, "key", "new")
	var seen []string
	v.BeforeDeleteObjects(func(n int) {
		rc, _, err := v.Plain.Get(ctx, "key")
		if err != nil {
			seen = append(seen, fmt.Sprintf("request %d: %v", n, err))
			return
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		seen = append(seen, fmt.Sprintf("request %d: %s", n, b))
	})
	require.NoError(t, v.Store.DeleteMany(ctx, []string{"key"}))
	assert.Equal(t, []string{"request 1: new", "request 2: new"}, seen)
	assert.Empty(t, versionsOf(t, v, "key"))
}

// testVersionedWriteAfterListing writes a key between the driver's listing
// of its versions and their deletes: the new version is not deleted.
func testVersionedWriteAfterListing(t *testing.T, v Versioned) {
	ctx := context.Background()
	putBody(t, v.Store, "key", "old")
	v.BeforeDeleteObjects(func(n int) {
		if n == 1 {
			putBody(t, v.Plain, "key", "written meanwhile")
		}
	})
	require.NoError(t, v.Store.DeleteMany(ctx, []string{"key"}))
	rc, _, err := v.Plain.Get(ctx, "key")
	require.NoError(t, err, "the version written after the listing")
	b, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	assert.Equal(t, "written meanwhile", string(b))
	got := versionsOf(t, v, "key")
	require.Len(t, got, 1)
	assert.False(t, got[0].Marker)
}

func testVersionedProbe(t *testing.T, v Versioned) {
	require.NoError(t, store.Probe(context.Background(), v.Store))
	assert.Empty(t, v.Versions(t, ""), "the probe leaves no version and no marker")
}

// manyKeys puts n keys of one version each under dir.
func manyKeys(t *testing.T, s store.Store, dir string, n int) []string {
	keys := make([]string, n)
	g, gctx := errgroup.WithContext(context.Background())
	g.SetLimit(16)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/%05d", dir, i)
		g.Go(func() error {
			_, err := s.Put(gctx, keys[i], strings.NewReader("x"), store.PutOptions{})
			return err
		})
	}
	require.NoError(t, g.Wait())
	return keys
}

// testVersionedManyPages deletes keys whose versions take more than one
// page to list: store.MaxListPage plus a few, in two DeleteMany batches.
func testVersionedManyPages(t *testing.T, v Versioned) {
	keys := manyKeys(t, v.Store, "many", store.MaxListPage+5)
	putBody(t, v.Store, "other", "x")
	tctx, tr := store.TrackFreed(context.Background())
	require.NoError(t, v.Store.DeleteMany(tctx, keys))
	left := v.Versions(t, "")
	require.Len(t, left, 1)
	assert.Equal(t, "other", left[0].Key)
	assert.Equal(t, len(keys), tr.Freed().Versions)
	assert.GreaterOrEqual(t, tr.Freed().Requests[store.OpList], int64(2))
}

// stuckBound is how long testVersionedStuck lets a delete run that lists
// the same page forever, far beyond the two requests it takes.
const stuckBound = time.Minute

// testVersionedStuck shows that a listing of versions that says it is
// truncated but does not advance ends in an error, not a loop.
func testVersionedStuck(t *testing.T, v Versioned) {
	keys := manyKeys(t, v.Store, "many", store.MaxListPage+5)
	// A bound for a loop that never ends; the delete takes two requests.
	ctx, cancel := context.WithTimeout(context.Background(), stuckBound)
	defer cancel()
	err := v.Store.DeleteMany(ctx, keys[:store.MaxDeleteBatch])
	require.Error(t, err)
	assert.True(t, errors.Is(err, store.ErrListingStuck), "got %v", err)
	assert.Len(t, versionsOf(t, v, keys[0]), 1, "nothing deleted")
}

// DeleteHook is an http.RoundTripper for the S3 drivers' tests of
// Versioned.BeforeDeleteObjects: it calls the function set last before
// each multi-object DELETE (POST ?delete) it passes on to Base.
type DeleteHook struct {
	Base http.RoundTripper
	mu   sync.Mutex
	f    func(n int)
	n    int
}

// Set makes f the function to call, and numbers requests from 1 again.
func (h *DeleteHook) Set(f func(n int)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.f, h.n = f, 0
}

// RoundTrip implements http.RoundTripper.
func (h *DeleteHook) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && req.URL.Query().Has("delete") {
		h.mu.Lock()
		h.n++
		f, n := h.f, h.n
		h.mu.Unlock()
		if f != nil {
			f(n)
		}
	}
	return h.Base.RoundTrip(req)
}
