// Package storetest is the conformance suite that every store.Store driver
// must pass. A driver hooks in with a few lines:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { return newEmptyStore(t) })
//	}
//
// Run executes every case twice: on the store as given, and under a key
// prefix (store.WithPrefix), checking that the prefixed keys land below the
// prefix and nowhere else.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/store"
)

// Capability is a feature of the Store contract that a driver may lack on
// some servers, and that commitptr never relies on for safety. Its case
// runs only where the driver claims it.
type Capability string

// ConditionalDelete: Delete honours DeleteOptions.IfMatch. gofakes3 and
// MinIO ignore If-Match on DeleteObject.
const ConditionalDelete Capability = "ConditionalDelete"

// DelimiterPages: a listing with a delimiter pages as one without: a page
// holds at most MaxKeys entries, objects and common prefixes together, and
// one that ends on a common prefix resumes after every key under it, so no
// page repeats it. gofakes3 resumes after the first key under it instead;
// fake-gcs-server counts only objects against MaxKeys. commitptr's one
// delimited listing (gc's lease names) tolerates a repeated name.
const DelimiterPages Capability = "DelimiterPages"

// Options says what a driver lacks on the server under test.
type Options struct {
	// Lacks maps each capability the driver does not claim to why. Run
	// leaves out the cases that need it and logs which and why.
	Lacks map[Capability]string
}

// Run runs the conformance suite with every capability claimed. newStore
// must return a new, empty store each time it is called.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	RunWith(t, Options{}, newStore)
}

// RunWith runs the conformance suite, leaving out the cases of the
// capabilities that opts says the driver lacks.
func RunWith(t *testing.T, opts Options, newStore func(t *testing.T) store.Store) {
	type testCase struct {
		name  string
		fn    func(t *testing.T, s store.Store)
		needs Capability
	}
	all := []testCase{
		{"PutGetHead", testPutGetHead, ""},
		{"NotExist", testNotExist, ""},
		{"GetRange", testGetRange, ""},
		{"GetRangeRefusesBadArguments", testGetRangeRefusesBadArguments, ""},
		{"Overwrite", testOverwrite, ""},
		{"EmptyObject", testEmptyObject, ""},
		{"PutRefusesBadArguments", testPutRefusesBadArguments, ""},
		{"PutSendsTheBodyFromItsOffset", testPutSendsTheBodyFromItsOffset, ""},
		{"KeyCharacters", testKeyCharacters, ""},
		{"IfNoneMatch", testIfNoneMatch, ""},
		{"IfMatch", testIfMatch, ""},
		{"IfMatchMissingKey", testIfMatchMissing, ""},
		{"ConditionalDelete", testConditionalDelete, ConditionalDelete},
		{"DeleteMany", testDeleteMany, ""},
		{"ListPaging", testListPaging, ""},
		{"ListDelimiter", testListDelimiter, ""},
		{"ListDelimiterPages", testListDelimiterPages, DelimiterPages},
		{"ListStartAfterPages", testListStartAfterPages, ""},
		{"ListStartAfterDelimiterPages", testListStartAfterDelimiterPages, DelimiterPages},
		{"ServerTime", testServerTime, ""},
		{"CreateRace", testCreateRace, ""},
		{"CASCounter", testCASCounter, ""},
		{"LargeObject", testLargeObject, ""},
		{"Probe", testProbe, ""},
	}
	known := map[Capability]bool{}
	var cases []testCase
	for _, c := range all {
		if c.needs != "" {
			known[c.needs] = true
		}
		if why, lacks := opts.Lacks[c.needs]; c.needs != "" && lacks {
			t.Logf("case %s not run: the driver does not claim %s here: %s", c.name, c.needs, why)
			continue
		}
		cases = append(cases, c)
	}
	for c := range opts.Lacks {
		require.Truef(t, known[c], "unknown capability %q", c)
	}
	t.Run("plain", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) { c.fn(t, newStore(t)) })
		}
	})
	t.Run("prefixed", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				raw := newStore(t)
				c.fn(t, store.WithPrefix(raw, "pfx/sub/"))
				checkConfined(t, raw, "pfx/sub/")
			})
		}
	})
}

// checkConfined asserts that every key in raw sits under prefix.
func checkConfined(t *testing.T, raw store.Store, prefix string) {
	t.Helper()
	for o, err := range store.List(context.Background(), raw, "", "", "") {
		require.NoError(t, err)
		assert.Truef(t, len(o.Key) > len(prefix) && o.Key[:len(prefix)] == prefix, "key %q escaped prefix %q", o.Key, prefix)
	}
}

func put(t *testing.T, s store.Store, key, body string, opts store.PutOptions) store.Attrs {
	t.Helper()
	a, err := s.Put(context.Background(), key, bytes.NewReader([]byte(body)), opts)
	require.NoError(t, err, "put %q", key)
	require.NotEmpty(t, a.ETag, "put %q returned no ETag", key)
	return a
}

func get(t *testing.T, s store.Store, key string) (string, store.Attrs) {
	t.Helper()
	rc, a, err := s.Get(context.Background(), key)
	require.NoError(t, err, "get %q", key)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return string(b), a
}

func getRange(t *testing.T, s store.Store, key string, off, n int64) (string, store.Attrs) {
	t.Helper()
	rc, a, err := s.GetRange(context.Background(), key, off, n)
	require.NoError(t, err, "get %q from %d, %d bytes", key, off, n)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return string(b), a
}

// testGetRange checks that GetRange reads the bytes of its range, fewer
// where the object ends first, with the attributes of the whole object;
// and that a range from the end on, or of a missing key, is an error of
// its class that names the key.
func testGetRange(t *testing.T, s store.Store) {
	ctx := context.Background()
	const body = "0123456789"
	meta := map[string]string{"writer": "w1"}
	pa := put(t, s, "range/obj", body, store.PutOptions{Metadata: meta, ContentType: "text/plain"})
	ha, err := s.Head(ctx, "range/obj")
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		off, n int64
		want   string
	}{
		{"inside", 2, 3, "234"},
		{"first-byte", 0, 1, "0"},
		{"last-byte", 9, 1, "9"},
		{"whole", 0, 10, body},
		{"past-the-end", 7, 10, "789"},
		{"from-0-past-the-end", 0, 1000, body},
		{"to-the-end", 3, math.MaxInt64, "3456789"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, a := getRange(t, s, "range/obj", c.off, c.n)
			assert.Equal(t, c.want, got)
			assert.EqualValues(t, len(body), a.Size, "the whole object's size, not the range's")
			assert.Equal(t, pa.ETag, a.ETag)
			assert.Equal(t, meta, a.Metadata)
			assert.Equal(t, "text/plain", a.ContentType)
			assert.Equal(t, ha.LastModified.Unix(), a.LastModified.Unix())
		})
	}

	put(t, s, "range/empty", "", store.PutOptions{})
	for _, c := range []struct {
		name   string
		key    string
		off, n int64
	}{
		{"at-the-end", "range/obj", 10, 1},
		{"past-the-end", "range/obj", 11, 5},
		{"far-past-the-end", "range/obj", 1 << 40, 1},
		{"empty-object", "range/empty", 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc, _, err := s.GetRange(ctx, c.key, c.off, c.n)
			if err == nil {
				rc.Close()
			}
			require.ErrorIs(t, err, store.ErrInvalidRange)
			assert.Contains(t, err.Error(), c.key)
		})
	}

	_, _, err = s.GetRange(ctx, "range/missing", 0, 1)
	require.ErrorIs(t, err, store.ErrNotExist)
	assert.Contains(t, err.Error(), "range/missing")
}

// testGetRangeRefusesBadArguments checks that a GetRange of a negative
// offset or a length below one fails with an error that names the key,
// before any request: on a missing key, the answer is not ErrNotExist.
func testGetRangeRefusesBadArguments(t *testing.T, s store.Store) {
	ctx := context.Background()
	put(t, s, "bad-range/obj", "0123456789", store.PutOptions{})
	for _, c := range []struct {
		name   string
		off, n int64
	}{
		{"negative-offset", -1, 5},
		{"zero-length", 0, 0},
		{"negative-length", 2, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, key := range []string{"bad-range/obj", "bad-range/missing"} {
				rc, _, err := s.GetRange(ctx, key, c.off, c.n)
				if err == nil {
					rc.Close()
				}
				require.Error(t, err, key)
				assert.Contains(t, err.Error(), key)
				assert.NotErrorIs(t, err, store.ErrNotExist, "refused after a request: %v", err)
				assert.NotErrorIs(t, err, store.ErrInvalidRange, "refused after a request: %v", err)
			}
		})
	}
}

func testPutGetHead(t *testing.T, s store.Store) {
	ctx := context.Background()
	meta := map[string]string{"writer": "w1", "seq": "7"}
	pa := put(t, s, "dir/obj.json", `{"a":1}`, store.PutOptions{
		Metadata: meta, ContentType: "application/json", ContentEncoding: "zstd",
	})
	body, ga := get(t, s, "dir/obj.json")
	assert.Equal(t, `{"a":1}`, body)
	assert.Equal(t, pa.ETag, ga.ETag)
	assert.EqualValues(t, 7, ga.Size)
	assert.Equal(t, meta, ga.Metadata)
	assert.Equal(t, "application/json", ga.ContentType)
	assert.Equal(t, "zstd", ga.ContentEncoding)
	assert.False(t, ga.LastModified.IsZero())

	ha, err := s.Head(ctx, "dir/obj.json")
	require.NoError(t, err)
	assert.Equal(t, pa.ETag, ha.ETag)
	assert.EqualValues(t, 7, ha.Size)
	assert.Equal(t, meta, ha.Metadata)
	assert.Equal(t, "application/json", ha.ContentType)
	assert.Equal(t, "zstd", ha.ContentEncoding)
	assert.Equal(t, ga.LastModified.Unix(), ha.LastModified.Unix())
}

func testNotExist(t *testing.T, s store.Store) {
	ctx := context.Background()
	_, _, err := s.Get(ctx, "missing/key")
	require.ErrorIs(t, err, store.ErrNotExist)
	assert.Contains(t, err.Error(), "missing/key")
	_, err = s.Head(ctx, "missing/key")
	require.ErrorIs(t, err, store.ErrNotExist)
	require.NoError(t, s.Delete(ctx, "missing/key", store.DeleteOptions{}), "deleting a missing key is not an error")
	require.NoError(t, s.DeleteMany(ctx, []string{"missing/a", "missing/b"}))
}

func testOverwrite(t *testing.T, s store.Store) {
	a1 := put(t, s, "k", "one", store.PutOptions{})
	a2 := put(t, s, "k", "two!", store.PutOptions{})
	assert.NotEqual(t, a1.ETag, a2.ETag)
	body, a := get(t, s, "k")
	assert.Equal(t, "two!", body)
	assert.Equal(t, a2.ETag, a.ETag)
}

func testEmptyObject(t *testing.T, s store.Store) {
	put(t, s, "empty", "", store.PutOptions{})
	body, a := get(t, s, "empty")
	assert.Equal(t, "", body)
	assert.EqualValues(t, 0, a.Size)
}

func testKeyCharacters(t *testing.T, s store.Store) {
	keys := []string{"a b/c+d", "pct%20x", "ünï/cødé", "x=y&z", "dots.in.name", "a/b/c/d/e/f"}
	for _, k := range keys {
		put(t, s, k, "v:"+k, store.PutOptions{})
	}
	for _, k := range keys {
		body, _ := get(t, s, k)
		assert.Equal(t, "v:"+k, body)
	}
	var listed []string
	for o, err := range store.List(context.Background(), s, "", "", "") {
		require.NoError(t, err)
		listed = append(listed, o.Key)
	}
	assert.ElementsMatch(t, keys, listed)
}

func testIfNoneMatch(t *testing.T, s store.Store) {
	ctx := context.Background()
	a := put(t, s, "once", "first", store.PutOptions{IfNoneMatch: true})
	_, err := s.Put(ctx, "once", bytes.NewReader([]byte("second")), store.PutOptions{IfNoneMatch: true})
	require.ErrorIs(t, err, store.ErrPrecondition)
	assert.Contains(t, err.Error(), "once")
	body, ga := get(t, s, "once")
	assert.Equal(t, "first", body)
	assert.Equal(t, a.ETag, ga.ETag)
}

func testIfMatch(t *testing.T, s store.Store) {
	ctx := context.Background()
	a1 := put(t, s, "cas", "v1", store.PutOptions{})
	a2 := put(t, s, "cas", "v2", store.PutOptions{IfMatch: a1.ETag})
	_, err := s.Put(ctx, "cas", bytes.NewReader([]byte("v3")), store.PutOptions{IfMatch: a1.ETag})
	require.ErrorIs(t, err, store.ErrPrecondition, "a stale version token must lose")
	body, ga := get(t, s, "cas")
	assert.Equal(t, "v2", body)
	assert.Equal(t, a2.ETag, ga.ETag)
}

func testIfMatchMissing(t *testing.T, s store.Store) {
	// A made-up token, and one the store issued for another key: a driver
	// may refuse a token of a form it never issues without asking the
	// server, so only the second one reaches it for sure.
	other := put(t, s, "elsewhere", "x", store.PutOptions{})
	for _, tok := range []string{"0123456789abcdef0123456789abcdef", other.ETag} {
		_, err := s.Put(context.Background(), "nothing/here", bytes.NewReader([]byte("x")), store.PutOptions{IfMatch: tok})
		require.ErrorIs(t, err, store.ErrPrecondition, "IfMatch %q", tok)
		_, err = s.Head(context.Background(), "nothing/here")
		require.ErrorIs(t, err, store.ErrNotExist, "a failed If-Match must not create the object")
	}
}

func testConditionalDelete(t *testing.T, s store.Store) {
	ctx := context.Background()
	a1 := put(t, s, "del", "v1", store.PutOptions{})
	a2 := put(t, s, "del", "v2", store.PutOptions{})
	err := s.Delete(ctx, "del", store.DeleteOptions{IfMatch: a1.ETag})
	require.ErrorIs(t, err, store.ErrPrecondition)
	body, _ := get(t, s, "del")
	assert.Equal(t, "v2", body, "a failed conditional delete must keep the object")
	require.NoError(t, s.Delete(ctx, "del", store.DeleteOptions{IfMatch: a2.ETag}))
	_, err = s.Head(ctx, "del")
	require.ErrorIs(t, err, store.ErrNotExist)
}

// putMany writes n small objects key(i) in parallel.
func putMany(t *testing.T, s store.Store, n int, key func(i int) string) {
	t.Helper()
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			_, err := s.Put(ctx, key(i), bytes.NewReader([]byte("x")), store.PutOptions{})
			return err
		})
	}
	require.NoError(t, g.Wait())
}

func listAll(t *testing.T, s store.Store, prefix, delim, after string) []string {
	t.Helper()
	var keys []string
	for o, err := range store.List(context.Background(), s, prefix, delim, after) {
		require.NoError(t, err)
		keys = append(keys, o.Key)
	}
	return keys
}

func testDeleteMany(t *testing.T, s store.Store) {
	const n = 1100 // more than one batch
	key := func(i int) string { return fmt.Sprintf("dm/%05d", i) }
	putMany(t, s, n, key)
	put(t, s, "keep", "k", store.PutOptions{})
	var keys []string
	for i := range n {
		keys = append(keys, key(i))
	}
	keys = append(keys, "dm/never-existed")
	require.NoError(t, s.DeleteMany(context.Background(), keys))
	assert.Empty(t, listAll(t, s, "dm/", "", ""))
	assert.Equal(t, []string{"keep"}, listAll(t, s, "", "", ""))
}

func testListPaging(t *testing.T, s store.Store) {
	const n = 1234
	key := func(i int) string { return fmt.Sprintf("lp/%05d", i) }
	putMany(t, s, n, key)
	put(t, s, "lp0", "outside the prefix", store.PutOptions{})
	put(t, s, "lo", "before the prefix", store.PutOptions{})

	keys := listAll(t, s, "lp/", "", "")
	require.Len(t, keys, n)
	for i, k := range keys {
		require.Equal(t, key(i), k, "listing must be in lexical order")
	}
	after := listAll(t, s, "lp/", "", key(1000))
	require.Len(t, after, n-1001)
	assert.Equal(t, key(1001), after[0])

	// Explicit small pages, following tokens by hand.
	ctx := context.Background()
	req := store.ListRequest{Prefix: "lp/", MaxKeys: 500}
	var pages, total int
	for {
		p, err := s.List(ctx, req)
		require.NoError(t, err)
		pages++
		total += len(p.Objects)
		require.LessOrEqual(t, len(p.Objects), 500)
		for _, o := range p.Objects {
			assert.EqualValues(t, 1, o.Size)
			assert.NotEmpty(t, o.ETag)
		}
		if p.Next == "" {
			break
		}
		req.Token = p.Next
	}
	assert.Equal(t, n, total)
	assert.Equal(t, 3, pages)
}

func testListDelimiter(t *testing.T, s store.Store) {
	for _, k := range []string{"d/a/1", "d/a/2", "d/b/1", "d/c", "d/d/x/y", "d/e", "e/z"} {
		put(t, s, k, "x", store.PutOptions{})
	}
	assert.Equal(t, []string{"d/a/", "d/b/", "d/c", "d/d/", "d/e"}, listAll(t, s, "d/", "/", ""))
	assert.Equal(t, []string{"d/", "e/"}, listAll(t, s, "", "/", ""))
	assert.Equal(t, []string{"d/b/", "d/c", "d/d/", "d/e"}, listAll(t, s, "d/", "/", "d/a/2"))
}

// testListDelimiterPages: pages of one entry must not repeat a common
// prefix.
func testListDelimiterPages(t *testing.T, s store.Store) {
	for _, k := range []string{"d/a/1", "d/a/2", "d/b/1", "d/c", "d/d/x/y", "d/e", "e/z"} {
		put(t, s, k, "x", store.PutOptions{})
	}
	ctx := context.Background()
	req := store.ListRequest{Prefix: "d/", Delimiter: "/", MaxKeys: 1}
	var got []string
	for range 20 {
		p, err := s.List(ctx, req)
		require.NoError(t, err)
		got = append(got, p.Prefixes...)
		for _, o := range p.Objects {
			got = append(got, o.Key)
		}
		if p.Next == "" {
			break
		}
		req.Token = p.Next
	}
	assert.Equal(t, []string{"d/a/", "d/b/", "d/c", "d/d/", "d/e"}, got)
}

func testServerTime(t *testing.T, s store.Store) {
	ctx := context.Background()
	plausible := func(what string, ts time.Time) {
		t.Helper()
		require.Falsef(t, ts.IsZero(), "%s: server time missing", what)
		// Server and test share a host here, so the clocks agree closely.
		assert.WithinDurationf(t, time.Now(), ts, time.Minute, "%s: server time implausible", what)
	}
	pa := put(t, s, "clock", "x", store.PutOptions{})
	plausible("put", pa.ServerTime)
	_, ga := get(t, s, "clock")
	plausible("get", ga.ServerTime)
	_, ra := getRange(t, s, "clock", 0, 1)
	plausible("get-range", ra.ServerTime)
	ha, err := s.Head(ctx, "clock")
	require.NoError(t, err)
	plausible("head", ha.ServerTime)
	// Ages are computed as ServerTime - LastModified; it must not be
	// negative beyond the one-second resolution of HTTP dates.
	assert.False(t, ha.ServerTime.Before(ha.LastModified.Add(-time.Second)), "server time %v before last-modified %v", ha.ServerTime, ha.LastModified)
}

func testCreateRace(t *testing.T, s store.Store) {
	const racers, rounds = 64, 50
	for r := range rounds {
		key := "race/" + strconv.Itoa(r)
		var wins, lost atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, racers)
		start := make(chan struct{})
		for w := range racers {
			wg.Go(func() {
				<-start
				_, err := s.Put(context.Background(), key, bytes.NewReader([]byte(strconv.Itoa(w))), store.PutOptions{IfNoneMatch: true})
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, store.ErrPrecondition), errors.Is(err, store.ErrConflict):
					lost.Add(1)
				default:
					errs <- err
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.EqualValuesf(t, 1, wins.Load(), "round %d: exactly one create must win", r)
		require.EqualValuesf(t, racers-1, lost.Load(), "round %d: every other create gets 412 (or 409)", r)
	}
}

func testCASCounter(t *testing.T, s store.Store) {
	const workers, incs = 16, 30
	ctx := context.Background()
	put(t, s, "counter", "0", store.PutOptions{IfNoneMatch: true})
	g := new(errgroup.Group)
	for range workers {
		g.Go(func() error { return Increment(ctx, s, "counter", incs, nil) })
	}
	require.NoError(t, g.Wait())
	body, _ := get(t, s, "counter")
	assert.Equal(t, strconv.Itoa(workers*incs), body, "a lost update would leave the counter short")
}

// Increment adds one to the decimal counter at key n times, each by a
// compare-and-swap of the value it read plus one, retrying lost races
// (412, 409). report, if not nil, gets each value written: a value
// reported twice, by any writers, is a lost update.
func Increment(ctx context.Context, s store.Store, key string, n int, report func(v int)) error {
	for done := 0; done < n; {
		rc, a, err := s.Get(ctx, key)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		v, err := strconv.Atoi(string(b))
		if err != nil {
			return fmt.Errorf("counter body %q: %w", b, err)
		}
		_, err = s.Put(ctx, key, strings.NewReader(strconv.Itoa(v+1)), store.PutOptions{IfMatch: a.ETag})
		switch {
		case err == nil:
			done++
			if report != nil {
				report(v + 1)
			}
		case (errors.Is(err, store.ErrPrecondition) || errors.Is(err, store.ErrConflict)) && ctx.Err() == nil:
		default:
			return err
		}
	}
	return nil
}

// onlyReader hides every method but Read, so drivers see a stream of
// unknown length.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func testLargeObject(t *testing.T, s store.Store) {
	const size = 64 << 20
	data := make([]byte, size)
	_, err := rand.Read(data)
	require.NoError(t, err)
	want := sha256.Sum256(data)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		body io.Reader
		size int64
	}{
		{"known-size", bytes.NewReader(data), size},
		{"stream", onlyReader{bytes.NewReader(data)}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "large/" + c.name
			a, err := s.Put(ctx, key, c.body, store.PutOptions{Size: c.size})
			require.NoError(t, err)
			require.NotEmpty(t, a.ETag)
			rc, ga, err := s.Get(ctx, key)
			require.NoError(t, err)
			defer rc.Close()
			h := sha256.New()
			n, err := io.Copy(h, rc)
			require.NoError(t, err)
			assert.EqualValues(t, size, n)
			assert.EqualValues(t, size, ga.Size)
			assert.Equal(t, want[:], h.Sum(nil), "content differs after the round trip")
			checkLargeRanges(t, s, key, data)
		})
	}
}

// checkLargeRanges reads ranges of the large object key, whose content is
// data, across the boundaries of the parts every driver uploads (8 and 16
// MiB), and up to its end.
func checkLargeRanges(t *testing.T, s store.Store, key string, data []byte) {
	t.Helper()
	size := int64(len(data))
	for _, r := range []struct{ off, n int64 }{
		{8<<20 - 3, 6},
		{16<<20 - 3, 6},
		{7 << 20, 10 << 20}, // across two boundaries
		{size - 5, 10},
	} {
		got, a := getRange(t, s, key, r.off, r.n)
		end := min(r.off+r.n, size)
		assert.True(t, string(data[r.off:end]) == got, "range from %d, %d bytes: %d bytes read differ", r.off, r.n, len(got))
		assert.EqualValues(t, size, a.Size, "range from %d, %d bytes", r.off, r.n)
	}
}

// testPutSendsTheBodyFromItsOffset checks that a seekable body not at its
// start is stored from its offset, not from its start, in one request
// (with and without a condition) and in parts: an SDK that rewinds a body
// to retry must rewind it to where it was, not to 0.
func testPutSendsTheBodyFromItsOffset(t *testing.T, s store.Store) {
	ctx := context.Background()
	const offset = 5
	for _, c := range []struct {
		name string
		size int
		opts store.PutOptions
	}{
		{"single", 100, store.PutOptions{}},
		{"single-sized", 100, store.PutOptions{Size: 100}},
		{"single-conditional", 100, store.PutOptions{IfNoneMatch: true}},
		{"multipart", 17 << 20, store.PutOptions{}}, // past every driver's single-request limit
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "offset/" + c.name
			data := make([]byte, offset+c.size)
			_, err := rand.Read(data)
			require.NoError(t, err)
			body := bytes.NewReader(data)
			_, err = body.Seek(offset, io.SeekStart)
			require.NoError(t, err)
			a, err := s.Put(ctx, key, body, c.opts)
			require.NoError(t, err)
			assert.EqualValues(t, c.size, a.Size)
			rc, ga, err := s.Get(ctx, key)
			require.NoError(t, err)
			defer rc.Close()
			got, err := io.ReadAll(rc)
			require.NoError(t, err)
			assert.EqualValues(t, c.size, ga.Size)
			assert.True(t, bytes.Equal(data[offset:], got), "the stored object is not the body from its offset (%d bytes stored)", len(got))
		})
	}
}

// moved is a body whose end, as Seek finds it, is by off bytes not where
// its reads end: a file that grew (off < 0) or shrank (off > 0) after its
// size was taken.
type moved struct {
	*bytes.Reader
	off int64
}

func (m *moved) Seek(offset int64, whence int) (int64, error) {
	if whence == io.SeekEnd {
		offset += m.off
	}
	return m.Reader.Seek(offset, whence)
}

// testPutRefusesBadArguments checks that a Put with arguments no driver
// may send, or with a body whose length is not its declared Size, fails
// with an error that names the key, and stores nothing.
func testPutRefusesBadArguments(t *testing.T, s store.Store) {
	ctx := context.Background()
	multipart := make([]byte, 17<<20) // past every driver's single-request limit
	for _, c := range []struct {
		name string
		body io.Reader
		opts store.PutOptions
	}{
		{"nil-body", nil, store.PutOptions{}},
		{"negative-size", strings.NewReader("x"), store.PutOptions{Size: -1}},
		{"both-conditions", strings.NewReader("x"), store.PutOptions{IfNoneMatch: true, IfMatch: "abc"}},
		{"longer-than-size", strings.NewReader("hello"), store.PutOptions{Size: 3}},
		{"longer-than-size-stream", onlyReader{strings.NewReader("hello")}, store.PutOptions{Size: 3}},
		{"shorter-than-size", strings.NewReader("hi"), store.PutOptions{Size: 10}},
		{"shorter-than-size-stream", onlyReader{strings.NewReader("hi")}, store.PutOptions{Size: 10}},
		{"shorter-than-size-multipart", onlyReader{bytes.NewReader(multipart)}, store.PutOptions{Size: 20 << 20}},
		{"longer-than-size-multipart", onlyReader{bytes.NewReader(multipart)}, store.PutOptions{Size: 16<<20 + 1}},
		// A seekable body whose length changes between the Seek that
		// measures it and the reads that send it (a file being written):
		// its Size is the length it had.
		{"grew-after-size", &moved{bytes.NewReader([]byte("hello, world")), -7}, store.PutOptions{Size: 5}},
		{"shrank-after-size", &moved{bytes.NewReader([]byte("hello")), 7}, store.PutOptions{Size: 12}},
		{"grew-after-size-multipart", &moved{bytes.NewReader(multipart), -1 << 20}, store.PutOptions{Size: 16 << 20}},
		{"shrank-after-size-multipart", &moved{bytes.NewReader(multipart), 1 << 20}, store.PutOptions{Size: 18 << 20}},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "bad-put/" + c.name
			_, err := s.Put(ctx, key, c.body, c.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), key)
			_, err = s.Head(ctx, key)
			require.ErrorIs(t, err, store.ErrNotExist, "a refused Put stored %q", key)
		})
	}
}

func testProbe(t *testing.T, s store.Store) {
	require.NoError(t, store.Probe(context.Background(), s))
	assert.Empty(t, listAll(t, s, store.ProbePrefix, "", ""), "probe must clean up after itself")
}
