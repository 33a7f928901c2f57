// Package azurite runs Azurite, the Azure Storage emulator, on a free
// loopback port for tests: its blob service only, with in-memory
// persistence, telemetry off and strict mode (no --loose).
//
// Azurite is an npm package pinned in tools/azurite (package.json and
// package-lock.json). scripts/tools.sh installs it with `npm ci` into
// .cache/azurite; a test that finds it missing runs the same install once,
// under a file lock, so that test packages running in parallel install it
// once. $COMMITPTR_AZURITE, if set, names the azurite-blob executable to use
// instead.
//
// A test that needs the emulator calls Shared. If it cannot be installed or
// started, the test fails; it never skips.
package azurite

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/google/uuid"

	"github.com/commitptr/commitptr/internal/procattr"
	"github.com/commitptr/commitptr/store/storetest"
)

// Account and Key are Azurite's well-known development account, published
// with the emulator: not a secret.
const (
	Account = "devstoreaccount1"
	Key     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// Server is a running azurite-blob.
type Server struct {
	// Endpoint is the account's blob service URL,
	// http://127.0.0.1:port/devstoreaccount1.
	Endpoint string
	// ConnectionString holds the account, its key and Endpoint.
	ConnectionString string
	// Conformance declares the capabilities the azblob driver lacks on
	// Azurite, for storetest.RunWith.
	Conformance storetest.Options
	cmd         *exec.Cmd
}

var (
	once      sync.Once
	shared    *Server
	sharedErr error
)

// Shared returns the process-wide server, starting it on first use. It
// fails t if the server cannot be installed or started. Main stops it; the
// process is also killed when the test binary exits.
func Shared(t testing.TB) *Server {
	t.Helper()
	once.Do(func() { shared, sharedErr = Start() })
	if sharedErr != nil {
		t.Fatalf("azurite: the Azure Blob test server is required and could not start (run `make test`, which installs it): %v", sharedErr)
	}
	return shared
}

// StopShared stops the shared server if it was started, for TestMain
// (s3server.Main calls it).
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}

var credentialsOnce sync.Once

// UseCredentials puts the server's connection string in this process's
// environment (AZURE_STORAGE_CONNECTION_STRING), where the driver finds it,
// for stores a test opens itself; child processes get Env. Every Azurite
// server of a process has the same account, so it happens once. The
// endpoint is named in the connection string, so nothing is sent anywhere
// but to the server on loopback.
func (s *Server) UseCredentials() {
	credentialsOnce.Do(func() { os.Setenv("AZURE_STORAGE_CONNECTION_STRING", s.ConnectionString) })
}

// Env returns the environment variables that point the driver at the
// server.
func (s *Server) Env() []string {
	return []string{"AZURE_STORAGE_CONNECTION_STRING=" + s.ConnectionString}
}

// NewContainer creates a fresh, empty container and returns its name. The
// test's cleanup deletes it, which frees the emulator's memory.
func (s *Server) NewContainer(t testing.TB) string {
	t.Helper()
	name := "t-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:20]
	c, err := container.NewClientFromConnectionString(s.ConnectionString, name, nil)
	if err != nil {
		t.Fatalf("azurite: container client: %v", err)
	}
	if _, err := c.Create(context.Background(), nil); err != nil {
		t.Fatalf("azurite: create container: %v", err)
	}
	t.Cleanup(func() { c.Delete(context.Background(), nil) }) //nolint:errcheck // best effort
	return name
}

// listening is the line with which azurite-blob says where it listens.
var listening = regexp.MustCompile(`successfully listens on (http://127\.0\.0\.1:[0-9]+)`)

// Start installs Azurite if needed and starts its blob service on a port
// the kernel picks.
func Start() (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	s := &Server{}
	// The SDK speaks a newer service version than the emulator knows;
	// --skipApiVersionCheck lets it, as the emulator's documentation
	// advises. The debug log is off and the access log silenced.
	s.cmd = exec.Command(bin, "--blobHost", "127.0.0.1", "--blobPort", "0",
		"--inMemoryPersistence", "--extentMemoryLimit", "4096",
		"--skipApiVersionCheck", "--disableTelemetry", "--silent")
	s.cmd.Dir = os.TempDir() // with in-memory persistence it writes nothing
	s.cmd.Env = os.Environ()
	s.cmd.Stderr = os.Stderr
	s.cmd.SysProcAttr = procattr.DieWithParent()
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		var seen []string
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				io.Copy(io.Discard, out) //nolint:errcheck // drain until it exits
				return
			}
			seen = append(seen, sc.Text())
		}
		found <- "\x00" + strings.Join(seen, "\n")
	}()
	select {
	case addr := <-found:
		if strings.HasPrefix(addr, "\x00") {
			s.Stop()
			return nil, fmt.Errorf("azurite-blob exited before it listened:\n%s", addr[1:])
		}
		s.Endpoint = addr + "/" + Account
	case <-time.After(60 * time.Second):
		s.Stop()
		return nil, errors.New("azurite-blob did not say where it listens within 60 s")
	}
	s.ConnectionString = ConnectionStringFor(s.Endpoint)
	return s, nil
}

// ConnectionStringFor returns the connection string of the development
// account at a blob service URL.
func ConnectionStringFor(endpoint string) string {
	return "DefaultEndpointsProtocol=http;AccountName=" + Account + ";AccountKey=" + Key + ";BlobEndpoint=" + endpoint + ";"
}

// Stop stops the server.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		// Kill fails only if the process is gone already; Wait reports the kill.
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// Binary returns the path of the azurite-blob executable:
// $COMMITPTR_AZURITE if set, else .cache/azurite/node_modules/.bin/azurite-blob
// at the module root, installed from tools/azurite with `npm ci` if it is
// missing.
func Binary() (string, error) {
	if p := os.Getenv("COMMITPTR_AZURITE"); p != "" {
		return p, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, ".cache", "azurite")
	bin := filepath.Join(dir, "node_modules", ".bin", "azurite-blob")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // another package installed it while we waited
	}
	cmd := exec.Command("bash", "-c", ". scripts/tools.sh && install_azurite")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("install azurite from tools/azurite: %v\n%s", err, out)
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("install azurite from tools/azurite: %w", err)
	}
	return bin, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "azurite", "package-lock.json")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("azurite: cannot find the module root (a directory with tools/azurite/package-lock.json)")
		}
		dir = parent
	}
}
