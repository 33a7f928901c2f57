// Package testenv is what tests run against: one fresh, empty store per
// driver (Stores, EachStore), and the servers behind the drivers that speak
// to one, each on a free loopback port of its own:
//
//   - versitygw with its POSIX backend, the reference S3 server (S3,
//     VersionedS3; IAMS3 with versitygw's IAM service, which authorizes
//     its users by IAM policies), and gofakes3 with its in-memory backend,
//     a second implementation that deviates in places (Gofakes3);
//   - fake-gcs-server, the Cloud Storage emulator (GCS);
//   - Azurite, the Azure Storage emulator (Azurite).
//
// A server starts on first use and serves the whole test process. If it
// cannot be built, installed or started, the test that needs it fails; it
// never skips. Main stops every server that started, and removes what
// PublishBinary built: a test package whose tests use any of them runs
// `func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }`.
//
// versitygw and fake-gcs-server are Go modules pinned in the tools module
// (tools/go.mod), built into .cache/bin on first use under a file lock, so
// that test packages running in parallel build each once; Azurite is an npm
// package pinned in tools/azurite, installed into .cache/azurite the same
// way. $COMMITPTR_VERSITYGW, $COMMITPTR_FAKE_GCS_SERVER and
// $COMMITPTR_AZURITE, if set, name the executables to use instead.
package testenv

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// Main runs the tests, then stops every server that started and removes
// what PublishBinary built. The servers' processes are also killed when
// the test binary exits (procattr.DieWithParent), but only Main removes
// their files. The tests, and the binaries they start, have a cache
// directory of their own (XDG_CACHE_HOME), for put's journals and the
// manifest cache, removed at the end.
func Main(m *testing.M) int {
	cache, err := os.MkdirTemp("", "commitptr-test-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer os.RemoveAll(cache) //nolint:errcheck // a temporary directory
	// Go's build cache is found in the cache directory too; the go build
	// of PublishBinary keeps using the developer's.
	if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil && os.Getenv("GOCACHE") == "" {
		os.Setenv("GOCACHE", strings.TrimSpace(string(out))) //nolint:errcheck // cannot fail for this name
	}
	os.Setenv("XDG_CACHE_HOME", cache) //nolint:errcheck // cannot fail for this name
	code := m.Run()
	startedMu.Lock()
	servers := started
	started = nil
	startedMu.Unlock()
	for _, s := range servers {
		s.Stop()
	}
	removeBinaries()
	return code
}

var (
	startedMu sync.Mutex
	started   []interface{ Stop() }
)

// shared is a server of the whole test process, started on first use.
type shared[S interface{ Stop() }] struct {
	once sync.Once
	srv  S
	err  error
}

// get returns the server, starting it with start on first use; it fails t,
// saying what could not start, if the server did not.
func (s *shared[S]) get(t testing.TB, start func() (S, error), what string) S {
	t.Helper()
	s.once.Do(func() {
		if s.srv, s.err = start(); s.err == nil {
			startedMu.Lock()
			started = append(started, s.srv)
			startedMu.Unlock()
		}
	})
	if s.err != nil {
		t.Fatalf("testenv: %s: %v", what, s.err)
	}
	return s.srv
}

// kill kills the process cmd started, if it did, and waits for it.
func kill(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil {
		// Kill fails only if the process is gone already; Wait reports the kill.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// awaitHTTP waits, for up to 20 s, until a GET of url gets an answer that
// accept (if set) accepts, and returns the last error if none did.
func awaitHTTP(url string, accept func(*http.Response) error) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if accept == nil {
				return nil
			}
			if err = accept(resp); err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newName returns a fresh bucket or container name.
func newName() string {
	return "t-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:20]
}

// freePort returns a loopback address with a port that was free a moment
// ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// goTool returns the path of the executable name: $env if set, else
// .cache/bin/name at the module root, built from pkg of the tools module
// if it is missing.
func goTool(env, name, pkg string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, ".cache", "bin", name)
	return bin, onceLocked(bin, bin+".lock", func() error {
		cmd := exec.Command("go", "build", "-o", bin+".tmp", pkg)
		cmd.Dir = filepath.Join(root, "tools")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s from tools/go.mod: %v\n%s", name, err, out)
		}
		return os.Rename(bin+".tmp", bin)
	})
}

// onceLocked runs build unless path exists, holding an exclusive lock on
// the file lock meanwhile, so that test packages running in parallel make
// path once.
func onceLocked(path, lock string, build func() error) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	if _, err := os.Stat(path); err == nil {
		return nil // another package made it while we waited
	}
	return build()
}

// moduleRoot returns the directory of the module, which holds the tools
// module (tools/go.mod).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: cannot find the module root (a directory with tools/go.mod)")
		}
		dir = parent
	}
}
