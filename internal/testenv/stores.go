package testenv

import (
	"context"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commitptr/commitptr/store"
	_ "github.com/commitptr/commitptr/store/azblob" // registers az://
	"github.com/commitptr/commitptr/store/fs"
	_ "github.com/commitptr/commitptr/store/gcs" // registers gs://
	"github.com/commitptr/commitptr/store/mem"
	_ "github.com/commitptr/commitptr/store/minio" // registers minio://
	_ "github.com/commitptr/commitptr/store/s3"    // registers s3://
)

// Factory makes a new, empty store.
type Factory struct {
	Name string
	New  func(t testing.TB) store.Store
}

// Stores returns a factory per driver: mem, fs, the s3 and minio drivers
// against versitygw (S3), the gcs driver against fake-gcs-server (GCS) and
// the azblob driver against Azurite. The s3, minio, gcs and azblob
// factories start their servers on first use and fail the test if they
// cannot run. Tests that range over Stores, or run through EachStore or
// EachStoreAtOnce, check their invariants on every driver.
func Stores() []Factory {
	return []Factory{
		{"mem", func(testing.TB) store.Store { return mem.New() }},
		{"fs", func(t testing.TB) store.Store {
			s, err := fs.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
		{"s3", func(t testing.TB) store.Store { return s3Store(t, "s3") }},
		{"minio", func(t testing.TB) store.Store { return s3Store(t, "minio") }},
		{"gcs", gcsStore},
		{"azblob", azblobStore},
	}
}

// azblobStore opens az://container on a fresh container of the shared
// Azurite, with the credentials in the environment as a user has them.
//
// Its header and idle timeouts are 2 minutes, not the default 30 s:
// Azurite is one Node process, and on a machine loaded to 20 and more on
// 2 cores it has been seen to send no header for over 30 s. The tests
// that are about timeouts set their own.
func azblobStore(t testing.TB) store.Store {
	t.Helper()
	srv := Azurite(t)
	srv.UseCredentials()
	cfg := store.Config{Endpoint: srv.Endpoint, Timeouts: store.Timeouts{Header: azuriteTimeout, Idle: azuriteTimeout}}
	s, err := store.Open(context.Background(), "az://"+srv.NewContainer(t), cfg)
	if err != nil {
		t.Fatalf("open azblob store: %v", err)
	}
	return s
}

const azuriteTimeout = 2 * time.Minute

// LocalStores returns the factories that need no server (mem and fs).
func LocalStores() []Factory { return Stores()[:2] }

// EachStore runs fn on a fresh store of every driver, one driver after
// StoreNamed returns a fresh store of the factory of that name, and fails
// the test if there is none.
func StoreNamed(t testing.TB, name string) store.Store {
	t.Helper()
	for _, f := range Stores() {
		if f.Name == name {
			return f.New(t)
		}
	}
	t.Fatalf("testenv: no store factory %q", name)
	return nil
}

// the other, each as a subtest named after its driver.
func EachStore(t *testing.T, fn func(t *testing.T, s store.Store)) {
	t.Helper()
	for _, f := range Stores() {
		t.Run(f.Name, func(t *testing.T) { fn(t, f.New(t)) })
	}
}

// EachStoreAtOnce is EachStore with the drivers run at the same time, for
// tests that mostly wait for a store's clock to move: they use little CPU,
// so they need not queue for -parallel slots.
func EachStoreAtOnce(t *testing.T, fn func(t *testing.T, s store.Store)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, f := range Stores() {
		wg.Go(func() { t.Run(f.Name, func(t *testing.T) { fn(t, f.New(t)) }) })
	}
	wg.Wait()
}

func s3Store(t testing.TB, scheme string) store.Store {
	t.Helper()
	srv := S3(t)
	srv.UseCredentials()
	bucket := srv.NewBucket(t)
	s, err := store.Open(context.Background(), scheme+"://"+bucket, store.Config{Endpoint: srv.Endpoint, PathStyle: true})
	if err != nil {
		t.Fatalf("open %s store: %v", scheme, err)
	}
	return s
}

// gcsStore opens a fresh bucket on the shared Cloud Storage emulator,
// through store.Open as a user would.
func gcsStore(t testing.TB) store.Store {
	t.Helper()
	srv := GCS(t)
	s, err := store.Open(context.Background(), "gs://"+srv.NewBucket(t), store.Config{Endpoint: srv.Endpoint})
	if err != nil {
		t.Fatalf("open gcs store: %v", err)
	}
	return s
}

// ReadString returns the content of key, and fails the test when it cannot
// be read.
func ReadString(t testing.TB, s store.Store, key string) string {
	t.Helper()
	rc, _, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return string(b)
}

// StalledPut starts a Put of key whose body delivers partial and then
// stalls, as a writer does that hangs or is killed mid-upload. It returns
// once the store has read partial; finish ends the body and returns the
// Put's result.
func StalledPut(t testing.TB, s store.Store, key string, partial []byte) (finish func() error) {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := s.Put(context.Background(), key, pr, store.PutOptions{})
		pr.CloseWithError(err)
		done <- err
	}()
	if _, err := pw.Write(partial); err != nil {
		t.Fatalf("stalled put %q: %v", key, err)
	}
	return func() error {
		pw.Close()
		return <-done
	}
}

// FSTempFiles returns the fs driver's temp files under root, as a writer
// leaves them when it stalls or dies mid-upload: files that no listing
// shows.
func FSTempFiles(root string) []string {
	var found []string
	// The walk skips what it cannot read: its function never fails, nor the walk.
	_ = filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.HasPrefix(d.Name(), "#tmp-") {
			found = append(found, p)
		}
		return nil
	})
	return found
}

var publishBuild struct {
	once      sync.Once
	dir, path string
	err       error
}

// PublishBinary builds cmd/publish once per test process, for tests that
// run it as a real process, and returns its path. Main removes it.
func PublishBinary(t testing.TB) string {
	t.Helper()
	b := &publishBuild
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "commitptr-publish-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "publish")
		out, err := exec.Command("go", "build", "-o", b.path, "github.com/commitptr/commitptr/cmd/publish").CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("build cmd/publish: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// removeBinaries deletes what PublishBinary built.
func removeBinaries() {
	if publishBuild.dir != "" {
		os.RemoveAll(publishBuild.dir)
	}
}

// Keys lists the keys of s under prefix, failing the test on an error.
func Keys(t testing.TB, s store.Store, prefix string) []string {
	t.Helper()
	var keys []string
	for o, err := range store.List(context.Background(), s, prefix, "", "") {
		if err != nil {
			t.Fatalf("list %q: %v", prefix, err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}
