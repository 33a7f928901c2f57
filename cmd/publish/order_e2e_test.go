package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/internal/wanproxy"
	"github.com/commitptr/commitptr/store"
)

// proxyLog is the wanproxy's request log, written by its goroutines.
type proxyLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *proxyLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// events returns the log's lines since the last call, as "-> METHOD
// PATH" when a request reached the server and "<- METHOD PATH" when its
// answer was handed back, with the query left out except for a listing.
func (l *proxyLog) events() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		// "SECONDS #N -> METHOD TARGET" or "SECONDS #N <- STATUS METHOD TARGET (...)"
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		method, target := f[3], f[4]
		if f[2] == "<-" {
			method, target = f[4], f[5]
		}
		if path, query, _ := strings.Cut(target, "?"); !strings.Contains(query, "list-type") {
			target = path
		} else {
			target = path + "?list"
		}
		out = append(out, f[2]+" "+method+" "+target)
	}
	l.b.Reset()
	return out
}

// loggedS3 starts an S3 server and, in front of it, a wanproxy that adds
// delay each way and logs every request to log. It returns the flags
// that send publish through the proxy, and a fresh bucket.
func loggedS3(t *testing.T, delay time.Duration, log *proxyLog) (srv *testenv.S3Server, flags []string, bucket string) {
	t.Helper()
	srv = testenv.S3(t)
	srv.UseCredentials()
	bucket = srv.NewBucket(t)
	p, err := wanproxy.Start("127.0.0.1:0", srv.Endpoint, delay, log)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return srv, []string{"--endpoint", p.URL, "--path-style"}, bucket
}

// TestPutReusedProvenOnce: a put through a store 20 ms away that changes
// two files of four proves the two it reuses in one listing, and sends
// each request only once what it depends on is answered: the manifest
// PUT after the pointer GET, the data PUTs and the proof, the pointer PUT
// after the manifest PUT. Without the manifest cache the data PUTs and the
// proof follow the pointer GET and the base manifest, and the proof goes
// out while the data PUTs upload: seven requests, the floor. With it, the
// put expects the manifest it committed before: the changed files upload
// and the reused ones are proven while the pointer is read, and the
// manifest GET is not sent: six, three in a row.
func TestPutReusedProvenOnce(t *testing.T) {
	t.Run("without cache", func(t *testing.T) { testPutReusedProvenOnce(t, false) })
	t.Run("cached", func(t *testing.T) { testPutReusedProvenOnce(t, true) })
}

func testPutReusedProvenOnce(t *testing.T, cached bool) {
	var log proxyLog
	_, flags, bucket := loggedS3(t, 20*time.Millisecond, &log)

	src := writeTree(t, map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"})
	url := "s3://" + bucket + "/ds"
	if !cached {
		flags = append(flags, "--no-cache")
	}
	ok(t, append(flags, "put", src, url)...)
	for _, name := range []string{"a", "b"} {
		require.NoError(t, os.WriteFile(filepath.Join(src, name), []byte("changed"), 0o644))
	}
	log.events()
	out := ok(t, append(flags, "put", src, url)...)
	require.Contains(t, out, "4 files (2 reused)")
	ev := log.events()
	timeline := strings.Join(ev, "\n")

	ds := "/" + bucket + "/ds/"
	isPointer := func(e string) bool { return strings.HasSuffix(e, ds+"_pointer") }
	isManifest := func(e string) bool { return strings.HasSuffix(e, "/_manifest") }
	isProof := func(e string) bool { return strings.HasSuffix(e, "?list") || strings.Contains(e, " HEAD ") }
	isData := func(e string) bool {
		return strings.Contains(e, " PUT ") && strings.Contains(e, ds+"_gen/") && !isManifest(e)
	}
	// first returns the index of the first event of kind dir ("->" or
	// "<-") that match picks, last the index of the last; -1 if none.
	first := func(dir string, match func(string) bool) int {
		for i, e := range ev {
			if strings.HasPrefix(e, dir) && match(e) {
				return i
			}
		}
		return -1
	}
	last := func(dir string, match func(string) bool) int {
		n := -1
		for i, e := range ev {
			if strings.HasPrefix(e, dir) && match(e) {
				n = i
			}
		}
		return n
	}
	put := func(match func(string) bool) func(string) bool {
		return func(e string) bool { return strings.Contains(e, " PUT ") && match(e) }
	}
	get := func(match func(string) bool) func(string) bool {
		return func(e string) bool { return strings.Contains(e, " GET ") && match(e) }
	}

	var sent []string
	for _, e := range ev {
		if strings.HasPrefix(e, "->") {
			sent = append(sent, e)
		}
	}
	manifestGETs := 1
	if cached {
		manifestGETs = 0
	}
	require.Len(t, sent, 6+manifestGETs, "requests of the put:\n%s", timeline)
	for _, c := range []struct {
		name string
		n    int
		m    func(string) bool
	}{
		{"pointer GET", 1, get(isPointer)}, {"manifest GET", manifestGETs, get(isManifest)}, {"data PUT", 2, isData},
		{"proof", 1, isProof}, {"manifest PUT", 1, put(isManifest)}, {"pointer PUT", 1, put(isPointer)},
	} {
		n := 0
		for _, e := range sent {
			if c.m(e) {
				n++
			}
		}
		require.Equal(t, c.n, n, "%s requests:\n%s", c.name, timeline)
	}
	// before checks that every answer a picks comes before the first
	// request b picks, if any: the counts above say which are sent.
	before := func(what string, a, b func(string) bool) {
		t.Helper()
		if next := first("->", b); next >= 0 && last("<-", a) > next {
			t.Errorf("%s:\n%s", what, timeline)
		}
	}
	before("the base manifest GET follows the pointer GET", get(isPointer), get(isManifest))
	before("the data PUTs follow the base manifest (which files are reused)", get(isManifest), isData)
	before("the manifest PUT follows the pointer GET", get(isPointer), put(isManifest))
	before("the manifest PUT follows the data PUTs", isData, put(isManifest))
	before("the manifest PUT follows the proof", isProof, put(isManifest))
	before("the pointer PUT follows the manifest PUT", put(isManifest), put(isPointer))
	if cached {
		// The put expects the manifest it committed: the changed files
		// go up while the pointer is read (commit.BeginAhead).
		if first("->", isData) > last("<-", get(isPointer)) {
			t.Errorf("the data PUTs waited for the pointer GET; want them sent while it is under way:\n%s", timeline)
		}
		if first("->", isProof) > last("<-", get(isPointer)) {
			t.Errorf("the proof waited for the pointer GET; want it sent while it is under way:\n%s", timeline)
		}
		return
	}
	before("the proof follows the pointer GET (the base)", get(isPointer), isProof)
	before("the data PUTs follow the pointer GET (the staging start)", get(isPointer), isData)
	if first("->", isProof) > last("<-", isData) {
		t.Errorf("the proof waited for the data PUTs; want it sent while they are under way:\n%s", timeline)
	}
}

// TestGetReadsAManifestItHoldsFromTheCache: a get of a generation whose
// manifest this machine wrote or read before sends the pointer GET and
// the data GETs only; with --no-cache, or a cache that lost its copy, it
// reads the manifest too. Either way it gets the files.
func TestGetReadsAManifestItHoldsFromTheCache(t *testing.T) {
	var log proxyLog
	_, flags, bucket := loggedS3(t, 0, &log)
	src := writeTree(t, map[string]string{"a": "1", "d/b": "2"})
	url := "s3://" + bucket + "/ds"
	ok(t, append(flags, "put", src, url)...)

	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	for _, c := range []struct {
		name      string
		flags     []string
		before    func()
		manifests int
	}{
		{"cached", nil, func() {}, 0},
		{"without cache", []string{"--no-cache"}, func() {}, 1},
		{"copy lost", nil, func() { require.NoError(t, os.RemoveAll(filepath.Join(cache, "publish", "manifests"))) }, 1},
		{"cached again", nil, func() {}, 0},
	} {
		c.before()
		log.events()
		dest := filepath.Join(t.TempDir(), "out")
		ok(t, append(append(flags, c.flags...), "get", url, dest)...)
		got := map[string]int{"pointer": 0, "manifest": 0, "data": 0}
		for _, e := range log.events() {
			if strings.HasPrefix(e, "-> GET ") {
				switch {
				case strings.HasSuffix(e, "/_pointer"):
					got["pointer"]++
				case strings.HasSuffix(e, "/_manifest"):
					got["manifest"]++
				default:
					got["data"]++
				}
			}
		}
		assert.Equal(t, map[string]int{"pointer": 1, "manifest": c.manifests, "data": 2}, got, c.name)
		b, err := os.ReadFile(filepath.Join(dest, "d", "b"))
		require.NoError(t, err, c.name)
		assert.Equal(t, "2", string(b), c.name)
	}
}

// TestPutProbesAFirstWriteItExpectedABaseFor: this machine committed to
// the dataset before, so its next put expects that manifest and uploads
// while it reads the pointer. The dataset was deleted meanwhile: with no
// pointer, the put is a first write, and probes the store before it
// commits, as every first write does. A put with --probe probes on a
// dataset with commits too.
func TestPutProbesAFirstWriteItExpectedABaseFor(t *testing.T) {
	ctx := context.Background()
	var log proxyLog
	srv, flags, bucket := loggedS3(t, 0, &log)
	src := writeTree(t, map[string]string{"a": "1"})
	url := "s3://" + bucket + "/ds"
	ok(t, append(flags, "put", src, url)...)
	// probed reports whether the put's requests probe the store before
	// the pointer PUT.
	probed := func(timeline []string) bool {
		probe, pointerPut := -1, -1
		for i, e := range timeline {
			if probe < 0 && strings.Contains(e, "/"+store.ProbePrefix) {
				probe = i
			}
			if strings.HasPrefix(e, "->") && strings.Contains(e, " PUT ") && strings.HasSuffix(e, "/ds/_pointer") {
				pointerPut = i
			}
		}
		return probe >= 0 && probe < pointerPut
	}

	s, err := store.Open(ctx, url, store.Config{Endpoint: srv.Endpoint, PathStyle: true})
	require.NoError(t, err)
	require.NoError(t, s.DeleteMany(ctx, listKeys(t, s, "")))
	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("2"), 0o644))
	log.events()
	ok(t, append(flags, "put", src, url)...)
	timeline := log.events()
	assert.True(t, probed(timeline), "want the probe before the pointer PUT:\n%s", strings.Join(timeline, "\n"))
	dest := filepath.Join(t.TempDir(), "out")
	ok(t, append(flags, "get", url, dest)...)
	b, err := os.ReadFile(filepath.Join(dest, "a"))
	require.NoError(t, err)
	assert.Equal(t, "2", string(b))

	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("3"), 0o644))
	ok(t, append(flags, "put", src, url)...)
	log.events()
	require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("4"), 0o644))
	ok(t, append(flags, "put", "--probe", src, url)...)
	timeline = log.events()
	assert.True(t, probed(timeline), "put --probe: want the probe before the pointer PUT:\n%s", strings.Join(timeline, "\n"))
}
