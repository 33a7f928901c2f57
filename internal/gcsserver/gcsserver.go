// Package gcsserver runs fake-gcs-server, the Cloud Storage emulator, on a
// free loopback port for tests, with its in-memory backend.
//
// fake-gcs-server is a Go module pinned in the tools module (tools/go.mod)
// and built into .cache/bin on first use, under a file lock so that test
// packages running in parallel build it once. It runs as a process of its
// own: its module cannot join the main module's build without pulling its
// dependencies (a gRPC server, Pub/Sub, a filesystem backend) into go.mod.
//
// A test that needs it calls Shared. If the server cannot be built or
// started, the test fails; it never skips.
package gcsserver

import (
	"bytes"
	"context"
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

	"github.com/commitptr/commitptr/internal/procattr"
	"github.com/commitptr/commitptr/store/storetest"
)

// Version is the fake-gcs-server pinned in tools/go.mod.
const Version = "v1.56.1"

// Server is a running fake-gcs-server.
type Server struct {
	// Endpoint is its base URL, http://127.0.0.1:port.
	Endpoint string
	// Conformance declares the capabilities the gcs driver lacks on this
	// server, for storetest.RunWith.
	Conformance storetest.Options
	cmd         *exec.Cmd
}

// lacks is what fake-gcs-server does not implement that the driver claims
// on Cloud Storage: the one place the suite learns of its gaps.
var lacks = map[storetest.Capability]string{
	storetest.ConditionalDelete: "fake-gcs-server " + Version + " ignores ifGenerationMatch on objects.delete and deletes unconditionally; commitptr never relies on a conditional delete",
	storetest.DelimiterPages:    "fake-gcs-server " + Version + " hands out the entries of a delimited listing in pages of one out of lexical order (d/d/ before d/c); commitptr's one delimited listing (gc's lease names) does not depend on the order",
}

var (
	once      sync.Once
	shared    *Server
	sharedErr error
)

// Shared returns the process-wide server, starting it on first use. It
// fails t if the server cannot be started. Main (or s3server.Main) stops
// it; the process is also killed when the test binary exits.
func Shared(t testing.TB) *Server {
	t.Helper()
	once.Do(func() { shared, sharedErr = Start() })
	if sharedErr != nil {
		t.Fatalf("gcsserver: the Cloud Storage emulator is required and could not start (run `make test`, which builds it): %v", sharedErr)
	}
	return shared
}

// Main runs the tests and stops the shared server afterwards.
func Main(m *testing.M) int {
	code := m.Run()
	StopShared()
	return code
}

// StopShared stops the shared server if it was started, for TestMain
// (s3server.Main calls it).
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}

// Start builds the binary if needed and starts a server.
func Start() (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{Endpoint: "http://127.0.0.1:" + port, Conformance: storetest.Options{Lacks: lacks}}
	// -public-host 127.0.0.1 routes XML API downloads (GET /bucket/object)
	// sent to 127.0.0.1:port, which is how the client reads objects.
	s.cmd = exec.Command(bin, "-scheme", "http", "-host", "127.0.0.1", "-port", port,
		"-backend", "memory", "-public-host", "127.0.0.1", "-external-url", s.Endpoint, "-log-level", "error")
	// No credentials or project of the machine reach the emulator.
	s.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	s.cmd.Stdout = os.Stderr
	s.cmd.Stderr = os.Stderr
	s.cmd.SysProcAttr = procattr.DieWithParent()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(s.Endpoint + "/_internal/healthcheck")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
			err = fmt.Errorf("healthcheck: %s", resp.Status)
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("fake-gcs-server did not answer on %s: %w", s.Endpoint, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// NewBucket creates a fresh, empty bucket and returns its name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := "t-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:20]
	body := fmt.Sprintf(`{"name":%q}`, name)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint+"/storage/v1/b?project=test", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("gcsserver: create bucket: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("gcsserver: create bucket %s: %s", name, resp.Status)
	}
	return name
}

// Stop stops the server.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		// Kill fails only if the process is gone already; Wait reports the kill.
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// Binary returns the path of the fake-gcs-server binary:
// $COMMITPTR_FAKE_GCS_SERVER if set, else .cache/bin/fake-gcs-server at
// the module root, built from the tools module if it is missing.
func Binary() (string, error) {
	if p := os.Getenv("COMMITPTR_FAKE_GCS_SERVER"); p != "" {
		return p, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, ".cache", "bin", "fake-gcs-server")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(bin+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // another package built it while we waited
	}
	cmd := exec.Command("go", "build", "-o", bin+".tmp", "github.com/fsouza/fake-gcs-server")
	cmd.Dir = filepath.Join(root, "tools")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build fake-gcs-server from tools/go.mod: %v\n%s", err, out)
	}
	return bin, os.Rename(bin+".tmp", bin)
}

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
			return "", errors.New("gcsserver: cannot find the module root (a directory with tools/go.mod)")
		}
		dir = parent
	}
}
