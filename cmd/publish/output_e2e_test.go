package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/store"
)

// lastLine is the last non-empty line of out.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestSummaryLine: put, get, sync and verify end with one line of what
// moved (files, bytes uploaded or downloaded, reused, elapsed, rate, in
// KiB and MiB), and --json carries the same numbers.
func TestSummaryLine(t *testing.T) {
	for _, tg := range fileTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			big := strings.Repeat("x", 3000)
			src := writeTree(t, map[string]string{"a": big, "b": "hello\n", "c/d": "dd"})
			out := tg.ok(t, "put", src, url)
			assert.Regexp(t, `^put: 3 files: 3 uploaded \(2\.9 KiB\), 0 reused \(0 B\); [0-9.]+m?s, [0-9.]+ (B|KiB|MiB)/s$`, lastLine(out))

			require.NoError(t, os.WriteFile(filepath.Join(src, "b"), []byte("hello again\n"), 0o644))
			var res putResult
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "--json", "put", src, url)), &res))
			require.NotNil(t, res.Summary)
			assert.Equal(t, 3, res.Summary.Files)
			assert.Equal(t, 1, res.Summary.Transferred)
			assert.EqualValues(t, 12, res.Summary.TransferredBytes)
			assert.Equal(t, 2, res.Summary.Reused)
			assert.EqualValues(t, 3002, res.Summary.ReusedBytes)
			assert.Positive(t, res.Summary.ElapsedSeconds)

			dest := filepath.Join(t.TempDir(), "out")
			out = tg.ok(t, "get", url, dest)
			assert.Regexp(t, `^get: 3 files: 3 downloaded \(2\.9 KiB\); `, lastLine(out))

			require.NoError(t, os.WriteFile(filepath.Join(src, "c", "d"), []byte("ddd"), 0o644))
			tg.ok(t, "put", src, url)
			out = tg.ok(t, "sync", url, dest)
			assert.Regexp(t, `^sync: 3 files: 1 downloaded \(3 B\), 2 unchanged \(2\.9 KiB\); `, lastLine(out))

			out = tg.ok(t, "verify", url)
			assert.Regexp(t, `^verify: 3 files: 3 read \(2\.9 KiB\); `, lastLine(out))
		})
	}
}

// TestQuietAndVerbose: -q prints nothing on success; -v lists each file
// with its action on stderr.
func TestQuietAndVerbose(t *testing.T) {
	for _, tg := range fileTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			src := writeTree(t, map[string]string{"a": "aaa", "b": "bbb"})
			r := tg.run(t, "-q", "put", src, url)
			require.Zero(t, r.code, r.stderr)
			assert.Empty(t, r.stdout)
			assert.Empty(t, r.stderr)

			require.NoError(t, os.WriteFile(filepath.Join(src, "b"), []byte("BBB!"), 0o644))
			r = tg.run(t, "-v", "put", src, url)
			require.Zero(t, r.code, r.stderr)
			assert.Contains(t, r.stderr, "reused a\n")
			assert.Contains(t, r.stderr, "uploaded b\n")

			dest := filepath.Join(t.TempDir(), "out")
			r = tg.run(t, "-q", "get", url, dest)
			require.Zero(t, r.code, r.stderr)
			assert.Empty(t, r.stdout+r.stderr)
			r = tg.run(t, "-v", "get", "--force", url, dest)
			require.Zero(t, r.code, r.stderr)
			assert.Contains(t, r.stderr, "downloaded a\n")
			assert.Contains(t, r.stderr, "downloaded b\n")

			r = tg.run(t, "-q", "verify", url)
			require.Zero(t, r.code, r.stderr)
			assert.Empty(t, r.stdout+r.stderr)
			r = tg.run(t, "-q", "gc", "--keep", "0", "--grace", "0", url)
			require.Zero(t, r.code, r.stderr)
			assert.Empty(t, r.stdout+r.stderr)
		})
	}
}

// TestRequestsLoggedOnlyAtVV: -vv logs every request with its kind and
// key (the commit's pointer write among them); -v logs none.
func TestRequestsLoggedOnlyAtVV(t *testing.T) {
	for _, tg := range fileTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			src := writeTree(t, map[string]string{"a": "aaa"})
			r := tg.run(t, "-v", "put", src, url)
			require.Zero(t, r.code, r.stderr)
			assert.NotContains(t, r.stderr, "msg=request")

			require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("AAA"), 0o644))
			r = tg.run(t, "-vv", "put", src, url)
			require.Zero(t, r.code, r.stderr)
			assert.Regexp(t, `msg=request op=get key=_pointer `, r.stderr)
			assert.Regexp(t, `msg=request op=put key=_gen/[^/ ]+/a .*size=3`, r.stderr)
			assert.Regexp(t, `msg=request op=put key=_pointer .*if=match`, r.stderr)
		})
	}
}

// TestProgressDisplay: --progress shows the display on a stderr that is
// not a terminal; it counts files and uses the summary's units.
func TestProgressDisplay(t *testing.T) {
	for _, tg := range fileTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			src := writeTree(t, map[string]string{"a": strings.Repeat("a", 5000), "b": "b"})
			r := tg.run(t, "--progress", "put", src, url)
			require.Zero(t, r.code, r.stderr)
			assert.Contains(t, r.stderr, "uploading 0/2 files")
			assert.Contains(t, r.stderr, "KiB")
			assert.NotContains(t, r.stderr, "kB")
			r = tg.run(t, "--progress", "-q", "put", "--allow-unchanged", src, url)
			require.Zero(t, r.code, r.stderr)
			assert.Empty(t, r.stderr, "-q wins over --progress")
		})
	}
}

// TestGCJSONNames: gc --json uses snake_case like every other command,
// labels its request counts by operation, and omits a horizon never
// published.
func TestGCJSONNames(t *testing.T) {
	for _, tg := range fileTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			src := writeTree(t, map[string]string{"a": "1"})
			tg.ok(t, "put", src, url)
			var dry map[string]any
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "--json", "gc", "--dry-run", url)), &dry))
			assert.NotContains(t, dry, "horizon", "a dry run on a new dataset has no horizon")

			require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("2"), 0o644))
			tg.ok(t, "put", src, url)
			var rep map[string]any
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "--json", "gc", "--keep", "0", "--grace", "0", url)), &rep))
			assertSnakeKeys(t, rep, "")
			assert.EqualValues(t, 2, rep["objects_deleted"])
			reqs, ok := rep["requests"].(map[string]any)
			require.True(t, ok, "requests is an object labelled by operation: %v", rep["requests"])
			assert.Positive(t, reqs["get"])
		})
	}
}

func assertSnakeKeys(t *testing.T, v any, at string) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			for _, r := range k {
				assert.False(t, unicode.IsUpper(r) || r == '-', "key %q at %q is not snake_case", k, at)
			}
			assertSnakeKeys(t, sub, at+"."+k)
		}
	case []any:
		for _, sub := range v {
			assertSnakeKeys(t, sub, at+"[]")
		}
	}
}

// TestMissingNotCollected: an object deleted by hand from the current
// generation reads as missing, with the way to find and repair it; a
// generation the collector removed reads as collected. Neither message
// repeats an internal prefix.
func TestMissingNotCollected(t *testing.T) {
	for _, tg := range fileTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			src := writeTree(t, map[string]string{"a": "1", "b": "2"})
			tg.ok(t, "put", src, url)
			require.NoError(t, os.WriteFile(filepath.Join(src, "a"), []byte("one"), 0o644))
			tg.ok(t, "put", src, url)
			tg.ok(t, "gc", "--keep", "0", "--grace", "0", url)

			r := tg.run(t, "cat", "--seq", "1", url, "b")
			require.Equal(t, exitError, r.code, r.stderr)
			assert.Contains(t, r.stderr, "collected")
			assert.NotContains(t, r.stderr, "missing")
			assert.LessOrEqual(t, strings.Count(r.stderr, "commit: "), 1, r.stderr)

			s := tg.open(t, url)
			d := commit.New(s)
			snap, err := d.Open(context.Background())
			require.NoError(t, err)
			e, ok := snap.Manifest.Find("b")
			require.True(t, ok)
			require.NoError(t, s.Delete(context.Background(), e.Key, store.DeleteOptions{}))
			r = tg.run(t, "get", url, filepath.Join(t.TempDir(), "out"))
			require.Equal(t, exitError, r.code, r.stderr)
			assert.Contains(t, r.stderr, "object missing")
			assert.Contains(t, r.stderr, "publish verify")
			assert.NotContains(t, r.stderr, "collected")
			assert.LessOrEqual(t, strings.Count(r.stderr, "commit: "), 1, r.stderr)
		})
	}
}

// TestRequestIDsOnlyAtVV: the S3 request ids of a failed request are left
// out of the error unless -vv asks for them.
func TestRequestIDsOnlyAtVV(t *testing.T) {
	tg := fileTargets(t)[1]
	missing := "s3://no-such-bucket-" + strings.ToLower(t.Name()[:4]) + "/x"
	r := tg.run(t, "ls", missing)
	require.NotZero(t, r.code)
	assert.NotContains(t, r.stderr, "RequestID")
	r = tg.run(t, "-vv", "ls", missing)
	require.NotZero(t, r.code)
	assert.Regexp(t, regexp.MustCompile(`RequestID: \S`), r.stderr)
}

func TestTidyMessage(t *testing.T) {
	sdk := `dataset s3://b/d: s3: get "_ptr": operation error S3: GetObject, https response error StatusCode: 503, RequestID: 1C2D, HostID: aGVsbG8=, api error SlowDown: Please reduce your request rate.`
	assert.Equal(t, `dataset s3://b/d: get "_ptr": operation error S3: GetObject, response error StatusCode: 503, api error SlowDown: Please reduce your request rate.`, tidyMessage(sdk, 1))
	assert.Equal(t, sdk, tidyMessage(sdk, 2), "-vv leaves the message whole")
	assert.Equal(t, "looking for 2: object collected: manifest", tidyMessage("commit: looking for 2: commit: object collected: manifest", 0))
	assert.Equal(t, `dataset x: outcome unknown; get "k": object does not exist`, tidyMessage(`dataset x: commit: outcome unknown; get "k": store: object does not exist`, 0))
	assert.Equal(t, "a commit: of the dataset", tidyMessage("a commit: of the dataset", 0), "only a prefix at the start or after a colon goes")
}

func TestProgressETA(t *testing.T) {
	p := &progress{verb: "uploading", start: time.Now().Add(-2 * time.Second), nfile: 4, total: 4000}
	assert.Equal(t, "uploading 0/4 files", p.describe(), "no ETA before there is a rate")
	p.files, p.done = 1, 1000
	assert.Regexp(t, `^uploading 1/4 files, ETA [0-9]+s$`, p.describe())
	p.start = time.Now()
	assert.Equal(t, "uploading 1/4 files", p.describe(), "no ETA in the first second")
}
