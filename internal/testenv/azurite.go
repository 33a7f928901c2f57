package testenv

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
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/commitptr/commitptr/internal/procattr"
	"github.com/commitptr/commitptr/store/storetest"
)

// AzuriteAccount and AzuriteKey are Azurite's well-known development
// account, published with the emulator: not a secret.
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// AzuriteServer is a running azurite-blob: the blob service of Azurite
// only, with in-memory persistence, telemetry off and strict mode (no
// --loose).
type AzuriteServer struct {
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

var azuriteShared shared[*AzuriteServer]

// Azurite returns the process-wide Azurite, starting it on first use. It
// fails t if the server cannot be installed or started.
func Azurite(t testing.TB) *AzuriteServer {
	t.Helper()
	return azuriteShared.get(t, startAzurite,
		"the Azure Blob test server is required and could not start (run `make test`, which installs it)")
}

var azuriteCredentialsOnce sync.Once

// UseCredentials puts the server's connection string in this process's
// environment (AZURE_STORAGE_CONNECTION_STRING), where the driver finds it,
// for stores a test opens itself; child processes get Env. Every Azurite
// server of a process has the same account, so it happens once. The
// endpoint is named in the connection string, so nothing is sent anywhere
// but to the server on loopback.
func (s *AzuriteServer) UseCredentials() {
	azuriteCredentialsOnce.Do(func() { os.Setenv("AZURE_STORAGE_CONNECTION_STRING", s.ConnectionString) })
}

// Env returns the environment variables that point the driver at the
// server.
func (s *AzuriteServer) Env() []string {
	return []string{"AZURE_STORAGE_CONNECTION_STRING=" + s.ConnectionString}
}

// NewContainer creates a fresh, empty container and returns its name. The
// test's cleanup deletes it, which frees the emulator's memory.
func (s *AzuriteServer) NewContainer(t testing.TB) string {
	t.Helper()
	name := newName()
	c, err := container.NewClientFromConnectionString(s.ConnectionString, name, nil)
	if err != nil {
		t.Fatalf("testenv: container client: %v", err)
	}
	if _, err := c.Create(context.Background(), nil); err != nil {
		t.Fatalf("testenv: create container: %v", err)
	}
	t.Cleanup(func() { c.Delete(context.Background(), nil) }) //nolint:errcheck // best effort
	return name
}

// listening is the line with which azurite-blob says where it listens.
var listening = regexp.MustCompile(`successfully listens on (http://127\.0\.0\.1:[0-9]+)`)

// startAzurite installs Azurite if need be and starts its blob service on
// a port the kernel picks.
func startAzurite() (*AzuriteServer, error) {
	bin, err := azuriteBinary()
	if err != nil {
		return nil, err
	}
	s := &AzuriteServer{}
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
		s.Endpoint = addr + "/" + AzuriteAccount
	case <-time.After(60 * time.Second):
		s.Stop()
		return nil, errors.New("azurite-blob did not say where it listens within 60 s")
	}
	s.ConnectionString = AzuriteConnectionString(s.Endpoint)
	return s, nil
}

// AzuriteConnectionString returns the connection string of the
// development account at a blob service URL.
func AzuriteConnectionString(endpoint string) string {
	return "DefaultEndpointsProtocol=http;AccountName=" + AzuriteAccount + ";AccountKey=" + AzuriteKey + ";BlobEndpoint=" + endpoint + ";"
}

// Stop stops the server.
func (s *AzuriteServer) Stop() {
	kill(s.cmd)
}

// azuriteBinary returns the path of the azurite-blob executable:
// $COMMITPTR_AZURITE if set, else .cache/azurite/node_modules/.bin/azurite-blob
// at the module root, installed from tools/azurite with `npm ci` (by
// scripts/tools.sh) if it is missing.
func azuriteBinary() (string, error) {
	if p := os.Getenv("COMMITPTR_AZURITE"); p != "" {
		return p, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, ".cache", "azurite")
	bin := filepath.Join(dir, "node_modules", ".bin", "azurite-blob")
	return bin, onceLocked(bin, dir+".lock", func() error {
		cmd := exec.Command("bash", "-c", ". scripts/tools.sh && install_azurite")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("install azurite from tools/azurite: %v\n%s", err, out)
		}
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("install azurite from tools/azurite: %w", err)
		}
		return nil
	})
}
