package wanproxy_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/internal/wanproxy"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// lockedBuffer is a log the proxy's goroutines write while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRoundTripTakesTwiceTheDelay: a signed S3 PUT and GET through the
// proxy reach the real server (the signature over the Host header holds),
// each takes at least the delay each way, and the log shows every request
// sent and answered.
func TestRoundTripTakesTwiceTheDelay(t *testing.T) {
	srv := testenv.S3(t)
	bucket := srv.NewBucket(t)
	const delay = 30 * time.Millisecond
	var log lockedBuffer
	p, err := wanproxy.Start("127.0.0.1:0", srv.Endpoint, delay, &log)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := awss3.New(awss3.Options{
		BaseEndpoint: aws.String(p.URL),
		Region:       srv.Region,
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
	})
	ctx := context.Background()

	start := time.Now()
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("hello")}); err != nil {
		t.Fatalf("PUT through the proxy: %v", err)
	}
	if took := time.Since(start); took < 2*delay {
		t.Errorf("PUT through the proxy took %v, less than twice the delay %v", took, delay)
	}

	start = time.Now()
	out, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")})
	if err != nil {
		t.Fatalf("GET through the proxy: %v", err)
	}
	body, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || string(body) != "hello" {
		t.Fatalf("GET through the proxy read %q, %v; want \"hello\"", body, err)
	}
	if took := time.Since(start); took < 2*delay {
		t.Errorf("GET through the proxy took %v, less than twice the delay %v", took, delay)
	}

	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	want := []string{"#1 -> PUT /" + bucket + "/k", "#1 <- 200 PUT /" + bucket + "/k", "#2 -> GET /" + bucket + "/k", "#2 <- 200 GET /" + bucket + "/k"}
	if len(lines) != len(want) {
		t.Fatalf("log has %d lines, want %d:\n%s", len(lines), len(want), log.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("log line %d is %q, want it to contain %q", i+1, lines[i], w)
		}
	}
}
