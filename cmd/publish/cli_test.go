package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/internal/bench"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// cli runs the command line in process and returns the exit status and
// what it wrote.
func cli(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// ok runs the command line and requires status 0.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := cli(t, "", args...)
	require.Equal(t, 0, code, "publish %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), out, errs)
	return out
}

var memSeq atomic.Int64

// memURL returns a fresh in-process store URL.
func memURL() string { return fmt.Sprintf("mem://cli-%d-%s", memSeq.Add(1), uuid.NewString()[:8]) }

// writeTree creates files (path → content) below a fresh directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, body := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(body), 0o644))
	}
	return dir
}

// readTree returns the files below dir.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		got[filepath.ToSlash(rel)] = string(b)
		return err
	})
	require.NoError(t, err)
	return got
}

func TestUsageErrors(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no config file, whatever the user has
	src := writeTree(t, map[string]string{"a": "1"})
	gen := "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"put without args", []string{"put"}, exitUsage, "accepts 2 arg(s)"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "unknown command"},
		{"unknown flag", []string{"ls", "--nope", "mem://x"}, exitUsage, "unknown flag: --nope"},
		{"unknown scheme", []string{"ls", "ftp://host/x"}, exitUsage, `unknown URL scheme "ftp"`},
		{"rclone-style s3 destination", []string{"put", src, "s3:bucket/daily"}, exitUsage, "write s3://bucket/daily"},
		{"remote without a config file", []string{"ls", "backup:datasets"}, exitUsage, "looks like a remote NAME:PATH"},
		{"missing config file", []string{"--config", "/nonexistent/publish-config", "ls", "backup:datasets"}, exitUsage, "config file: open /nonexistent/publish-config"},
		{"zero timeout flag", []string{"--timeout", "0s", "ls", "s3://bucket/x"}, exitUsage, "--timeout 0s: want a positive duration"},
		{"bad timeout in a URL", []string{"ls", "s3://bucket/x?timeout=soon"}, exitUsage, `timeout="soon" is not a positive duration`},
		{"s3 URL with credentials", []string{"ls", "s3://AKIDEXAMPLE:hunter2@bucket/x"}, exitUsage, "user information"},
		{"seq and gen", []string{"ls", "--seq", "1", "--gen", gen, "mem://x"}, exitUsage, "[gen seq]"},
		{"bad generation", []string{"ls", "--gen", "nope", "mem://x"}, exitUsage, `bad id "nope"`},
		{"bad meta", []string{"put", "--meta", "novalue", src, "mem://x"}, exitUsage, "want key=value"},
		{"bad compress", []string{"put", "--compress", "gzip", src, "mem://x"}, exitUsage, "want none or zstd"},
		{"bad lease name", []string{"put", "--lease", "a/b", src, "mem://x"}, exitUsage, "lease name"},
		{"update without command", []string{"update", "mem://x", "k"}, exitUsage, "no command given"},
		{"update of a reserved key", []string{"update", "mem://x", "_pointer", "--", "cat"}, exitUsage, "refuses"},
		{"run without lease", []string{"run", "mem://x", "--", "true"}, exitUsage, `required flag(s) "lease"`},
		{"run with a grace that does not fit the TTL", []string{"run", "--lease", "job", "--ttl", "3s", "--grace", "1.3s", "mem://x", "--", "true"}, exitUsage, "--grace 1.3s does not fit --ttl 3s; use --grace 1.2s or less"},
		{"rollback to nonsense", []string{"rollback", "mem://x", "--to", "yesterday"}, exitUsage, "neither a seq number, a generation id nor tag:NAME"},
		{"unpin of a non-pin key", []string{"unpin", "mem://x", "_pointer"}, exitUsage, "bad pin key"},
		{"unpin of nothing", []string{"unpin", "mem://x"}, exitUsage, "name the pins to remove: their keys (as 'publish pin --list mem://x' prints them) or --gen GENERATION"},
		{"unpin of keys and a generation", []string{"unpin", "--gen", gen, "mem://x", "_pin/" + gen + "/x"}, exitUsage, "not both"},
		{"log with a negative count", []string{"log", "-n", "-3", "mem://x"}, exitUsage, "-n/--max-count -3: want a count"},
		{"diff of nonsense", []string{"diff", "mem://x", "a", "b"}, exitUsage, "neither a seq number"},
		{"lease status with bad name", []string{"lease", "status", "mem://x", "../x"}, exitUsage, "lease name"},
		{"missing SRC", []string{"put", "/nonexistent/commitptr-src", "mem://x"}, exitError, "SRC /nonexistent/commitptr-src: no such file or directory"},
		{"no commits", []string{"ls", memURL()}, exitError, "dataset has no commits"},
		{"missing file", []string{"cat", "mem://x", "a"}, exitError, "no commits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := cli(t, "", tt.args...)
			assert.Equal(t, tt.code, code, "stdout: %s\nstderr: %s", out, errs)
			assert.Contains(t, errs, tt.stderr)
			assert.NotContains(t, errs, "hunter2", "credentials must never be printed")
		})
	}
}

// TestRemoteLikeDestination: "s3:bucket" is refused and writes nothing;
// "./s3:bucket" is the local directory of that name.
func TestRemoteLikeDestination(t *testing.T) {
	src := writeTree(t, map[string]string{"a": "1"})
	t.Chdir(t.TempDir())
	code, _, errs := cli(t, "", "put", src, "s3:bucket")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, "write s3://bucket")
	assert.NoDirExists(t, "s3:bucket")

	ok(t, "put", src, "./s3:bucket")
	assert.DirExists(t, "s3:bucket")
	assert.Equal(t, "1", ok(t, "cat", "./s3:bucket", "a"))
}

func TestMissingSRCWritesNothing(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store")
	code, _, errs := cli(t, "", "put", filepath.Join(t.TempDir(), "missing"), root)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "no such file or directory")
	assert.NoDirExists(t, root, "a bad SRC must not touch the store")
}

func TestPublishAndRead(t *testing.T) {
	u := memURL()
	v1 := map[string]string{"report.csv": "a,b\n1,2\n", "parts/p0": "zero\n", "parts/p1": "one\n"}
	out := ok(t, "put", "-m", "first", "--meta", "job=nightly", writeTree(t, v1), u)
	assert.Regexp(t, `^committed seq 1 generation [0-9a-f-]{36}: 3 files \(0 reused\)`, out)

	assert.Equal(t, "5  parts/p0\n4  parts/p1\n8  report.csv\n", ok(t, "ls", u))
	assert.Equal(t, "5  parts/p0\n4  parts/p1\n", ok(t, "ls", u, "parts/"))
	assert.Equal(t, "a,b\n1,2\n", ok(t, "cat", u, "report.csv"))

	var show showResult
	require.NoError(t, json.Unmarshal([]byte(ok(t, "show", "--json", u)), &show))
	assert.Equal(t, uint64(1), show.Pointer.Seq)
	assert.Equal(t, "first", show.Pointer.Message)
	assert.Equal(t, map[string]string{"job": "nightly"}, show.Pointer.Meta)
	assert.Equal(t, 3, show.Manifest.Files)

	// The second put changes one file, drops one and adds one; the
	// unchanged file is reused.
	v2 := map[string]string{"report.csv": "a,b\n1,3\n", "parts/p0": "zero\n", "parts/p2": "two\n"}
	var put putResult
	require.NoError(t, json.Unmarshal([]byte(ok(t, "put", "--json", "--compress", "zstd", writeTree(t, v2), u)), &put))
	assert.Equal(t, uint64(2), put.Seq)
	assert.Equal(t, 1, put.Reused)

	diff := ok(t, "diff", u, "1", "2")
	assert.Contains(t, diff, "M report.csv (8 -> 8 bytes)")
	assert.Contains(t, diff, "- parts/p1")
	assert.Contains(t, diff, "+ parts/p2")
	assert.NotContains(t, diff, "parts/p0")

	var log logResult
	require.NoError(t, json.Unmarshal([]byte(ok(t, "log", "--json", u)), &log))
	require.Len(t, log.Commits, 2)
	assert.Equal(t, []uint64{2, 1}, []uint64{log.Commits[0].Seq, log.Commits[1].Seq})
	assert.Equal(t, put.Generation, log.Commits[0].Generation)
	assert.Contains(t, ok(t, "log", u), "first")

	dest := filepath.Join(t.TempDir(), "out")
	assert.Contains(t, ok(t, "get", u, dest), "got seq 2")
	assert.Equal(t, v2, readTree(t, dest))
	assert.Contains(t, ok(t, "get", "--seq", "1", "--force", u, dest), "got seq 1")
	assert.Equal(t, v1, readTree(t, dest))
	assert.Equal(t, "one\n", ok(t, "cat", "--seq", "1", u, "parts/p1"))

	assert.Contains(t, ok(t, "verify", "--all", u), "verified 5 objects")

	assert.Contains(t, ok(t, "rollback", u, "--to", "1"), "committed seq 3")
	dest3 := filepath.Join(t.TempDir(), "out3")
	ok(t, "get", u, dest3)
	assert.Equal(t, v1, readTree(t, dest3))
	assert.Contains(t, ok(t, "show", u), "rollback to seq 1")
}

func TestPutSingleFile(t *testing.T) {
	u := memURL()
	dir := writeTree(t, map[string]string{"data.json": `{"x":1}`})
	ok(t, "put", filepath.Join(dir, "data.json"), u)
	assert.Equal(t, `{"x":1}`, ok(t, "cat", u, "data.json"))
}

func TestPutRefusesSymlinks(t *testing.T) {
	dir := writeTree(t, map[string]string{"a": "1"})
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(dir, "link")))
	u := memURL()
	code, _, errs := cli(t, "", "put", dir, u)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, filepath.Join(dir, "link")+" is a symbolic link (to /etc/passwd)")
	assert.Contains(t, errs, "--links")
	code, _, _ = cli(t, "", "ls", u)
	assert.Equal(t, exitError, code, "nothing may have been committed")
}

func TestGetDest(t *testing.T) {
	u := memURL()
	ok(t, "put", writeTree(t, map[string]string{"f": "x"}), u)
	base := t.TempDir()

	full := writeTree(t, map[string]string{"keep": "me"})
	code, _, errs := cli(t, "", "get", u, full)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "is not empty (use --force")
	assert.Equal(t, map[string]string{"keep": "me"}, readTree(t, full), "a refused get must not touch DEST")

	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(t.TempDir(), link))
	code, _, errs = cli(t, "", "get", "--force", u, link)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "is a symbolic link")

	file := filepath.Join(base, "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	code, _, errs = cli(t, "", "get", u, filepath.Join(file, "sub"))
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "not a directory")

	empty := t.TempDir()
	ok(t, "get", u, empty)
	assert.Equal(t, map[string]string{"f": "x"}, readTree(t, empty))

	entries, err := os.ReadDir(base)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.Contains(e.Name(), "publish-get"), "temporary directory %s left behind", e.Name())
	}
}

func TestCorruptPointer(t *testing.T) {
	for _, fixture := range []string{"not-json.txt", "unknown-format.json", "truncated.json", "oversized.json", "bad-generation.json"} {
		t.Run(fixture, func(t *testing.T) {
			root := t.TempDir()
			ok(t, "put", writeTree(t, map[string]string{"f": "x"}), root)
			body, err := os.ReadFile(filepath.Join("..", "..", "testdata", "corrupt", "pointer", fixture))
			require.NoError(t, err)
			s, err := store.Open(context.Background(), root, store.Config{})
			require.NoError(t, err)
			_, err = s.Put(context.Background(), pointer.Key, bytes.NewReader(body), store.PutOptions{})
			require.NoError(t, err)

			for _, args := range [][]string{
				{"ls", root},
				{"get", root, filepath.Join(t.TempDir(), "out")},
				{"put", writeTree(t, map[string]string{"g": "y"}), root},
				{"gc", root},
			} {
				code, _, errs := cli(t, "", args...)
				assert.Equal(t, exitError, code, "%v: %s", args, errs)
				assert.Contains(t, errs, "corrupt", args)
				if args[0] != "gc" {
					assert.Contains(t, errs, `"_pointer"`, "the message names the key")
				}
			}
			rc, _, err := s.Get(context.Background(), pointer.Key)
			require.NoError(t, err)
			after, _ := io.ReadAll(rc)
			rc.Close()
			assert.Equal(t, body, after, "nothing may change the corrupt pointer")
		})
	}
}

// laxStore ignores write conditions, as some S3-compatible stores do.
type laxStore struct{ store.Store }

func (s laxStore) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	opts.IfMatch, opts.IfNoneMatch = "", false
	return s.Store.Put(ctx, key, body, opts)
}

// heldStores are the stores behind held://NAME URLs, by NAME: fault
// stores whose rules the test sets.
var heldStores sync.Map

func init() {
	store.Register("lax", func(_ context.Context, u *url.URL, _ store.Config) (store.Store, error) {
		return laxStore{mem.New()}, nil
	})
	store.Register("held", func(_ context.Context, u *url.URL, _ store.Config) (store.Store, error) {
		s, ok := heldStores.Load(u.Host)
		if !ok {
			return nil, fmt.Errorf("no held store %q", u.Host)
		}
		return s.(*faults.Store), nil
	})
}

func TestNonEnforcingStoreIsRefused(t *testing.T) {
	src := writeTree(t, map[string]string{"f": "x"})
	code, _, errs := cli(t, "", "put", src, "lax://bucket")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "does not enforce conditional writes")
	assert.Contains(t, errs, "refusing to write")

	code, _, errs = cli(t, "", "probe", "lax://bucket")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "If-None-Match")

	out := ok(t, "probe", memURL())
	assert.Contains(t, out, "ok:")
	assert.Contains(t, out, "versioning: off", "a store that keeps no versions")
}

func TestPinUnpin(t *testing.T) {
	u := memURL()
	ok(t, "put", writeTree(t, map[string]string{"f": "x"}), u)
	var pin pinInfo
	require.NoError(t, json.Unmarshal([]byte(ok(t, "pin", "--json", "--ttl", "2h", u)), &pin))
	assert.Equal(t, uint64(1), pin.Seq)
	assert.Contains(t, ok(t, "pin", "--list", u), pin.Key)
	assert.Contains(t, ok(t, "unpin", u, pin.Key), "removed 1 pin")
	assert.NotContains(t, ok(t, "pin", "--list", u), pin.Key)
	ok(t, "pin", u)
	assert.Contains(t, ok(t, "unpin", "--gen", pin.Generation, u), "removed 1 pin")

	// Removing a pin that is already gone says so, and is not an error.
	assert.Equal(t, fmt.Sprintf("pin %s was already gone\nremoved 0 pins\n", pin.Key), ok(t, "unpin", u, pin.Key))
	assert.Equal(t, fmt.Sprintf("generation %s has no pins\nremoved 0 pins\n", pin.Generation), ok(t, "unpin", "--gen", pin.Generation, u))
	var got struct {
		Removed     []string `json:"removed"`
		AlreadyGone []string `json:"already_gone"`
	}
	require.NoError(t, json.Unmarshal([]byte(ok(t, "unpin", "--json", u, pin.Key)), &got))
	assert.Equal(t, []string{pin.Key}, got.AlreadyGone)
	assert.Empty(t, got.Removed)
}

func TestLeaseByHand(t *testing.T) {
	u := memURL()
	assert.Contains(t, ok(t, "lease", "status", u, "maint"), "free")
	var got leaseResult
	require.NoError(t, json.Unmarshal([]byte(ok(t, "lease", "acquire", "--json", u, "maint")), &got))
	assert.Equal(t, uint64(1), got.Token)

	code, _, errs := cli(t, "", "lease", "acquire", u, "maint")
	assert.Equal(t, exitHeld, code)
	assert.Contains(t, errs, "held by")
	assert.Contains(t, ok(t, "lease", "status", u, "maint"), "held")

	assert.Contains(t, ok(t, "lease", "release", u, "maint", "--token", "7"), "nothing to release")
	assert.Contains(t, ok(t, "lease", "release", u, "maint", "--token", "1"), "released token 1")
	assert.Contains(t, ok(t, "lease", "status", u, "maint"), "released")
	require.NoError(t, json.Unmarshal([]byte(ok(t, "lease", "acquire", "--json", u, "maint")), &got))
	assert.Equal(t, uint64(2), got.Token, "tokens grow")
}

func TestPutUnderLease(t *testing.T) {
	u := memURL()
	src := writeTree(t, map[string]string{"f": "x"})
	var got putResult
	require.NoError(t, json.Unmarshal([]byte(ok(t, "put", "--json", "--lease", "writer", src, u)), &got))
	assert.Equal(t, uint64(1), got.Fence)

	// Someone else holds the lease: exit 4.
	ok(t, "lease", "acquire", u, "writer")
	code, _, errs := cli(t, "", "put", "--lease", "writer", src, u)
	assert.Equal(t, exitHeld, code, errs)

	// A fence below the one its lease committed is refused: exit 6.
	const id = "s3://bucket/jobs/_lease/other"
	require.NoError(t, json.Unmarshal([]byte(ok(t, "put", "--json", "--fence", "5", "--fence-lease", id, src, u)), &got))
	assert.Equal(t, uint64(5), got.Fence)
	code, _, errs = cli(t, "", "put", "--fence", "4", "--fence-lease", id, src, u)
	assert.Equal(t, exitFenced, code, errs)
	assert.Contains(t, errs, "fenced")
}

func TestUpdateInProcess(t *testing.T) {
	u := memURL()
	for range 3 {
		ok(t, "update", u, "state/count", "--", "sh", "-c", `read n; echo $(( ${n:-0} + 1 ))`)
	}
	s, err := store.Open(context.Background(), u, store.Config{})
	require.NoError(t, err)
	rc, _, err := s.Get(context.Background(), "state/count")
	require.NoError(t, err)
	b, _ := io.ReadAll(rc)
	rc.Close()
	assert.Equal(t, "3\n", string(b))

	// A failing CMD writes nothing.
	code, _, errs := cli(t, "", "update", u, "state/count", "--", "sh", "-c", "exit 3")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "nothing was written")

	// The key may be the last element of the URL.
	ok(t, "update", u+"/flag", "--", "sh", "-c", `test "$COMMITPTR_EXISTS" = 0 && echo new`)
	rc, _, err = s.Get(context.Background(), "flag")
	require.NoError(t, err)
	b, _ = io.ReadAll(rc)
	rc.Close()
	assert.Equal(t, "new\n", string(b))
}

// TestUpdateRefusesDatasetKeys: update refuses every key and URL that
// reaches a dataset's own objects, wherever the dataset lies, and writes
// nothing.
func TestUpdateRefusesDatasetKeys(t *testing.T) {
	root := t.TempDir()
	u := "file://" + filepath.ToSlash(root)
	ok(t, "put", writeTree(t, map[string]string{"a": "1"}), u+"/ds")
	s, err := store.Open(context.Background(), u, store.Config{})
	require.NoError(t, err)
	keys := func() map[string]string {
		m := map[string]string{}
		for o, err := range store.List(context.Background(), s, "", "", "") {
			require.NoError(t, err)
			m[o.Key] = o.ETag
		}
		return m
	}
	before := keys()
	require.Contains(t, before, "ds/_pointer")
	for _, c := range []struct {
		args []string
		seg  string
	}{
		{[]string{u, "ds/_pointer"}, "_pointer"},
		{[]string{u, "ds/_lease/job"}, "_lease"},
		{[]string{u, "a/b/_pin/x"}, "_pin"},
		{[]string{u + "/ds", "_gen/x/_manifest"}, "_gen"},
		{[]string{u + "/ds/_pointer"}, "_pointer"},
		{[]string{u + "/ds/_probe", "x"}, "_probe"},
	} {
		args := append(append([]string{"update"}, c.args...), "--", "sh", "-c", "echo x")
		code, _, errs := cli(t, "", args...)
		assert.Equal(t, exitUsage, code, "%v: %s", c.args, errs)
		assert.Contains(t, errs, fmt.Sprintf("segment %q of a dataset's own layout", c.seg), c.args)
	}
	assert.Equal(t, before, keys(), "nothing was written")
}

// TestUpdateUnsettledWrite: the first write is held in the network, and
// update has to stop while it may still land: CMD fails when re-run, or
// the attempts run out. The exit status is 5 and the message does not say
// that nothing was written, because the held write lands afterwards.
func TestUpdateUnsettledWrite(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "ran")
	for _, tt := range []struct{ name, flag, script string }{
		{"CMD fails when re-run", "--attempts=50", `test -e ` + mark + ` && exit 3; touch ` + mark + `; read n; echo $((n + 1))`},
		{"attempts run out", "--attempts=1", `read n; echo $((n + 1))`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			name := uuid.NewString()[:8]
			fs := faults.NewStore(mem.New())
			heldStores.Store(name, fs)
			_, err := fs.Put(ctx, "counter", strings.NewReader("0\n"), store.PutOptions{})
			require.NoError(t, err)
			fs.Add(faults.Rule{Op: store.OpPut, Key: "counter", Kind: faults.Late, Times: 1})

			code, _, errs := cli(t, "", "update", "held://"+name, "counter", tt.flag, "--", "sh", "-c", tt.script)
			assert.Equal(t, exitUnknown, code, errs)
			assert.NotContains(t, errs, "nothing was written")
			assert.Contains(t, errs, "may still land")
			require.NoError(t, fs.Release())
			rc, _, err := fs.Get(ctx, "counter")
			require.NoError(t, err)
			b, _ := io.ReadAll(rc)
			rc.Close()
			assert.Equal(t, "1\n", string(b), "the held write landed after update exited")
		})
	}
}

func TestGCDryRun(t *testing.T) {
	u := memURL()
	for i := range 4 {
		ok(t, "put", writeTree(t, map[string]string{"f": fmt.Sprint(i)}), u)
	}
	out := ok(t, "gc", "--dry-run", "--keep", "1", "--grace", "0", u)
	assert.Contains(t, out, "dry run at seq 4")
	assert.Contains(t, out, "would delete (superseded): 2 generations")
	var log logResult
	require.NoError(t, json.Unmarshal([]byte(ok(t, "log", "--json", u)), &log))
	assert.Len(t, log.Commits, 4, "a dry run deletes nothing")

	ok(t, "gc", "--keep", "1", "--grace", "0", u)
	out = ok(t, "log", u)
	assert.Contains(t, out, "older history collected")
	assert.Contains(t, ok(t, "verify", "--all", u), ": ok")

	ok(t, "lease", "acquire", u, "gc")
	code, _, errs := cli(t, "", "gc", u)
	assert.Equal(t, exitHeld, code, "another collector holds the lease")
	assert.Contains(t, errs, "held by")
	assert.Contains(t, ok(t, "gc", "--dry-run", u), "dry run at seq 4", "a dry run takes no lease")
}

func TestExitCodes(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want int
	}{
		{"nil", live, nil, exitOK},
		{"plain", live, &runError{errors.New("x")}, exitError},
		{"cobra", live, errors.New(`unknown command "x"`), exitUsage},
		{"usage", live, &runError{usagef("bad")}, exitUsage},
		{"lost", live, &runError{&commit.ConflictError{Winner: "g", Seq: 2}}, exitLost},
		{"held", live, &runError{&lease.HeldError{Name: "x"}}, exitHeld},
		{"gc busy", live, &runError{fmt.Errorf("%w: x", gc.ErrBusy)}, exitHeld},
		{"unknown", live, &runError{fmt.Errorf("%w: x", commit.ErrCommitUnknown)}, exitUnknown},
		{"fenced", live, &runError{&commit.FencedError{Mine: 1, Committed: 2}}, exitFenced},
		{"stale", live, &runError{commit.ErrStale}, exitFenced},
		{"lease lost", live, &runError{lease.ErrLost}, exitFenced},
		{"interrupted", cancelled, &runError{context.Canceled}, exitInterrupted},
		{"interrupted while waiting", cancelled, &runError{fmt.Errorf("%w (while waiting: %w)", context.Canceled, &lease.HeldError{})}, exitInterrupted},
		{"unknown beats interrupted", cancelled, &runError{fmt.Errorf("%w: %w", commit.ErrCommitUnknown, context.Canceled)}, exitUnknown},
		{"cancel without signal", live, &runError{context.Canceled}, exitError},
		{"child status", live, &runError{&statusError{code: 42}}, 42},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, exitCode(tt.ctx, tt.err))
		})
	}
}

func TestHelpDocumentsExitStatus(t *testing.T) {
	root := newRootCommand(nil, io.Discard, io.Discard)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" || c.Parent() != nil && c.Parent().Name() == "completion" || c.IsAdditionalHelpTopicCommand() {
			return
		}
		assert.Contains(t, c.Long, "EXIT STATUS", "help of %q", c.CommandPath())
		if c.Runnable() && c.Parent() != nil {
			assert.NotEmpty(t, c.Example, "examples of %q", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// TestDocsUpToDate fails when docs/cli differs from what gen-docs writes.
func TestDocsUpToDate(t *testing.T) {
	dir := t.TempDir()
	ok(t, "gen-docs", dir)
	want := readTree(t, dir)
	got := readTree(t, filepath.Join("..", "..", "docs", "cli"))
	for name, body := range want {
		assert.Equal(t, body, got[name], "docs/cli/%s is out of date: run `go run ./cmd/publish gen-docs docs/cli`", name)
	}
	for name := range got {
		_, ok := want[name]
		assert.True(t, ok, "docs/cli/%s documents no command: run `go run ./cmd/publish gen-docs docs/cli`", name)
	}
}

func TestRunInProcess(t *testing.T) {
	u := memURL()
	code, out, errs := cli(t, "", "run", "--lease", "job", u, "--", "sh", "-c", `echo "fence=$COMMITPTR_FENCE lease=$COMMITPTR_LEASE"; exit 7`)
	assert.Equal(t, 7, code, "run exits with CMD's status: %s", errs)
	assert.Equal(t, "fence=1 lease=job\n", out)
	assert.Empty(t, errs, "CMD's status is not an error of run's")

	code, out, _ = cli(t, "", "run", "--lease", "job", u, "--", "sh", "-c", `echo "fence=$COMMITPTR_FENCE"`)
	assert.Equal(t, 0, code)
	assert.Equal(t, "fence=2\n", out, "the lease was released, and the next holder gets a larger token")

	ok(t, "lease", "acquire", u, "job")
	code, _, errs = cli(t, "", "run", "--lease", "job", u, "--", "true")
	assert.Equal(t, exitHeld, code)
	assert.Contains(t, errs, "held by")

	code, _, errs = cli(t, "", "run", "--lease", "other", u, "--", "/nonexistent/cmd")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errs, "start /nonexistent/cmd")
}

func TestNonEnforcingStoreIsRefusedEverywhere(t *testing.T) {
	for _, args := range [][]string{
		{"update", "lax://b", "counter", "--", "echo", "1"},
		{"run", "--lease", "job", "lax://b", "--", "true"},
		{"lease", "acquire", "lax://b", "job"},
		{"put", "--lease", "job", writeTree(t, map[string]string{"f": "x"}), "lax://b"},
	} {
		code, out, errs := cli(t, "", args...)
		assert.Equal(t, exitError, code, "%v: %s%s", args, out, errs)
		assert.Contains(t, errs, "does not enforce conditional writes", args)
	}
}

func TestBench(t *testing.T) {
	code, _, stderr := cli(t, "", "bench", "--scenario", "nope", memURL())
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, `unknown scenario "nope"`)

	out := ok(t, "bench", "--json", "--scenario", "commit,lease,gc", "--commits", "3", "--files", "4",
		"--handoffs", "2", "--gc-gens", "5", "--gc-objects", "2", memURL())
	var results []bench.Result
	require.NoError(t, json.Unmarshal([]byte(out), &results))
	require.Len(t, results, 3)
	assert.Equal(t, 3, results[0].Ops)
	assert.Equal(t, map[string]float64{"get": 1, "put": 6}, results[0].Requests, "4 files commit at the floor of 4+3 requests")
	assert.EqualValues(t, 4*3, results[2].Extra["objects_deleted"])
}

// TestCatObject: cat --object prints an object that update manages, named
// by URL and KEY or by a URL ending in the key; it refuses a dataset's own
// objects as update does, and names the key of a missing object.
func TestCatObject(t *testing.T) {
	for _, u := range []string{memURL(), "file://" + filepath.ToSlash(t.TempDir())} {
		t.Run(strings.SplitN(u, ":", 2)[0], func(t *testing.T) {
			for range 2 {
				ok(t, "update", u, "state/counter", "--", "sh", "-c", `read n; echo $(( ${n:-0} + 1 ))`)
			}
			assert.Equal(t, "2\n", ok(t, "cat", "--object", u, "state/counter"))
			assert.Equal(t, "2\n", ok(t, "cat", "--object", u+"/state/counter"))

			ok(t, "put", writeTree(t, map[string]string{"a": "1"}), u+"/ds")
			for _, args := range [][]string{{u, "ds/_pointer"}, {u + "/ds/_pointer"}, {u + "/ds/_gen", "x"}} {
				code, out, errs := cli(t, "", append([]string{"cat", "--object"}, args...)...)
				assert.Equal(t, exitUsage, code, "%v: %s", args, errs)
				assert.Contains(t, errs, "cat --object refuses it", args)
				assert.Empty(t, out, args)
			}

			code, out, errs := cli(t, "", "cat", "--object", u, "state/none")
			assert.Equal(t, exitError, code, errs)
			assert.Contains(t, errs, `object "state/none"`)
			assert.Empty(t, out)
		})
	}
	code, _, errs := cli(t, "", "cat", "--object", "--seq", "1", "mem://x", "k")
	assert.Equal(t, exitUsage, code, errs)
	code, _, errs = cli(t, "", "cat", "mem://x")
	assert.Equal(t, exitUsage, code, errs)
	assert.Contains(t, errs, "--object")
}

// TestUpdateHelpShExample runs each sh example of 'publish update --help'
// twice on a fresh key: the first run has no object and an empty stdin,
// and must still write a value the second run builds on.
func TestUpdateHelpShExample(t *testing.T) {
	ran := 0
	for line := range strings.Lines(newUpdateCommand(&globalOptions{}).Example) {
		_, script, found := strings.Cut(strings.TrimSpace(line), " -- sh -c '")
		if !found {
			continue
		}
		script, found = strings.CutSuffix(script, "'")
		require.True(t, found, "example %q: want sh -c '...'", line)
		u := memURL()
		for range 2 {
			ok(t, "update", u, "counter", "--", "sh", "-c", script)
		}
		assert.Equal(t, "2\n", ok(t, "cat", "--object", u, "counter"), "example %q", line)
		ran++
	}
	require.Positive(t, ran, "update --help has no sh example")
}
