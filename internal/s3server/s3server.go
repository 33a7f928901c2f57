// Package s3server runs a real S3 server (versitygw with its POSIX backend)
// on a free loopback port for tests. The binary is built from the pinned
// tools module (tools/go.mod) into .cache/bin on first use, under a file lock
// so that test packages running in parallel build it once.
//
// A test that needs the server calls Shared. If the server cannot be built or
// started, the test fails; it never skips.
package s3server

import (
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
)

// Server is a running versitygw.
type Server struct {
	Endpoint  string // http://127.0.0.1:port
	AccessKey string
	SecretKey string
	Region    string
	root      string
	cmd       *exec.Cmd
}

var (
	once      sync.Once
	shared    *Server
	sharedErr error
)

// Shared returns the process-wide server, starting it on first use. It fails
// t if the server cannot be started. Call Stop from TestMain (see Main) to
// shut it down; the process is also killed when the test binary exits.
func Shared(t testing.TB) *Server {
	t.Helper()
	once.Do(func() { shared, sharedErr = Start(context.Background()) })
	if sharedErr != nil {
		t.Fatalf("s3server: the S3 test server is required and could not start (run `make test`, which builds it): %v", sharedErr)
	}
	return shared
}

// Main runs the tests and stops the shared server afterwards. Use it as
// `func TestMain(m *testing.M) { os.Exit(s3server.Main(m)) }`.
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	return code
}

// NewBucket creates a fresh, empty bucket and returns its name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := "t-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:20]
	if err := os.Mkdir(filepath.Join(s.root, name), 0o700); err != nil {
		t.Fatalf("s3server: create bucket: %v", err)
	}
	return name
}

// Env returns the AWS environment variables that point an SDK at the server.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + s.Region,
		"AWS_ENDPOINT_URL=" + s.Endpoint,
	}
}

var credentialsOnce sync.Once

// UseCredentials puts the server's credentials and region in this
// process's environment, where the drivers' standard chain finds them, for
// stores a test opens itself (child processes get Env). Every server of a
// process has the same ones, so it happens once.
func (s *Server) UseCredentials() {
	credentialsOnce.Do(func() {
		os.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
		os.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
		os.Setenv("AWS_REGION", s.Region)
	})
}

// Start builds the binary if needed and starts a server with a temporary root.
func Start(ctx context.Context) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "commitptr-s3-")
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		Endpoint:  "http://" + addr,
		AccessKey: "commitptr-test",
		SecretKey: "commitptr-test-secret",
		Region:    "us-east-1",
		root:      root,
	}
	s.cmd = exec.Command(bin, "--access", s.AccessKey, "--secret", s.SecretKey,
		"--port", addr, "--quiet", "posix", root)
	s.cmd.Env = os.Environ()
	s.cmd.Stdout = os.Stderr
	s.cmd.Stderr = os.Stderr
	s.cmd.SysProcAttr = procattr.DieWithParent()
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(s.Endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("versitygw did not answer on %s: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server and removes its root.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
	os.RemoveAll(s.root)
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Binary returns the path of the versitygw binary: $COMMITPTR_VERSITYGW if
// set, else .cache/bin/versitygw at the module root, built from the tools
// module if it is missing.
func Binary() (string, error) {
	if p := os.Getenv("COMMITPTR_VERSITYGW"); p != "" {
		return p, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, ".cache", "bin", "versitygw")
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
	cmd := exec.Command("go", "build", "-o", bin+".tmp", "github.com/versity/versitygw/cmd/versitygw")
	cmd.Dir = filepath.Join(root, "tools")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build versitygw from tools/go.mod: %v\n%s", err, out)
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
			return "", errors.New("s3server: cannot find the module root (a directory with tools/go.mod)")
		}
		dir = parent
	}
}
