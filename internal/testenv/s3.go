package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/commitptr/commitptr/internal/procattr"
	"github.com/commitptr/commitptr/store/storetest"
)

// S3Server is a running versitygw or gofakes3.
type S3Server struct {
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
	iam       *iamService    // versitygw: its IAM service, if it has one
	backend   *s3mem.Backend // gofakes3
	http      *http.Server   // gofakes3
}

var s3Shared, gofakes3Shared, versionedS3Shared, iamS3Shared shared[*S3Server]

// S3 returns the process-wide versitygw, the reference S3 server,
// starting it on first use. It fails t if the server cannot be started.
func S3(t testing.TB) *S3Server {
	t.Helper()
	return s3Shared.get(t, func() (*S3Server, error) { return startVersitygw(false) },
		"the S3 test server is required and could not start (run `make test`, which builds it)")
}

// Gofakes3 returns the process-wide gofakes3 server, starting it on first
// use. It fails t if the server cannot be started.
func Gofakes3(t testing.TB) *S3Server {
	t.Helper()
	return gofakes3Shared.get(t, startGofakes3, "the gofakes3 test server could not start")
}

// VersionedS3 returns the process-wide versitygw that can keep versions
// (started with a versioning directory), starting it on first use;
// NewVersionedBucket makes its buckets. It is a server of its own so that
// the one of S3 stays the reference setup. It fails t if the server cannot
// be started.
func VersionedS3(t testing.TB) *S3Server {
	t.Helper()
	return versionedS3Shared.get(t, func() (*S3Server, error) { return startVersitygw(true) },
		"the versioned S3 test server is required and could not start (run `make test`, which builds it)")
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

// NewBucket creates a fresh, empty bucket and returns its name.
func (s *S3Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := newName()
	var err error
	if s.backend != nil {
		err = s.backend.CreateBucket(name)
	} else {
		err = os.Mkdir(filepath.Join(s.root, name), 0o700)
	}
	if err != nil {
		t.Fatalf("testenv: create bucket on %s: %v", s.Name, err)
	}
	return name
}

// NewVersionedBucket creates a fresh, empty bucket with versioning
// enabled and returns its name: on gofakes3, and on the versitygw of
// VersionedS3 or IAMS3 (the one of S3 cannot keep versions).
func (s *S3Server) NewVersionedBucket(t testing.TB) string {
	t.Helper()
	name := s.NewBucket(t)
	var err error
	if s.backend != nil {
		err = s.backend.SetVersioningConfiguration(name, gofakes3.VersioningConfiguration{Status: gofakes3.VersioningEnabled})
	} else if s.versions == "" {
		err = errors.New("this versitygw was started without a versioning directory; use VersionedS3")
	} else {
		err = s.enableVersioning(name)
	}
	if err != nil {
		t.Fatalf("testenv: enable versioning of bucket %s on %s: %v", name, s.Name, err)
	}
	return name
}

// enableVersioning sends PutBucketVersioning, which versitygw needs to
// hear through its S3 API.
func (s *S3Server) enableVersioning(bucket string) error {
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
func (s *S3Server) Client() *awss3.Client {
	return awss3.New(awss3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       s.Region,
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

// Versions lists the versions and delete markers under prefix in bucket,
// in one page; it fails t if there are more than a page holds.
func (s *S3Server) Versions(t testing.TB, bucket, prefix string) []storetest.ObjectVersion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := &awss3.ListObjectVersionsInput{Bucket: aws.String(bucket)}
	if prefix != "" {
		in.Prefix = aws.String(prefix)
	}
	out, err := s.Client().ListObjectVersions(ctx, in)
	if err != nil {
		t.Fatalf("testenv: list the versions in %s on %s: %v", bucket, s.Name, err)
	}
	if aws.ToBool(out.IsTruncated) {
		t.Fatalf("testenv: the versions under %q in %s take more than one page", prefix, bucket)
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
func (s *S3Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + s.Region,
		"AWS_ENDPOINT_URL=" + s.Endpoint,
	}
}

var s3CredentialsOnce sync.Once

// UseCredentials puts the server's credentials and region in this
// process's environment, where the drivers' standard chain finds them, for
// stores a test opens itself (child processes get Env). Every server of a
// process has the same ones, so it happens once.
func (s *S3Server) UseCredentials() {
	s3CredentialsOnce.Do(func() {
		os.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
		os.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
		os.Setenv("AWS_REGION", s.Region)
	})
}

// versitygwBinary returns the versitygw to run, building it if need be.
func versitygwBinary() (string, error) {
	return goTool("COMMITPTR_VERSITYGW", "versitygw", "github.com/versity/versitygw/cmd/versitygw")
}

// startVersitygw builds versitygw if need be and starts it with a
// temporary root, and with a versioning directory if versions.
func startVersitygw(versions bool) (*S3Server, error) {
	bin, err := versitygwBinary()
	if err != nil {
		return nil, err
	}
	return startGateway(bin, versions, nil)
}

// startGateway starts the versitygw bin with a temporary root, a
// versioning directory if versions, and the IAM service iam if not nil.
func startGateway(bin string, versions bool, iam *iamService) (*S3Server, error) {
	root, err := os.MkdirTemp("", "commitptr-s3-")
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	s := newS3Server("versitygw", addr)
	s.root = root
	s.iam = iam
	args := []string{"--access", s.AccessKey, "--secret", s.SecretKey, "--port", addr, "--quiet", "--keep-alive"}
	if iam != nil {
		args = append(args, "--iam-standalone-endpoint", iam.socket, "--access-log", iam.accessLog())
	}
	args = append(args, "posix")
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
	if err := awaitHTTP(s.Endpoint+"/", nil); err != nil {
		s.Stop()
		return nil, fmt.Errorf("versitygw did not answer on %s: %w", addr, err)
	}
	return s, nil
}

// newS3Server describes a server on addr. Every server of a process has the
// same credentials and region (see UseCredentials).
func newS3Server(name, addr string) *S3Server {
	return &S3Server{
		Name:      name,
		Endpoint:  "http://" + addr,
		AccessKey: rootAccessKey,
		SecretKey: rootSecretKey,
		Region:    "us-east-1",
	}
}

// The credentials of every S3 server's root user.
const (
	rootAccessKey = "commitptr-test"
	rootSecretKey = "commitptr-test-secret"
)

// startGofakes3 starts gofakes3 with its in-memory backend on a loopback
// listener of this process. Its clock is the host's, its buckets are
// created by NewBucket only, and it logs nothing.
func startGofakes3() (*S3Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := newS3Server("gofakes3", l.Addr().String())
	s.Conformance.Lacks = gofakes3Lacks
	s.Versioned.Lacks = gofakes3VersionsLack
	s.backend = s3mem.New()
	faker := gofakes3.New(s.backend, gofakes3.WithLogger(gofakes3.DiscardLog()), gofakes3.WithHostBucket(false))
	s.http = &http.Server{Handler: faker.Server(), ReadHeaderTimeout: time.Minute}
	go func() { _ = s.http.Serve(l) }() // returns ErrServerClosed once Stop closes it
	return s, nil
}

// Stop stops the server and removes its root.
func (s *S3Server) Stop() {
	if s.http != nil {
		s.http.Close()
	}
	kill(s.cmd)
	if s.iam != nil {
		s.iam.stop()
	}
	if s.root != "" {
		os.RemoveAll(s.root)
	}
	if s.versions != "" {
		os.RemoveAll(s.versions)
	}
}
