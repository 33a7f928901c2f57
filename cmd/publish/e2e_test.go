package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// target is a kind of store the binary runs against.
type target struct {
	name string
	// url returns a fresh, empty dataset URL.
	url func(t *testing.T) string
	// flags are global flags for the binary; env its extra environment.
	flags []string
	env   []string
	// open opens the dataset's store in the test, for inspection.
	open func(t *testing.T, url string) store.Store
	// secret must never appear in the binary's output.
	secret string
}

func targets(t *testing.T) []target {
	fsTarget := target{
		name: "fs",
		url:  func(t *testing.T) string { return "file://" + filepath.Join(t.TempDir(), "store") },
		open: func(t *testing.T, url string) store.Store {
			s, err := store.Open(context.Background(), url, store.Config{})
			require.NoError(t, err)
			return s
		},
	}
	fake := testenv.Gofakes3(t)
	return []target{
		fsTarget,
		remoteTarget("s3", "s3", testenv.S3(t)),
		remoteTarget("s3-gofakes3", "s3", fake),
		remoteTarget("minio-gofakes3", "minio", fake),
		gcsTarget(testenv.GCS(t)),
		azblobTarget(testenv.Azurite(t)),
	}
}

// gcsTarget is the gcs driver against the Cloud Storage emulator, named
// by --endpoint as a user would; the binary gets no credentials.
func gcsTarget(srv *testenv.GCSServer) target {
	return target{
		name:  "gcs",
		url:   func(t *testing.T) string { return "gs://" + srv.NewBucket(t) + "/datasets/daily" },
		flags: []string{"--endpoint", srv.Endpoint},
		open: func(t *testing.T, url string) store.Store {
			s, err := store.Open(context.Background(), url, store.Config{Endpoint: srv.Endpoint})
			require.NoError(t, err)
			return s
		},
	}
}

// azblobTarget is the azblob driver against Azurite: the connection string
// in the environment holds the account key, --endpoint names the service.
func azblobTarget(srv *testenv.AzuriteServer) target {
	srv.UseCredentials()
	return target{
		name:   "azblob",
		url:    func(t *testing.T) string { return "az://" + srv.NewContainer(t) + "/datasets/daily" },
		flags:  []string{"--endpoint", srv.Endpoint},
		env:    srv.Env(),
		secret: testenv.AzuriteKey,
		open: func(t *testing.T, url string) store.Store {
			s, err := store.Open(context.Background(), url, store.Config{Endpoint: srv.Endpoint})
			require.NoError(t, err)
			return s
		},
	}
}

// remoteTarget is the driver of scheme against srv.
func remoteTarget(name, scheme string, srv *testenv.S3Server) target {
	srv.UseCredentials() // for the stores the test itself opens; the binary gets srv.Env()
	return target{
		name:   name,
		url:    func(t *testing.T) string { return scheme + "://" + srv.NewBucket(t) + "/datasets/daily" },
		flags:  []string{"--endpoint", srv.Endpoint, "--path-style"},
		env:    srv.Env(),
		secret: srv.SecretKey,
		open: func(t *testing.T, url string) store.Store {
			s, err := store.Open(context.Background(), url, store.Config{Endpoint: srv.Endpoint, PathStyle: true})
			require.NoError(t, err)
			return s
		},
	}
}

// result is one run of the binary.
type result struct {
	code           int
	stdout, stderr string
}

// command prepares the binary with the target's flags and environment.
func (tg target) command(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testenv.PublishBinary(t), append(append([]string{}, tg.flags...), args...)...)
	cmd.Env = append(os.Environ(), tg.env...)
	return cmd
}

func (tg target) run(t *testing.T, args ...string) result {
	t.Helper()
	cmd := tg.command(t, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run publish %v: %v", args, err)
	}
	if tg.secret != "" {
		assert.NotContains(t, r.stdout+r.stderr, tg.secret, "credentials must never be printed")
	}
	return r
}

func (tg target) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := tg.run(t, args...)
	require.Equal(t, 0, r.code, "publish %v\nstdout: %s\nstderr: %s", args, r.stdout, r.stderr)
	return r.stdout
}

func readObject(t *testing.T, s store.Store, key string) []byte {
	t.Helper()
	rc, _, err := s.Get(context.Background(), key)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return b
}

// TestConcurrentPuts: 8 processes publish different inputs at once. Each
// exits 0 or 3; the dataset ends up holding exactly one input, and the log
// lists every winner.
func TestConcurrentPuts(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			const writers = 8
			url := tg.url(t)
			inputs := make([]map[string]string, writers)
			dirs := make([]string, writers)
			for i := range writers {
				inputs[i] = map[string]string{
					"writer.txt":                   strconv.Itoa(i),
					"data/shared.csv":              "same,for,all\n",
					fmt.Sprintf("data/only-%d", i): strings.Repeat("x", 100*i),
				}
				dirs[i] = writeTree(t, inputs[i])
			}
			results := make([]result, writers)
			var wg sync.WaitGroup
			for i := range writers {
				wg.Go(func() { results[i] = tg.run(t, "--json", "put", "-m", "writer "+strconv.Itoa(i), dirs[i], url) })
			}
			wg.Wait()

			winners := map[string]int{} // generation → writer
			var lastSeq uint64
			last := -1
			for i, r := range results {
				require.Contains(t, []int{exitOK, exitLost}, r.code, "writer %d: %s", i, r.stderr)
				if r.code == exitLost {
					assert.Contains(t, r.stderr, "lost the race", "writer %d", i)
					continue
				}
				var res putResult
				require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
				winners[res.Generation] = i
				if res.Seq > lastSeq {
					lastSeq, last = res.Seq, i
				}
			}
			require.NotEmpty(t, winners)

			dest := filepath.Join(t.TempDir(), "out")
			tg.ok(t, "get", url, dest)
			assert.Equal(t, inputs[last], readTree(t, dest), "the dataset holds exactly the last winner's input")

			var log logResult
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "--json", "log", url)), &log))
			assert.Len(t, log.Commits, len(winners), "one commit per winner, nothing else")
			for _, c := range log.Commits {
				i, ok := winners[c.Generation]
				assert.True(t, ok, "log lists generation %s, which no put reported", c.Generation)
				assert.Equal(t, "writer "+strconv.Itoa(i), c.Message)
			}
			tg.ok(t, "verify", "--all", url)
		})
	}
}

// TestRunMutualExclusion: two run processes on one lease never run their
// commands at the same time, and a third that does not wait exits 4.
func TestRunMutualExclusion(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url, scratch := tg.url(t), t.TempDir()
			// CMD proves exclusion with a local mkdir lock and records when
			// it ran.
			script := fmt.Sprintf(`mkdir %[1]s/lock || exit 99; echo "$COMMITPTR_FENCE" >> %[1]s/fences; sleep 0.7; rmdir %[1]s/lock`, scratch)
			var wg sync.WaitGroup
			results := make([]result, 2)
			for i := range results {
				wg.Go(func() {
					results[i] = tg.run(t, "run", "--lease", "job", "--wait", "30s", "--ttl", "5s", url, "--", "sh", "-c", script)
				})
			}
			time.Sleep(300 * time.Millisecond)
			busy := tg.run(t, "run", "--lease", "job", url, "--", "true")
			wg.Wait()
			for i, r := range results {
				assert.Equal(t, 0, r.code, "run %d: %s", i, r.stderr)
			}
			if busy.code != exitHeld {
				// The busy probe may have slipped in between the two; then
				// it ran "true" under the lease, which is fine.
				assert.Equal(t, 0, busy.code, busy.stderr)
			} else {
				assert.Contains(t, busy.stderr, "held by")
			}
			fences, err := os.ReadFile(filepath.Join(scratch, "fences"))
			require.NoError(t, err)
			lines := strings.Fields(string(fences))
			require.Len(t, lines, 2)
			assert.NotEqual(t, lines[0], lines[1], "each holder gets its own token")
			st := tg.ok(t, "--json", "lease", "status", url, "job")
			assert.Contains(t, st, `"state": "released"`)
		})
	}
}

// TestRunLeaseStolen: when the lease is taken over, CMD gets SIGTERM and
// run exits 6.
func TestRunLeaseStolen(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url, scratch := tg.url(t), t.TempDir()
			ready, got := filepath.Join(scratch, "ready"), filepath.Join(scratch, "got")
			script := fmt.Sprintf(`trap 'echo TERM > %s; exit 143' TERM; touch %s; while :; do sleep 0.1; done`, got, ready)
			cmd := tg.command(t, "run", "--lease", "job", "--ttl", "3s", "--grace", "1s", url, "--", "sh", "-c", script)
			var errb bytes.Buffer
			cmd.Stderr = &errb
			require.NoError(t, cmd.Start())
			waitFor(t, ready, 15*time.Second)

			// Steal the lease: overwrite it as another holder would after
			// taking it over.
			s := tg.open(t, url)
			body := `{"owner":"thief","token":99,"ttl_ms":60000,"released":false,"write_id":"stolen"}`
			_, err := s.Put(context.Background(), "_lease/job", strings.NewReader(body), store.PutOptions{})
			require.NoError(t, err)

			err = cmd.Wait()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, errb.String())
			assert.Equal(t, exitFenced, ee.ExitCode(), errb.String())
			assert.Contains(t, errb.String(), "lost")
			b, err := os.ReadFile(got)
			require.NoError(t, err, "CMD must have received SIGTERM")
			assert.Equal(t, "TERM\n", string(b))
			// The thief's lease is untouched: run does not release what it
			// no longer holds.
			assert.Contains(t, string(readObject(t, s, "_lease/job")), `"thief"`)
		})
	}
}

func waitFor(t *testing.T, path string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		require.True(t, time.Now().Before(deadline), "timed out waiting for %s", path)
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConcurrentUpdates: 8 processes × 20 updates of one counter lose no
// increment.
func TestConcurrentUpdates(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			const procs, each = 8, 10
			url := tg.url(t)
			var wg sync.WaitGroup
			for p := range procs {
				wg.Go(func() {
					for i := range each {
						r := tg.run(t, "update", "--attempts", "1000", url, "counter", "--", "sh", "-c", `read n; echo $(( ${n:-0} + 1 ))`)
						if !assert.Equal(t, 0, r.code, "process %d update %d: %s", p, i, r.stderr) {
							return
						}
					}
				})
			}
			wg.Wait()
			got := strings.TrimSpace(string(readObject(t, tg.open(t, url), "counter")))
			assert.Equal(t, strconv.Itoa(procs*each), got)
		})
	}
}

// TestBadInput: clear messages, the right exit status, and nothing lost.
func TestBadInput(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			src := writeTree(t, map[string]string{"a.txt": "A"})
			tg.ok(t, "put", src, url)

			r := tg.run(t, "put", filepath.Join(src, "missing"), url)
			assert.Equal(t, exitError, r.code)
			assert.Contains(t, r.stderr, "missing: no such file or directory")

			r = tg.run(t, "ls", "nope://x")
			assert.Equal(t, exitUsage, r.code)
			assert.Contains(t, r.stderr, `unknown URL scheme "nope"`)

			parentFile := filepath.Join(t.TempDir(), "file")
			require.NoError(t, os.WriteFile(parentFile, nil, 0o644))
			r = tg.run(t, "get", url, filepath.Join(parentFile, "dest"))
			assert.Equal(t, exitError, r.code)
			assert.Contains(t, r.stderr, "not a directory")

			// A corrupt pointer: every command says so and names the key;
			// nothing changes.
			s := tg.open(t, url)
			good := readObject(t, s, pointer.Key)
			bad := good[:len(good)/2]
			_, err := s.Put(context.Background(), pointer.Key, bytes.NewReader(bad), store.PutOptions{})
			require.NoError(t, err)
			for _, args := range [][]string{{"ls", url}, {"put", src, url}, {"gc", url}, {"verify", url}} {
				r := tg.run(t, args...)
				assert.Equal(t, exitError, r.code, "%v: %s", args, r.stderr)
				assert.Contains(t, r.stderr, "corrupt", args)
				assert.Contains(t, r.stderr, "_pointer", args)
			}
			assert.Equal(t, bad, readObject(t, s, pointer.Key))
			// The data is still there for an operator to repair from.
			var n int
			for o, err := range store.List(context.Background(), s, generation.Dir, "", "") {
				require.NoError(t, err)
				if strings.HasSuffix(o.Key, "/a.txt") {
					n++
				}
			}
			assert.Equal(t, 1, n)
		})
	}
}

// Ctrl-C during staging with --no-resume discards the generation and says
// so (without it, put keeps what it staged: TestInterruptedPutResumes).
func TestInterruptedPutWithoutResumeDiscards(t *testing.T) {
	tg := targets(t)[0]
	url := tg.url(t)
	files := map[string]string{}
	for i := range 400 {
		files[fmt.Sprintf("f/%04d", i)] = strings.Repeat("y", 1000)
	}
	src := writeTree(t, files)
	cmd := tg.command(t, "-v", "put", "--no-resume", "--concurrency", "1", src, url)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var log bytes.Buffer
	buf := make([]byte, 4096)
	for !strings.Contains(log.String(), "staging") {
		n, err := stderr.Read(buf)
		log.Write(buf[:n])
		require.NoError(t, err, log.String())
	}
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	rest, _ := io.ReadAll(stderr)
	log.Write(rest)
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, log.String())
	assert.Equal(t, exitInterrupted, ee.ExitCode(), log.String())
	assert.Contains(t, log.String(), "interrupted; staged generation")
	assert.Contains(t, log.String(), "was discarded")

	s := tg.open(t, url)
	for o, err := range store.List(context.Background(), s, "", "", "") {
		require.NoError(t, err)
		assert.False(t, strings.HasPrefix(o.Key, generation.Dir) || o.Key == pointer.Key, "left behind: %s", o.Key)
	}
}

// TestEndToEndCommands runs the read commands against both stores.
func TestEndToEndCommands(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			tg.ok(t, "probe", url)
			v1 := map[string]string{"a.txt": "one", "dir/b.txt": "two"}
			tg.ok(t, "put", "--compress", "zstd", writeTree(t, v1), url)
			tg.ok(t, "put", writeTree(t, map[string]string{"a.txt": "uno"}), url)
			assert.Equal(t, "uno", tg.ok(t, "cat", url, "a.txt"))
			assert.Equal(t, "two", tg.ok(t, "cat", "--seq", "1", url, "dir/b.txt"))
			assert.Contains(t, tg.ok(t, "diff", url, "1"), "- dir/b.txt")
			tg.ok(t, "rollback", url, "--to", "1")
			dest := filepath.Join(t.TempDir(), "out")
			tg.ok(t, "-vv", "get", url, dest)
			assert.Equal(t, v1, readTree(t, dest))
			assert.Contains(t, tg.ok(t, "verify", "--all", url), ": ok")
			assert.Contains(t, tg.ok(t, "gc", "--dry-run", url), "dry run at seq 3")
			tg.ok(t, "gc", url)
		})
	}
}

// TestVerifyWrongLength: verify reports every object whose length differs
// from its manifest's size, longer or shorter, stored as is (by its
// stored length) or zstd-encoded (by its decoded length), with its path,
// key and the lengths; get refuses the same dataset.
func TestVerifyWrongLength(t *testing.T) {
	const body = "hello, world"
	enc, err := zstd.NewWriter(nil)
	require.NoError(t, err)
	defer enc.Close()
	for _, tg := range targets(t) {
		for _, compress := range []string{"none", "zstd"} {
			t.Run(tg.name+"/"+compress, func(t *testing.T) {
				ctx := context.Background()
				url := tg.url(t)
				tg.ok(t, "put", "--compress", compress, writeTree(t, map[string]string{"longer": body, "shorter": body, "intact": body}), url)
				s := tg.open(t, url)
				snap, err := commit.New(s).Open(ctx)
				require.NoError(t, err)
				replace := map[string]string{"longer": body + "!", "shorter": body[:len(body)-1]}
				want := map[string]string{
					"longer":  fmt.Sprintf("is longer than the %d bytes its manifest says", len(body)),
					"shorter": fmt.Sprintf("has %d bytes, its manifest says %d", len(body)-1, len(body)),
				}
				if compress == "none" {
					want["longer"] = fmt.Sprintf("is stored with %d bytes, its manifest says %d", len(body)+1, len(body))
					want["shorter"] = fmt.Sprintf("is stored with %d bytes, its manifest says %d", len(body)-1, len(body))
				}
				keys := map[string]string{}
				for path, content := range replace {
					e, ok := snap.Manifest.Find(path)
					require.True(t, ok)
					keys[path] = e.Key
					stored := []byte(content)
					if compress == "zstd" {
						stored = enc.EncodeAll(stored, nil)
					}
					_, err := s.Put(ctx, e.Key, bytes.NewReader(stored), store.PutOptions{})
					require.NoError(t, err)
				}
				r := tg.run(t, "verify", url)
				assert.Equal(t, exitError, r.code, r.stderr)
				assert.Contains(t, r.stdout, "2 problems")
				for path := range replace {
					assert.Contains(t, r.stdout, fmt.Sprintf("FAIL seq 1 %s (key %q)", path, keys[path]))
					assert.Contains(t, r.stdout, want[path])
				}
				assert.NotContains(t, r.stdout, "FAIL seq 1 intact")
				r = tg.run(t, "get", url, filepath.Join(t.TempDir(), "out"))
				assert.Equal(t, exitError, r.code, r.stderr)
				assert.Contains(t, r.stderr, "checksum")
			})
		}
	}
}
