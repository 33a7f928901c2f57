package reliability_test

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/object"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
	"github.com/commitptr/commitptr/store/minio"
	"github.com/commitptr/commitptr/store/s3"
)

// endless is a body that never ends: JSON whitespace, so that a parser
// without a cap would read forever. It counts what was read.
type endless struct{ n atomic.Int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	e.n.Add(int64(len(p)))
	return len(p), nil
}

func (e *endless) Close() error { return nil }

// endlessStore serves an endless body for one key.
type endlessStore struct {
	store.Store
	key  string
	body *endless
}

func (s *endlessStore) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	if key != s.key {
		return s.Store.Get(ctx, key)
	}
	return s.body, store.Attrs{ETag: "e", Size: -1}, nil
}

// TestBodySizeCaps: every body commitptr parses is read only up to its
// cap, even when the store serves an endless one (I8).
func TestBodySizeCaps(t *testing.T) {
	ctx := context.Background()
	const slack = 64 << 10 // one read buffer beyond the cap
	for _, c := range []struct {
		name string
		key  string
		cap  int64
		long bool // reads the whole cap; long mode only
		read func(s store.Store) error
	}{
		{"pointer", pointer.Key, pointer.MaxSize, false, func(s store.Store) error {
			_, _, err := pointer.Read(ctx, s)
			return err
		}},
		{"lease", lease.Key("gc"), 64 << 10, false, func(s store.Store) error {
			_, err := lease.Status(ctx, s, "gc")
			return err
		}},
		{"shared object", "counter", object.MaxSize, false, func(s store.Store) error {
			_, err := object.Update(ctx, s, "counter", object.Retry{Attempts: 1}, func(old []byte, _ bool) ([]byte, error) { return old, nil })
			return err
		}},
		{"manifest", generation.ManifestKey(fuzzGenID), generation.MaxStored, true, func(s store.Store) error {
			_, err := commit.New(s).ReadManifest(ctx, fuzzGenID, "")
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.long && !long() {
				t.Skipf("reads %d bytes; COMMITPTR_LONG=1 runs it", c.cap)
			}
			s := &endlessStore{Store: mem.New(), key: c.key, body: &endless{}}
			err := c.read(s)
			require.Error(t, err, "an endless body must be refused")
			assert.LessOrEqual(t, s.body.n.Load(), c.cap+slack, "read beyond the cap")
			t.Logf("refused after %d bytes: %v", s.body.n.Load(), err)
		})
	}
}

const fuzzGenID = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"

// zeros is a reader of n zero bytes.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), z.n)
	clear(p[:k])
	z.n -= k
	return int(k), nil
}

// TestManifestDecompressionBomb: a manifest of a few KiB that decompresses
// past MaxDecoded must be refused without allocating anywhere near that
// much.
func TestManifestDecompressionBomb(t *testing.T) {
	var bomb bytes.Buffer
	enc, err := zstd.NewWriter(&bomb, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	require.NoError(t, err)
	_, err = io.Copy(enc, &zeros{n: generation.MaxDecoded + 1})
	require.NoError(t, err)
	require.NoError(t, enc.Close())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = generation.Decode(bomb.Bytes())
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, generation.ErrCorrupt)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d-byte manifest made Decode allocate %d MiB before refusing it", bomb.Len(), alloc>>20)
	require.Less(t, alloc, uint64(64<<20), "a %d KiB manifest made a reader allocate %d MiB", bomb.Len()>>10, alloc>>20)
}

// TestCredentialsNotInErrors: a wrong secret or a session token never
// shows up in the drivers' errors, whatever the operation.
func TestCredentialsNotInErrors(t *testing.T) {
	srv := testenv.S3(t)
	bucket := srv.NewBucket(t)
	const secret = "SECRET-wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
	const token = "TOKEN-FwoGZXIvYXdzEJr-session-token-EXAMPLE"
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SESSION_TOKEN", token)
	t.Setenv("AWS_REGION", srv.Region)
	ctx := context.Background()
	s3s, err := s3.New(ctx, s3.Options{Bucket: bucket, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true})
	require.NoError(t, err)
	mins, err := minio.New(ctx, minio.Options{Bucket: bucket, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
		Credentials: credentials.NewStaticV4(srv.AccessKey, secret, token)})
	require.NoError(t, err)
	for name, s := range map[string]store.Store{"s3": s3s, "minio": mins} {
		t.Run(name, func(t *testing.T) {
			var errs []error
			_, _, err := s.Get(ctx, "k")
			errs = append(errs, err)
			_, err = s.Head(ctx, "k")
			errs = append(errs, err)
			_, err = s.Put(ctx, "k", strings.NewReader("v"), store.PutOptions{IfNoneMatch: true})
			errs = append(errs, err)
			errs = append(errs, s.Delete(ctx, "k", store.DeleteOptions{IfMatch: "x"}))
			errs = append(errs, s.DeleteMany(ctx, []string{"k", "l"}))
			_, err = s.List(ctx, store.ListRequest{Prefix: "k"})
			errs = append(errs, err)
			_, err = commit.New(s).Open(ctx)
			errs = append(errs, err)
			errs = append(errs, store.Probe(ctx, s))
			for i, err := range errs {
				require.Error(t, err, "request %d with a wrong secret succeeded", i)
				msg := err.Error()
				assert.NotContains(t, msg, secret, "request %d", i)
				assert.NotContains(t, msg, token, "request %d", i)
				assert.NotContains(t, msg, srv.SecretKey, "request %d", i)
				assert.NotContains(t, msg, "Signature=", "request %d", i)
			}
			require.ErrorIs(t, errs[0], store.ErrAccess, "a wrong secret is an access error: %v", errs[0])
		})
	}
	// A URL with user information is refused without echoing the password.
	for _, scheme := range []string{"s3", "minio"} {
		_, err := store.Open(ctx, scheme+"://AKIDEXAMPLE:"+secret+"@"+bucket+"/p", store.Config{Endpoint: srv.Endpoint})
		require.Error(t, err)
		assert.NotContains(t, err.Error(), secret)
	}
}

// TestCLICredentialsNotInOutput: publish never prints a secret, in errors,
// --json output or debug logs.
func TestCLICredentialsNotInOutput(t *testing.T) {
	srv := testenv.S3(t)
	bucket := srv.NewBucket(t)
	const secret = "SECRET-cli-wJalrXUtnFEMI-K7MDENG-EXAMPLE"
	bin := testenv.PublishBinary(t)
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644))
	url := "s3://" + bucket + "/ds"
	for _, args := range [][]string{
		{"put", src, url},
		{"-vv", "put", src, url},
		{"--json", "show", url},
		{"-vv", "--json", "ls", url},
		{"gc", url},
		{"probe", url},
	} {
		cmd := exec.Command(bin, append([]string{"--endpoint", srv.Endpoint, "--path-style"}, args...)...)
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+srv.AccessKey, "AWS_SECRET_ACCESS_KEY="+secret,
			"AWS_SESSION_TOKEN="+secret+"-token", "AWS_REGION="+srv.Region)
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "publish %v with a wrong secret succeeded", args)
		assert.NotContains(t, string(out), secret, "publish %v", args)
		assert.NotContains(t, string(out), "Signature=", "publish %v", args)
	}
}

// TestFSModes: the fs driver creates its files and directories for its
// owner only.
func TestFSModes(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "root")
	s, err := store.Open(ctx, root, store.Config{})
	require.NoError(t, err)
	_, err = s.Put(ctx, "a/b/c", strings.NewReader("x"), store.PutOptions{IfNoneMatch: true})
	require.NoError(t, err)
	_, err = s.Put(ctx, "a/b/c", strings.NewReader("y"), store.PutOptions{})
	require.NoError(t, err)
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := d.Info()
		require.NoError(t, err)
		assert.Zero(t, fi.Mode().Perm()&0o077, "%s has mode %v", p, fi.Mode())
		return nil
	}))
}
