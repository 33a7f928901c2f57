package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/commitptr/commitptr/internal/procattr"
	"github.com/commitptr/commitptr/store/storetest"
)

// fakeGCSVersion is the fake-gcs-server pinned in tools/go.mod.
const fakeGCSVersion = "v1.56.1"

// GCSServer is a running fake-gcs-server, with its in-memory backend. It
// runs as a process of its own: its module cannot join the main module's
// build without pulling its dependencies (a gRPC server, Pub/Sub, a
// filesystem backend) into go.mod.
type GCSServer struct {
	// Endpoint is its base URL, http://127.0.0.1:port.
	Endpoint string
	// Conformance declares the capabilities the gcs driver lacks on this
	// server, for storetest.RunWith.
	Conformance storetest.Options
	cmd         *exec.Cmd
}

// fakeGCSLacks is what fake-gcs-server does not implement that the driver
// claims on Cloud Storage: the one place the suite learns of its gaps.
var fakeGCSLacks = map[storetest.Capability]string{
	storetest.ConditionalDelete: "fake-gcs-server " + fakeGCSVersion + " ignores ifGenerationMatch on objects.delete and deletes unconditionally; commitptr never relies on a conditional delete",
	storetest.DelimiterPages:    "fake-gcs-server " + fakeGCSVersion + " hands out the entries of a delimited listing in pages of one out of lexical order (d/d/ before d/c); commitptr's one delimited listing (gc's lease names) does not depend on the order",
}

var gcsShared shared[*GCSServer]

// GCS returns the process-wide fake-gcs-server, starting it on first use.
// It fails t if the server cannot be started.
func GCS(t testing.TB) *GCSServer {
	t.Helper()
	return gcsShared.get(t, startFakeGCS,
		"the Cloud Storage emulator is required and could not start (run `make test`, which builds it)")
}

// startFakeGCS builds fake-gcs-server if need be and starts it.
func startFakeGCS() (*GCSServer, error) {
	bin, err := goTool("COMMITPTR_FAKE_GCS_SERVER", "fake-gcs-server", "github.com/fsouza/fake-gcs-server")
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	s := &GCSServer{Endpoint: "http://127.0.0.1:" + port, Conformance: storetest.Options{Lacks: fakeGCSLacks}}
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
	err = awaitHTTP(s.Endpoint+"/_internal/healthcheck", func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("healthcheck: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("fake-gcs-server did not answer on %s: %w", s.Endpoint, err)
	}
	return s, nil
}

// NewBucket creates a fresh, empty bucket and returns its name.
func (s *GCSServer) NewBucket(t testing.TB) string {
	t.Helper()
	name := newName()
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
		t.Fatalf("testenv: create bucket: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("testenv: create bucket %s: %s", name, resp.Status)
	}
	return name
}

// Stop stops the server.
func (s *GCSServer) Stop() {
	kill(s.cmd)
}
