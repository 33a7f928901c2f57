package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/commitptr/commitptr/internal/procattr"
)

// IAMS3 returns the process-wide versitygw that authorizes its users'
// requests by IAM policies, starting it on first use. Beside the gateway
// runs versitygw's IAM service, which holds the users (NewUser) and their
// identity policies, and which the gateway asks about every request a user
// makes, as AWS evaluates a user's policies: an action on a resource is
// allowed only if a statement allows it, with conditions such as s3:prefix
// on s3:ListBucket evaluated. Root, whose credentials Env and
// UseCredentials give, is never checked, and owns every bucket. The
// gateway keeps versions of the buckets NewVersionedBucket makes. It fails
// t if the servers cannot be started.
func IAMS3(t testing.TB) *S3Server {
	t.Helper()
	return iamS3Shared.get(t, startIAMS3,
		"the S3 test server with IAM policies is required and could not start (run `make test`, which builds it)")
}

// iamService is a running versitygw IAM service.
type iamService struct {
	endpoint string // http://127.0.0.1:port, the IAM API
	socket   string // the private endpoint the gateway asks
	dir      string // its users and policies, and the socket
	cmd      *exec.Cmd
}

func (s *iamService) stop() {
	kill(s.cmd)
	os.RemoveAll(s.dir)
}

// startIAMS3 starts the IAM service, with a temporary directory for its
// users and its private socket, and then the gateway that asks it.
func startIAMS3() (*S3Server, error) {
	bin, err := versitygwBinary()
	if err != nil {
		return nil, err
	}
	// A short directory: a unix socket's path is limited to 107 bytes.
	dir, err := os.MkdirTemp("", "commitptr-iam-")
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	iam := &iamService{endpoint: "http://" + addr, socket: filepath.Join(dir, "private.sock"), dir: dir}
	iam.cmd = exec.Command(bin, "--access", rootAccessKey, "--secret", rootSecretKey, "--port", addr, "--quiet",
		"--health", "/health", "iam", "--dir", filepath.Join(dir, "data"), "--private-ports", iam.socket)
	iam.cmd.Env = os.Environ()
	iam.cmd.Stdout = os.Stderr
	iam.cmd.Stderr = os.Stderr
	iam.cmd.SysProcAttr = procattr.DieWithParent()
	if err := iam.cmd.Start(); err != nil {
		iam.stop()
		return nil, fmt.Errorf("start %s iam: %w", bin, err)
	}
	if err := awaitHTTP(iam.endpoint+"/health", nil); err != nil {
		iam.stop()
		return nil, fmt.Errorf("the versitygw IAM service did not answer on %s: %w", addr, err)
	}
	// The gateway waits for the private socket itself, if need be.
	s, err := startGateway(bin, true, iam)
	if err != nil {
		iam.stop()
		return nil, err
	}
	return s, nil
}

// User is a user of the IAM service of IAMS3, with an access key.
type User struct {
	Name      string
	AccessKey string
	SecretKey string
	srv       *S3Server
}

var userSeq atomic.Int64

// NewUser creates a user whose only permissions are those the identity
// policy document policy grants, and an access key for it. The name is
// fresh, made of prefix and a number. It fails t if the server has no IAM
// service.
func (s *S3Server) NewUser(t testing.TB, prefix string, policy []byte) *User {
	t.Helper()
	if s.iam == nil {
		t.Fatalf("testenv: %s has no IAM service; use IAMS3", s.Name)
	}
	u := &User{Name: fmt.Sprintf("%s-%d", prefix, userSeq.Add(1)), srv: s}
	if err := s.iamCall("CreateUser", url.Values{"UserName": {u.Name}}, nil); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	var key struct {
		ID     string `xml:"CreateAccessKeyResult>AccessKey>AccessKeyId"`
		Secret string `xml:"CreateAccessKeyResult>AccessKey>SecretAccessKey"`
	}
	if err := s.iamCall("CreateAccessKey", url.Values{"UserName": {u.Name}}, &key); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if key.ID == "" || key.Secret == "" {
		t.Fatalf("testenv: CreateAccessKey for %s returned no key", u.Name)
	}
	u.AccessKey, u.SecretKey = key.ID, key.Secret
	u.SetPolicy(t, policy)
	return u
}

// SetPolicy replaces the user's identity policy with policy; the gateway
// applies it to the next request.
func (u *User) SetPolicy(t testing.TB, policy []byte) {
	t.Helper()
	err := u.srv.iamCall("PutUserPolicy", url.Values{
		"UserName": {u.Name}, "PolicyName": {"commitptr"}, "PolicyDocument": {string(policy)},
	}, nil)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// Env returns the AWS environment variables that point an SDK at the
// server with the user's credentials.
func (u *User) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + u.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + u.SecretKey,
		"AWS_SESSION_TOKEN=",
		"AWS_REGION=" + u.srv.Region,
		"AWS_ENDPOINT_URL=" + u.srv.Endpoint,
	}
}

// iamCall sends action to the IAM API as root, with the query protocol of
// AWS IAM, and decodes the XML answer into out, if not nil.
func (s *S3Server) iamCall(action string, params url.Values, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params.Set("Action", action)
	params.Set("Version", "2010-05-08")
	body := params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.iam.endpoint+"/", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	sum := sha256.Sum256([]byte(body))
	creds := aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "iam", s.Region, time.Now()); err != nil {
		return fmt.Errorf("IAM %s: sign: %w", action, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("IAM %s: %w", action, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("IAM %s: read the answer: %w", action, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("IAM %s: %s: %s", action, resp.Status, b)
	}
	if out != nil {
		if err := xml.Unmarshal(b, out); err != nil {
			return fmt.Errorf("IAM %s: decode the answer: %w", action, err)
		}
	}
	return nil
}

// accessLog is the file where the gateway logs every request.
func (s *iamService) accessLog() string { return filepath.Join(s.dir, "access.log") }

// Request is one request that the gateway of IAMS3 answered.
type Request struct {
	Op     string // the S3 operation, as versitygw names it: "s3_GetObject"
	Bucket string
	Key    string // the object's key; "" for a request on the bucket, and for DeleteObjects
	Prefix string // the prefix of a listing
	Status int
	Code   string // the error code, such as "AccessDenied"; "" on success
}

// Requests returns the requests made with the access key accessKey, in
// the order the gateway answered them, every request answered before the
// call included.
func (s *S3Server) Requests(t testing.TB, accessKey string) []Request {
	t.Helper()
	if s.iam == nil {
		t.Fatalf("testenv: %s logs no requests; use IAMS3", s.Name)
	}
	// The gateway logs a request once it has answered it, so a request
	// answered before this call may not be logged yet: wait for one of
	// root's sent now, which is logged after them.
	before := len(s.loggedRequests(t, rootAccessKey))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client().ListBuckets(ctx, &awss3.ListBucketsInput{}); err != nil {
		t.Fatalf("testenv: list buckets: %v", err)
	}
	for len(s.loggedRequests(t, rootAccessKey)) == before {
		if ctx.Err() != nil {
			t.Fatalf("testenv: the gateway did not log a request in 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s.loggedRequests(t, accessKey)
}

// loggedRequests parses the access log: fields separated by spaces, the
// time in brackets holding one (see versitygw's s3log.FileLogger).
func (s *S3Server) loggedRequests(t testing.TB, accessKey string) []Request {
	t.Helper()
	b, err := os.ReadFile(s.iam.accessLog())
	if err != nil {
		t.Fatalf("testenv: read the gateway's access log: %v", err)
	}
	var got []Request
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, " ")
		if len(f) < 12 || f[5] != accessKey {
			continue
		}
		status, err := strconv.Atoi(f[10])
		if err != nil {
			t.Fatalf("testenv: access log: bad status in %q", line)
		}
		r := Request{Op: f[7], Bucket: dash(f[1]), Key: dash(f[8]), Status: status, Code: dash(f[11])}
		if u, err := url.ParseRequestURI(f[9]); err == nil {
			r.Prefix = u.Query().Get("prefix")
		}
		got = append(got, r)
	}
	return got
}

// dash returns s, or "" for the "-" that stands for an empty field.
func dash(s string) string {
	if s == "-" {
		return ""
	}
	return s
}
