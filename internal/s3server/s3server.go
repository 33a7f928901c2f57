// Package s3server runs real S3 servers on free loopback ports for tests:
// versitygw with its POSIX backend, the reference server, and gofakes3 with
// its in-memory backend, a second implementation that deviates in places
// (Server.Conformance says where).
//
// versitygw is built from the pinned tools module (tools/go.mod) into
// .cache/bin on first use, under a file lock so that test packages running
// in parallel build it once. gofakes3 is a Go module pinned in go.mod, an
// http.Handler that runs inside the test process: no binary to build, no
// process to manage.
//
// A test that needs a server calls Shared or SharedGofakes3. If the server
// cannot be built or started, the test fails; it never skips.
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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/google/uuid"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/commitptr/commitptr/internal/azurite"
	"github.com/commitptr/commitptr/internal/gcsserver"
	"github.com/commitptr/commitptr/internal/procattr"
	"github.com/commitptr/commitptr/store/storetest"
)

// Server is a running versitygw or gofakes3.
type Server struct {
	Name string // "versitygw" or "gofakes3"
	// Conformance declares the capabilities the s3 and minio drivers lack
	// on this server, for storetest.RunWith.
	Conformance storetest.Options
	// Versioned declares the same for storetest.RunVersioned.
	Versioned storetest.Options
	Endpoint  string // http://127.0.0.1:port
	AccessKey string
	SecretKey string
	Region    string
	root      string         // versitygw: its POSIX root, a directory per bucket
	versions  string         // versitygw: its versioning directory, if it has one
	cmd       *exec.Cmd      // versitygw
	backend   *s3mem.Backend // gofakes3
	http      *http.Server   // gofakes3
}

var (
	once      sync.Once
	shared    *Server
	sharedErr error

	fakeOnce sync.Once
	fake     *Server
	fakeErr  error

	versionedOnce sync.Once
	versioned     *Server
	versionedErr  error
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

// SharedGofakes3 returns the process-wide gofakes3 server, starting it on
// first use. It fails t if the server cannot be started.
func SharedGofakes3(t testing.TB) *Server {
	t.Helper()
	fakeOnce.Do(func() { fake, fakeErr = StartGofakes3() })
	if fakeErr != nil {
		t.Fatalf("s3server: the gofakes3 test server could not start: %v", fakeErr)
	}
	return fake
}

// SharedVersioned returns the process-wide versitygw that can keep
// versions (started with a versioning directory), starting it on first
// use; NewVersionedBucket makes its buckets. It is a server of its own so
// that the shared one stays the reference setup. It fails t if the server
// cannot be started.
func SharedVersioned(t testing.TB) *Server {
	t.Helper()
	versionedOnce.Do(func() { versioned, versionedErr = start(context.Background(), true) })
	if versionedErr != nil {
		t.Fatalf("s3server: the versioned S3 test server is required and could not start (run `make test`, which builds it): %v", versionedErr)
	}
	return versioned
}

// gofakes3Lacks is what gofakes3 v1.2.0 does not implement that the
// drivers claim elsewhere: the one place the suite learns of its gaps.
var gofakes3Lacks = map[storetest.Capability]string{
	storetest.ConditionalDelete: "gofakes3 v1.2.0 ignores If-Match on DeleteObject and deletes unconditionally; commitptr never relies on a conditional delete",
	storetest.DelimiterPages:    "gofakes3 v1.2.0 resumes a delimited listing after the first key under the page's last common prefix, so the next page repeats that prefix",
}

// gofakes3VersionsLack is the same for the versioned cases.
var gofakes3VersionsLack = map[storetest.Capability]string{
	storetest.VersionPages: "gofakes3 v1.2.0 answers a truncated ListObjectVersions without NextKeyMarker, so the next page cannot be asked for",
}

// Main runs the tests and stops every shared test server afterwards: the
// S3 servers of this package, Azurite (internal/azurite) and
// fake-gcs-server (internal/gcsserver). Use it as
// `func TestMain(m *testing.M) { os.Exit(s3server.Main(m)) }`.
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	if fake != nil {
		fake.Stop()
	}
	if versioned != nil {
		versioned.Stop()
	}
	azurite.StopShared()
	gcsserver.StopShared()
	return code
}

// NewBucket creates a fresh, empty bucket and returns its name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := "t-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:20]
	var err error
	if s.backend != nil {
		err = s.backend.CreateBucket(name)
	} else {
		err = os.Mkdir(filepath.Join(s.root, name), 0o700)
	}
	if err != nil {
		t.Fatalf("s3server: create bucket on %s: %v", s.Name, err)
	}
	return name
}

// NewVersionedBucket creates a fresh, empty bucket with versioning
// enabled and returns its name: on gofakes3, and on the versitygw of
// SharedVersioned (the shared one cannot keep versions).
func (s *Server) NewVersionedBucket(t testing.TB) string {
	t.Helper()
	name := s.NewBucket(t)
	var err error
	if s.backend != nil {
		err = s.backend.SetVersioningConfiguration(name, gofakes3.VersioningConfiguration{Status: gofakes3.VersioningEnabled})
	} else if s.versions == "" {
		err = errors.New("this versitygw was started without a versioning directory; use SharedVersioned")
	} else {
		err = s.enableVersioning(name)
	}
	if err != nil {
		t.Fatalf("s3server: enable versioning of bucket %s on %s: %v", name, s.Name, err)
	}
	return name
}

// enableVersioning sends PutBucketVersioning, which versitygw needs to
// hear through its S3 API.
func (s *Server) enableVersioning(bucket string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := s.Client()
	_, err := c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{
		Bucket:                  aws.String(bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	return err
}

// Client returns an SDK client for the server, for tests that look at
// what the drivers do not show, such as the versions of a key.
func (s *Server) Client() *awss3.Client {
	return awss3.New(awss3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       s.Region,
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

// Versions lists the versions and delete markers under prefix in bucket,
// in one page; it fails t if there are more than a page holds.
func (s *Server) Versions(t testing.TB, bucket, prefix string) []storetest.ObjectVersion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := &awss3.ListObjectVersionsInput{Bucket: aws.String(bucket)}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	out, err := s.Client().ListObjectVersions(ctx, in)
	if err != nil {
		t.Fatalf("s3server: list the versions in %s on %s: %v", bucket, s.Name, err)
	}
	if aws.ToBool(out.IsTruncated) {
		t.Fatalf("s3server: the versions under %q in %s take more than one page", prefix, bucket)
	}
	var got []storetest.ObjectVersion
	for _, v := range out.Versions {
		got = append(got, storetest.ObjectVersion{Key: aws.ToString(v.Key), ID: aws.ToString(v.VersionId), Latest: aws.ToBool(v.IsLatest), Size: aws.ToInt64(v.Size)})
	}
	for _, m := range out.DeleteMarkers {
		got = append(got, storetest.ObjectVersion{Key: aws.ToString(m.Key), ID: aws.ToString(m.VersionId), Latest: aws.ToBool(m.IsLatest), Marker: true})
	}
	return got
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
func Start(ctx context.Context) (*Server, error) { return start(ctx, false) }

// start starts versitygw, with a versioning directory if versions.
func start(ctx context.Context, versions bool) (*Server, error) {
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
	s := newServer("versitygw", addr)
	s.root = root
	args := []string{"--access", s.AccessKey, "--secret", s.SecretKey, "--port", addr, "--quiet", "--keep-alive", "posix"}
	if versions {
		s.versions = root + ".versions"
		if err := os.Mkdir(s.versions, 0o700); err != nil {
			os.RemoveAll(root)
			return nil, err
		}
		args = append(args, "--versioning-dir", s.versions)
	}
	s.cmd = exec.Command(bin, append(args, root)...)
	s.cmd.Env = os.Environ()
	s.cmd.Stdout = os.Stderr
	s.cmd.Stderr = os.Stderr
	s.cmd.SysProcAttr = procattr.DieWithParent()
	if err := s.cmd.Start(); err != nil {
		s.Stop()
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

// newServer describes a server on addr. Every server of a process has the
// same credentials and region (see UseCredentials).
func newServer(name, addr string) *Server {
	return &Server{
		Name:      name,
		Endpoint:  "http://" + addr,
		AccessKey: "commitptr-test",
		SecretKey: "commitptr-test-secret",
		Region:    "us-east-1",
	}
}

// StartGofakes3 starts gofakes3 with its in-memory backend on a loopback
// listener of this process. Its clock is the host's, its buckets are
// created by NewBucket only, and it logs nothing.
func StartGofakes3() (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := newServer("gofakes3", l.Addr().String())
	s.Conformance.Lacks = gofakes3Lacks
	s.Versioned.Lacks = gofakes3VersionsLack
	s.backend = s3mem.New()
	faker := gofakes3.New(s.backend, gofakes3.WithLogger(gofakes3.DiscardLog()), gofakes3.WithHostBucket(false))
	s.http = &http.Server{Handler: faker.Server(), ReadHeaderTimeout: time.Minute}
	go func() { _ = s.http.Serve(l) }() // returns ErrServerClosed once Stop closes it
	return s, nil
}

// Stop stops the server and removes its root.
func (s *Server) Stop() {
	if s.http != nil {
		s.http.Close()
	}
	if s.cmd != nil && s.cmd.Process != nil {
		// Kill fails only if the process is gone already; Wait reports the kill.
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
	if s.root != "" {
		os.RemoveAll(s.root)
	}
	if s.versions != "" {
		os.RemoveAll(s.versions)
	}
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
