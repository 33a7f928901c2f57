package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// hookedStores are the stores behind hooked://NAME URLs, by NAME.
var hookedStores sync.Map

func init() {
	store.Register("hooked", func(_ context.Context, u *url.URL, _ store.Config) (store.Store, error) {
		s, ok := hookedStores.Load(u.Host)
		if !ok {
			return nil, fmt.Errorf("no hooked store %q", u.Host)
		}
		return s.(store.Store), nil
	})
}

// hookedURL returns a hooked:// dataset URL for s.
func hookedURL(t *testing.T, s store.Store) string {
	t.Helper()
	name := "changing-" + uuid.NewString()[:8]
	hookedStores.Store(name, s)
	t.Cleanup(func() { hookedStores.Delete(name) })
	return "hooked://" + name
}

// changingDrivers are the drivers the tests of files that change while
// they are read run on: every driver of testenv.Stores (the S3 ones on
// versitygw), and the s3 and minio drivers on gofakes3.
func changingDrivers() []testenv.Factory {
	gofakes3 := func(scheme string) testenv.Factory {
		return testenv.Factory{Name: scheme + "-gofakes3", New: func(t testing.TB) store.Store {
			srv := testenv.Gofakes3(t)
			srv.UseCredentials()
			s, err := store.Open(context.Background(), scheme+"://"+srv.NewBucket(t), store.Config{Endpoint: srv.Endpoint, PathStyle: true})
			require.NoError(t, err)
			return s
		}}
	}
	return append(testenv.Stores(), gofakes3("s3"), gofakes3("minio"))
}

// The files the tests change are changingSize bytes; the store's read of
// the body pauses at changingAt for the change.
const (
	changingSize = 256 << 10
	changingAt   = 64 << 10
)

// writeDated writes body at path, dated an hour ago, so that any later
// write moves its modification time whatever the clock's tick.
func writeDated(t *testing.T, path string, body []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, body, 0o644))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(path, old, old))
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

// writeAt writes b over path at off, in place. It runs in the store's
// reading goroutine, so it reports with assert.
func writeAt(t *testing.T, path string, b []byte, off int64) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if assert.NoError(t, err) {
		_, err = f.WriteAt(b, off)
		assert.NoError(t, err)
		assert.NoError(t, f.Close())
	}
}

// listing returns every key of s with its size, sorted.
func listing(t *testing.T, s store.Store) []string {
	t.Helper()
	var keys []string
	for o, err := range store.List(context.Background(), s, "", "", "") {
		require.NoError(t, err)
		keys = append(keys, fmt.Sprintf("%s %d", o.Key, o.Size))
	}
	sort.Strings(keys)
	return keys
}

// TestPutRefusesFileChangedWhileRead: a file of SRC rewritten in place
// with the same size, or cut short, while put uploads it fails the put
// with status 1 and a message naming the file in words (not the store's
// byte counts), on every driver; nothing is committed: the pointer is
// unchanged and what put staged is deleted (the store holds what it held
// before).
func TestPutRefusesFileChangedWhileRead(t *testing.T) {
	changes := map[string]func(t *testing.T, path string){
		"rewritten": func(t *testing.T, path string) { writeAt(t, path, make([]byte, changingSize), 0) },
		"shrunk":    func(t *testing.T, path string) { assert.NoError(t, os.Truncate(path, changingAt+1000)) },
	}
	for _, f := range changingDrivers() {
		for name, change := range changes {
			t.Run(f.Name+"/"+name, func(t *testing.T) {
				s := f.New(t)
				src := writeTree(t, map[string]string{"other.txt": "published before"})
				url := hookedURL(t, s)
				ok(t, "put", src, url)
				ptr := readObject(t, s, pointer.Key)
				before := listing(t, s)

				big := filepath.Join(src, "big.bin")
				writeDated(t, big, randomBytes(t, changingSize))
				hook := faults.NewStore(s)
				var changed atomic.Bool
				hook.Add(faults.Rule{Op: store.OpPut, Suffix: "/big.bin", Kind: faults.Paused, At: changingAt, Times: 1, Then: func() {
					change(t, big)
					changed.Store(true)
				}})
				hookedStores.Store(url[len("hooked://"):], hook)
				code, out, errs := cli(t, "", "put", src, url)
				require.True(t, changed.Load(), "the upload read past the change")
				assert.Equal(t, exitError, code, "stdout: %s\nstderr: %s", out, errs)
				assert.Contains(t, errs, "publish: "+big+": changed while it was read (")
				assert.Contains(t, errs, "nothing was committed")
				assert.Contains(t, errs, "--ignore-changing")
				assert.NotContains(t, errs, "Size says")
				assert.NotContains(t, errs, "bytes, expected")
				assert.Equal(t, string(ptr), string(readObject(t, s, pointer.Key)), "the pointer is unchanged")
				assert.Equal(t, before, listing(t, s), "what put staged is deleted")
			})
		}
	}
}

// TestPutIgnoreChanging: with --ignore-changing, a file that grows while
// put uploads it, as a log does, is published with the content it had
// when put opened it, and put exits 0; one cut short still fails, naming
// it, and commits nothing.
func TestPutIgnoreChanging(t *testing.T) {
	for _, f := range testenv.LocalStores() {
		t.Run(f.Name, func(t *testing.T) {
			s := f.New(t)
			src := t.TempDir()
			log := filepath.Join(src, "app.log")
			body := randomBytes(t, changingSize)
			writeDated(t, log, body)
			hook := faults.NewStore(s)
			var grown, cut atomic.Bool
			hook.Add(faults.Rule{Op: store.OpPut, Suffix: "/app.log", Kind: faults.Paused, At: changingAt, Times: 1, Then: func() {
				f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
				if assert.NoError(t, err) {
					_, err = f.WriteString("a line written while put read the log\n")
					assert.NoError(t, err)
					assert.NoError(t, f.Close())
				}
				grown.Store(true)
			}})
			url := hookedURL(t, hook)
			ok(t, "put", "--ignore-changing", src, url)
			require.True(t, grown.Load())
			snap, err := commit.New(s).Open(context.Background())
			require.NoError(t, err)
			e, found := snap.Manifest.Find("app.log")
			require.True(t, found)
			rc, err := snap.OpenEntry(context.Background(), e)
			require.NoError(t, err)
			got, err := io.ReadAll(rc)
			rc.Close()
			require.NoError(t, err)
			assert.Equal(t, body, got, "the content the log had when put opened it")

			ptr := readObject(t, s, pointer.Key)
			before := listing(t, s)
			writeDated(t, log, randomBytes(t, changingSize))
			hook.Add(faults.Rule{Op: store.OpPut, Suffix: "/app.log", Kind: faults.Paused, At: changingAt, Times: 1, Then: func() {
				assert.NoError(t, os.Truncate(log, changingAt+1000))
				cut.Store(true)
			}})
			code, _, errs := cli(t, "", "put", "--ignore-changing", src, url)
			require.True(t, cut.Load())
			assert.Equal(t, exitError, code, errs)
			assert.Contains(t, errs, log+": changed while it was read (its size went from")
			assert.Contains(t, errs, "nothing was committed")
			assert.Equal(t, string(ptr), string(readObject(t, s, pointer.Key)))
			assert.Equal(t, before, listing(t, s))
		})
	}
}

// TestVerifyRepairRefusesFileChangedWhileRead: verify --repair uploading a
// file of SRC that is written to while it is read fails with status 1,
// naming it, and commits nothing, on every driver: even a write to the
// part already read, which leaves what was uploaded as the manifest says.
func TestVerifyRepairRefusesFileChangedWhileRead(t *testing.T) {
	for _, f := range changingDrivers() {
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			s := f.New(t)
			src := writeTree(t, map[string]string{"other.txt": "intact"})
			big := filepath.Join(src, "big.bin")
			writeDated(t, big, randomBytes(t, changingSize))
			url := hookedURL(t, s)
			ok(t, "put", src, url)
			snap, err := commit.New(s).Open(ctx)
			require.NoError(t, err)
			e, found := snap.Manifest.Find("big.bin")
			require.True(t, found)
			require.NoError(t, s.Delete(ctx, e.Key, store.DeleteOptions{}))
			ptr := readObject(t, s, pointer.Key)
			before := listing(t, s)

			hook := faults.NewStore(s)
			var changed atomic.Bool
			hook.Add(faults.Rule{Op: store.OpPut, Suffix: "/big.bin", Kind: faults.Paused, At: changingAt, Times: 1, Then: func() {
				b, err := os.ReadFile(big)
				if assert.NoError(t, err) {
					writeAt(t, big, []byte{^b[0]}, 0) // the first byte, read already
				}
				changed.Store(true)
			}})
			hookedStores.Store(url[len("hooked://"):], hook)
			code, out, errs := cli(t, "", "verify", "--repair", src, url)
			require.True(t, changed.Load())
			assert.Equal(t, exitError, code, "stdout: %s\nstderr: %s", out, errs)
			assert.Contains(t, errs, "repair big.bin: "+big+": changed while it was read (")
			assert.Contains(t, errs, "nothing was committed")
			assert.Equal(t, string(ptr), string(readObject(t, s, pointer.Key)), "the pointer is unchanged")
			assert.Equal(t, before, listing(t, s), "what the repair staged is deleted")
		})
	}
}

// TestPutReuploadRefusesFileChangedWhileRead: a file that matched the
// current generation, whose stored object turned out missing, is read
// again to upload it; rewritten while it is, the put fails with status 1,
// naming it, and commits nothing.
func TestPutReuploadRefusesFileChangedWhileRead(t *testing.T) {
	for _, f := range testenv.LocalStores() {
		t.Run(f.Name, func(t *testing.T) {
			ctx := context.Background()
			s := f.New(t)
			src := writeTree(t, map[string]string{"other.txt": "intact"})
			big := filepath.Join(src, "big.bin")
			writeDated(t, big, randomBytes(t, changingSize))
			url := hookedURL(t, s)
			ok(t, "put", src, url)
			snap, err := commit.New(s).Open(ctx)
			require.NoError(t, err)
			e, found := snap.Manifest.Find("big.bin")
			require.True(t, found)
			require.NoError(t, s.Delete(ctx, e.Key, store.DeleteOptions{}))
			ptr := readObject(t, s, pointer.Key)
			before := listing(t, s)

			hook := faults.NewStore(s)
			var changed atomic.Bool
			hook.Add(faults.Rule{Op: store.OpPut, Suffix: "/big.bin", Kind: faults.Paused, At: changingAt, Times: 1, Then: func() {
				writeAt(t, big, make([]byte, changingSize), 0)
				changed.Store(true)
			}})
			hookedStores.Store(url[len("hooked://"):], hook)
			code, out, errs := cli(t, "", "put", src, url)
			require.True(t, changed.Load())
			assert.Equal(t, exitError, code, "stdout: %s\nstderr: %s", out, errs)
			assert.Contains(t, errs, "publish: "+big+": changed while it was read (")
			assert.Contains(t, errs, "--ignore-changing")
			assert.Equal(t, string(ptr), string(readObject(t, s, pointer.Key)), "the pointer is unchanged")
			assert.Equal(t, before, listing(t, s), "what put staged is deleted")
		})
	}
}
