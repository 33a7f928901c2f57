package fs_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	iofs "io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/fs"
	"github.com/commitptr/commitptr/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}

func newStore(t *testing.T) *fs.Store {
	t.Helper()
	s, err := fs.New(t.TempDir())
	require.NoError(t, err)
	return s
}

func put(t *testing.T, s store.Store, key, body string) store.Attrs {
	t.Helper()
	a, err := s.Put(context.Background(), key, strings.NewReader(body), store.PutOptions{})
	require.NoError(t, err, "put %q", key)
	return a
}

func read(t *testing.T, s store.Store, key string) string {
	t.Helper()
	rc, _, err := s.Get(context.Background(), key)
	require.NoError(t, err, "get %q", key)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return string(b)
}

func listAll(t *testing.T, s store.Store, prefix, delim, after string) []string {
	t.Helper()
	keys := []string{}
	for o, err := range store.List(context.Background(), s, prefix, delim, after) {
		require.NoError(t, err)
		keys = append(keys, o.Key)
	}
	return keys
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for _, c := range []struct {
		name, root string
	}{
		{"missing", filepath.Join(dir, "missing")},
		{"not a directory", file},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := fs.New(c.root)
			require.ErrorIs(t, err, store.ErrNoBucket)
			assert.Contains(t, err.Error(), c.root)
		})
	}

	t.Run("relative", func(t *testing.T) {
		t.Chdir(dir)
		require.NoError(t, os.Mkdir("rel", 0o700))
		s, err := fs.New("rel")
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(dir, "rel"), s.Root())
	})
}

func TestOpenURL(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()

	root := filepath.Join(parent, "root")
	s, err := store.Open(ctx, "file://"+root, store.Config{})
	require.NoError(t, err, "a missing root opens when its parent exists")
	put(t, s, "k", "v")
	fi, err := os.Stat(root)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	_, err = os.Stat(filepath.Join(root, "k#"))
	require.NoError(t, err)

	s2, err := store.Open(ctx, root, store.Config{}) // a plain path
	require.NoError(t, err)
	assert.Equal(t, "v", read(t, s2, "k"))

	t.Run("relative path", func(t *testing.T) {
		t.Chdir(parent)
		s, err := store.Open(ctx, "./root", store.Config{})
		require.NoError(t, err)
		assert.Equal(t, "v", read(t, s, "k"))
	})

	for _, bad := range []string{
		"file://" + filepath.Join(parent, "no", "such", "dir"),
	} {
		_, err := store.Open(ctx, bad, store.Config{})
		require.ErrorIs(t, err, store.ErrNoBucket, bad)
		assert.Contains(t, err.Error(), "no/such/dir")
	}
	for _, bad := range []string{"file://host/x", "file://relative"} {
		_, err := store.Open(ctx, bad, store.Config{})
		require.Error(t, err, bad)
	}
}

// A read that misses while another writer makes the root (between the
// read's look at the root and its judgement) is a missing key, not a root
// that is gone.
func TestReadWhileTheFirstWriteMakesTheRootIsAMissingKey(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "later")
	s, err := store.Open(ctx, "file://"+root, store.Config{})
	require.NoError(t, err)
	w, err := store.Open(ctx, "file://"+root, store.Config{})
	require.NoError(t, err)
	once := false
	defer fs.SetRootLookedAt(func() {
		if !once {
			once = true
			put(t, s, "other", "v") // s's own first write: it makes the root
		}
	})()
	_, _, err = s.Get(ctx, "k")
	require.True(t, once)
	require.ErrorIs(t, err, store.ErrNotExist)
	assert.NotErrorIs(t, err, store.ErrNoBucket)
	_, _, err = w.Get(ctx, "k")
	require.ErrorIs(t, err, store.ErrNotExist)
}

// TestMissingRootReadsEmptyAndIsMadeByTheFirstWrite: a store opened by
// URL on a root that does not exist yet reads as empty and creates
// nothing until it writes; once made, a root that goes away is a missing
// bucket again.
func TestMissingRootReadsEmptyAndIsMadeByTheFirstWrite(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "later")
	s, err := store.Open(ctx, "file://"+root, store.Config{})
	require.NoError(t, err)

	_, _, err = s.Get(ctx, "k")
	require.ErrorIs(t, err, store.ErrNotExist)
	_, err = s.Head(ctx, "k")
	require.ErrorIs(t, err, store.ErrNotExist)
	assert.Empty(t, listAll(t, s, "", "", ""))
	require.NoError(t, s.Delete(ctx, "k", store.DeleteOptions{}))
	require.NoError(t, s.DeleteMany(ctx, []string{"k", "a/b"}))
	_, err = os.Stat(root)
	require.ErrorIs(t, err, iofs.ErrNotExist, "reading creates no root")

	put(t, s, "a/b", "v")
	fi, err := os.Stat(root)
	require.NoError(t, err, "the first write makes the root")
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	assert.Equal(t, "v", read(t, s, "a/b"))

	require.NoError(t, os.RemoveAll(root))
	_, _, err = s.Get(ctx, "a/b")
	require.ErrorIs(t, err, store.ErrNoBucket, "a root made and then removed is gone")
}

func TestObjectAndPrefixCoexist(t *testing.T) {
	s := newStore(t)
	for _, k := range []string{"a", "a/b", "a/b/c", "a#", "a%23", "#x", "a.~obj"} {
		put(t, s, k, "v:"+k)
	}
	for _, k := range []string{"a", "a/b", "a/b/c", "a#", "a%23", "#x", "a.~obj"} {
		assert.Equal(t, "v:"+k, read(t, s, k))
	}
	assert.Equal(t, []string{"#x", "a", "a#", "a%23", "a.~obj", "a/b", "a/b/c"}, listAll(t, s, "", "", ""))
	assert.Equal(t, []string{"#x", "a", "a#", "a%23", "a.~obj", "a/"}, listAll(t, s, "", "/", ""))

	require.NoError(t, s.Delete(context.Background(), "a/b", store.DeleteOptions{}))
	assert.Equal(t, "v:a/b/c", read(t, s, "a/b/c"))
	assert.Equal(t, []string{"a", "a#", "a%23", "a.~obj", "a/b/c"}, listAll(t, s, "a", "", ""))
}

// model lists keys as S3 would, for comparison with the driver.
func model(keys []string, prefix, delim, after string) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range keys { // keys are sorted
		if !strings.HasPrefix(k, prefix) || k <= after {
			continue
		}
		if delim != "" {
			if i := strings.Index(k[len(prefix):], delim); i >= 0 {
				cp := k[:len(prefix)+i+len(delim)]
				if !seen[cp] {
					seen[cp] = true
					out = append(out, cp)
				}
				continue
			}
		}
		out = append(out, k)
	}
	return out
}

// pages lists with explicit pages of maxKeys entries, following tokens.
func pages(t *testing.T, s store.Store, prefix, delim, after string, maxKeys int) []string {
	t.Helper()
	req := store.ListRequest{Prefix: prefix, Delimiter: delim, StartAfter: after, MaxKeys: maxKeys}
	var out []string
	for range 10000 {
		p, err := s.List(context.Background(), req)
		require.NoError(t, err)
		require.LessOrEqual(t, len(p.Objects)+len(p.Prefixes), maxKeys)
		require.True(t, slices.IsSorted(p.Prefixes))
		for _, o := range p.Objects {
			out = append(out, o.Key)
		}
		out = append(out, p.Prefixes...)
		if p.Next == "" {
			slices.Sort(out)
			return out
		}
		require.NotZero(t, len(p.Objects)+len(p.Prefixes), "a page with a token must not be empty")
		req.Token = p.Next
	}
	t.Fatal("listing does not end")
	return nil
}

func TestListMatchesModel(t *testing.T) {
	s := newStore(t)
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "-", "/", ".", "0", "~", "#", "%", "ü"}
	keySet := map[string]bool{}
	for len(keySet) < 150 {
		var b strings.Builder
		for range 1 + rng.IntN(7) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		k := b.String()
		if k[0] == '/' || strings.HasSuffix(k, "/") || strings.Contains(k, "//") {
			continue
		}
		if segs := strings.Split(k, "/"); slices.Contains(segs, ".") || slices.Contains(segs, "..") {
			continue
		}
		keySet[k] = true
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range keySet {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		put(t, s, k, k)
	}
	require.Equal(t, keys, listAll(t, s, "", "", ""))

	prefixes := []string{"", "a", "a/", "a/b", "b/", "-", "ü", "a/a/", "zz", "a//", "../"}
	delims := []string{"", "/", "a", "-", "b/", "ü"}
	for _, prefix := range prefixes {
		for _, delim := range delims {
			for _, after := range []string{"", "a/b", keys[len(keys)/2]} {
				want := model(keys, prefix, delim, after)
				name := fmt.Sprintf("prefix=%q delim=%q after=%q", prefix, delim, after)
				got := listAll(t, s, prefix, delim, after)
				if want == nil {
					want = []string{}
				}
				require.Equal(t, want, got, name)
				for _, max := range []int{1, 7} {
					sorted := slices.Clone(want)
					slices.Sort(sorted)
					if len(sorted) == 0 {
						sorted = nil
					}
					require.Equal(t, sorted, pages(t, s, prefix, delim, after, max), "%s max=%d", name, max)
				}
			}
		}
	}
}

func TestListManyPages(t *testing.T) {
	s := newStore(t)
	const n = 2100
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("m/%02d/%04d", i%13, i))
	}
	var g errgroup.Group
	g.SetLimit(16)
	for _, k := range want {
		g.Go(func() error {
			_, err := s.Put(context.Background(), k, strings.NewReader("x"), store.PutOptions{})
			return err
		})
	}
	require.NoError(t, g.Wait())
	slices.Sort(want)

	p, err := s.List(context.Background(), store.ListRequest{MaxKeys: 5000})
	require.NoError(t, err)
	assert.Len(t, p.Objects, store.MaxListPage, "MaxKeys is capped")
	assert.NotEmpty(t, p.Next)

	assert.Equal(t, want, listAll(t, s, "", "", ""))
	assert.Equal(t, want[1100:], listAll(t, s, "m/", "", want[1099]))
	assert.Len(t, listAll(t, s, "m/", "/", ""), 13)
	assert.Equal(t, []string{"m/"}, listAll(t, s, "", "/", ""))
}

func TestListBadToken(t *testing.T) {
	s := newStore(t)
	_, err := s.List(context.Background(), store.ListRequest{Token: "zzz"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "token")
}

func TestBadKeys(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	require.NoError(t, os.Mkdir(root, 0o700))
	s, err := fs.New(root)
	require.NoError(t, err)
	ctx := context.Background()

	for _, key := range []string{
		"", "../x", "..", "a/../../x", "/abs", "/", "a//b", "a/", "./a", "a/./b",
		"a\\b", "..\\x", "nul\x00byte", "\xff\xfe", strings.Repeat("x", 1025), strings.Repeat("y", 300),
	} {
		t.Run(fmt.Sprintf("%q", key), func(t *testing.T) {
			check := func(op string, err error) {
				t.Helper()
				require.Error(t, err, op)
				assert.Contains(t, err.Error(), fmt.Sprintf("%q", key), "%s: the error names the key", op)
				assert.Contains(t, err.Error(), "invalid key", op)
				assert.ErrorIs(t, err, store.ErrInvalidKey, op)
				var oe *store.OpError
				require.ErrorAs(t, err, &oe)
				assert.Equal(t, key, oe.Key)
			}
			_, err := s.Put(ctx, key, strings.NewReader("evil"), store.PutOptions{})
			check("put", err)
			_, err = s.Put(ctx, key, strings.NewReader("evil"), store.PutOptions{IfNoneMatch: true})
			check("put-if-none-match", err)
			_, err = s.Put(ctx, key, strings.NewReader("evil"), store.PutOptions{IfMatch: "x"})
			check("put-if-match", err)
			_, _, err = s.Get(ctx, key)
			check("get", err)
			_, err = s.Head(ctx, key)
			check("head", err)
			check("delete", s.Delete(ctx, key, store.DeleteOptions{}))
			check("delete-many", s.DeleteMany(ctx, []string{"fine", key}))
		})
	}

	var names []string
	err = filepath.WalkDir(parent, func(p string, _ iofs.DirEntry, err error) error {
		names = append(names, p)
		return err
	})
	require.NoError(t, err)
	assert.Equal(t, []string{parent, root}, names, "nothing is written anywhere")

	// A prefix that cannot hold keys lists nothing, and reads nothing
	// outside the root.
	require.NoError(t, os.WriteFile(filepath.Join(parent, "outside#"), []byte("x"), 0o600))
	for _, prefix := range []string{"../", "../outside", "/", "a//", "./"} {
		assert.Empty(t, listAll(t, s, prefix, "", ""), prefix)
		assert.Empty(t, listAll(t, s, prefix, "/", ""), prefix)
	}
}

func TestModes(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	put(t, s, "a/b/c", "x")
	_, err := s.Put(ctx, "a/d", strings.NewReader("y"), store.PutOptions{IfNoneMatch: true})
	require.NoError(t, err)
	a := put(t, s, "e", "z")
	_, err = s.Put(ctx, "e", strings.NewReader("w"), store.PutOptions{IfMatch: a.ETag})
	require.NoError(t, err)

	var files, dirs int
	err = filepath.WalkDir(s.Root(), func(p string, d iofs.DirEntry, err error) error {
		if err != nil || p == s.Root() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs++
			assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), p)
		} else {
			files++
			assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 2, dirs, "a and a/b")
	assert.Equal(t, 3, files, "3 objects")
}

func TestDeleteRemovesEmptyDirs(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	put(t, s, "x/y/z/1", "1")
	put(t, s, "x/2", "2")
	require.NoError(t, s.Delete(ctx, "x/y/z/1", store.DeleteOptions{}))
	_, err := os.Stat(filepath.Join(s.Root(), "x", "y"))
	require.ErrorIs(t, err, iofs.ErrNotExist, "empty directories are removed")
	_, err = os.Stat(filepath.Join(s.Root(), "x"))
	require.NoError(t, err, "a directory that still holds an object stays")
	require.NoError(t, s.DeleteMany(ctx, []string{"x/2"}))
	entries, err := os.ReadDir(s.Root())
	require.NoError(t, err, "the root stays")
	assert.Empty(t, entries, "nothing is left in the root")

	// Puts and deletes racing in the same directories never fail.
	done := make(chan error, 8)
	for w := range 8 {
		go func() {
			for i := range 50 {
				key := fmt.Sprintf("race/%d/k", i%3)
				if w%2 == 0 {
					_, err := s.Put(ctx, key+fmt.Sprint(w), strings.NewReader("x"), store.PutOptions{})
					if err != nil {
						done <- err
						return
					}
				} else if err := s.Delete(ctx, key+fmt.Sprint(w-1), store.DeleteOptions{}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		require.NoError(t, <-done)
	}
}

func TestInternalFilesHidden(t *testing.T) {
	s := newStore(t)
	put(t, s, "d/k", "v")
	// A temp file left by a crashed writer, and a foreign file.
	require.NoError(t, os.WriteFile(filepath.Join(s.Root(), "d", "#tmp-crashed"), []byte("junk"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(s.Root(), "d", "foreign.txt"), []byte("junk"), 0o600))
	// The lock directory of earlier versions of the driver.
	require.NoError(t, os.Mkdir(filepath.Join(s.Root(), "#locks"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(s.Root(), "#locks", "a1b"), nil, 0o600))
	assert.Equal(t, []string{"d/k"}, listAll(t, s, "", "", ""))
	_, err := s.SweepLeftovers(context.Background(), "", 0)
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(s.Root(), "#locks", "a1b"))
	require.NoError(t, err, "a sweep leaves the old lock files alone")
}

func TestErrors(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	a := put(t, s, "k", "v")

	_, err := s.Put(ctx, "k", strings.NewReader("v"), store.PutOptions{IfNoneMatch: true})
	require.ErrorIs(t, err, store.ErrPrecondition)
	assert.Contains(t, err.Error(), `put "k"`)

	_, err = s.Put(ctx, "k", strings.NewReader("v"), store.PutOptions{IfMatch: "nope"})
	require.ErrorIs(t, err, store.ErrPrecondition)
	assert.Contains(t, err.Error(), a.ETag)

	_, err = s.Put(ctx, "k", strings.NewReader("v"), store.PutOptions{IfMatch: a.ETag, IfNoneMatch: true})
	require.Error(t, err)

	_, err = s.Put(ctx, "sized", strings.NewReader("four"), store.PutOptions{Size: 5})
	require.Error(t, err)
	_, err = s.Head(ctx, "sized")
	require.ErrorIs(t, err, store.ErrNotExist, "a short body writes nothing")

	require.NoError(t, s.Delete(ctx, "gone", store.DeleteOptions{IfMatch: a.ETag}), "a missing key is not an error")
	err = s.Delete(ctx, "k", store.DeleteOptions{IfMatch: "nope"})
	require.ErrorIs(t, err, store.ErrPrecondition)

	// A corrupt object file is an error, not a silently empty object.
	require.NoError(t, os.WriteFile(filepath.Join(s.Root(), "bad#"), []byte("not an object"), 0o600))
	_, _, err = s.Get(ctx, "bad")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "corrupt")
	assert.NotErrorIs(t, err, store.ErrNotExist)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Put(cancelled, "c", strings.NewReader("v"), store.PutOptions{})
	require.ErrorIs(t, err, context.Canceled)

	// The root vanishing is ErrNoBucket, and a put does not recreate it.
	require.NoError(t, os.RemoveAll(s.Root()))
	_, err = s.Head(ctx, "k")
	require.ErrorIs(t, err, store.ErrNoBucket)
	_, err = s.Put(ctx, "a/b", strings.NewReader("v"), store.PutOptions{})
	require.ErrorIs(t, err, store.ErrNoBucket)
	_, err = os.Stat(s.Root())
	require.ErrorIs(t, err, iofs.ErrNotExist)
}

func TestAttrs(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	before := time.Now()
	a, err := s.Put(ctx, "k", strings.NewReader("hello"), store.PutOptions{
		Metadata: map[string]string{"write-id": "w1"}, ContentType: "text/plain",
	})
	require.NoError(t, err)
	assert.Equal(t, "5d41402abc4b2a76b9719d911017c592", a.ETag, "the ETag is the body's MD5")
	assert.EqualValues(t, 5, a.Size)
	assert.False(t, a.LastModified.Before(before))
	assert.False(t, a.ServerTime.Before(a.LastModified))

	h, err := s.Head(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, a.LastModified, h.LastModified)
	assert.Equal(t, map[string]string{"write-id": "w1"}, h.Metadata)
	assert.Equal(t, "text/plain", h.ContentType)

	p, err := s.List(ctx, store.ListRequest{})
	require.NoError(t, err)
	require.Len(t, p.Objects, 1)
	assert.Equal(t, store.Object{Key: "k", Size: 5, ETag: a.ETag, LastModified: a.LastModified}, p.Objects[0])
}

func TestGetSeesOneVersion(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	put(t, s, "k", strings.Repeat("1", 1<<16))
	rc, a, err := s.Get(ctx, "k")
	require.NoError(t, err)
	defer rc.Close()
	put(t, s, "k", strings.Repeat("2", 10))
	require.NoError(t, s.Delete(ctx, "k", store.DeleteOptions{}))
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("1", 1<<16), string(b))
	assert.EqualValues(t, 1<<16, a.Size)
}

func TestLockHonoursContext(t *testing.T) {
	s := newStore(t)
	put(t, s, "d/k", "v")
	// Hold the lock of the object's directory from this process through
	// another descriptor.
	ctx := context.Background()
	release := holdDirLock(t, filepath.Join(s.Root(), "d"))
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := s.Put(short, "d/k", strings.NewReader("w"), store.PutOptions{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	release()
	assert.Equal(t, "v", read(t, s, "d/k"))
	put(t, s, "d/k", "w")
	assert.Equal(t, "w", read(t, s, "d/k"))
}

// holdDirLock flocks the directory dir, as another process would.
func holdDirLock(t *testing.T, dir string) func() {
	t.Helper()
	f, err := os.Open(dir)
	require.NoError(t, err)
	require.NoError(t, flockEx(f))
	return func() { f.Close() }
}

func Example() {
	dir, err := os.MkdirTemp("", "commitptr-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := fs.New(dir)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	a, err := s.Put(ctx, "P/_pointer", bytes.NewReader([]byte("v1")), store.PutOptions{IfNoneMatch: true})
	if err != nil {
		panic(err)
	}
	_, err = s.Put(ctx, "P/_pointer", bytes.NewReader([]byte("v2")), store.PutOptions{IfNoneMatch: true})
	fmt.Println("second create:", err)
	_, err = s.Put(ctx, "P/_pointer", bytes.NewReader([]byte("v2")), store.PutOptions{IfMatch: a.ETag})
	fmt.Println("CAS:", err)
	// Output:
	// second create: put "P/_pointer": store: precondition failed: object exists
	// CAS: <nil>
}

// TestCASNestedRoots: goroutines update one counter through two stores, one
// rooted in a directory of the other, with the key spelled accordingly. The
// two spellings meet one lock, so no increment is lost.
func TestCASNestedRoots(t *testing.T) {
	const workers, incs = 8, 40
	outer := newStore(t)
	require.NoError(t, os.Mkdir(filepath.Join(outer.Root(), "sub"), 0o700))
	inner, err := fs.New(filepath.Join(outer.Root(), "sub"))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = inner.Put(ctx, "counter", strings.NewReader("0"), store.PutOptions{IfNoneMatch: true})
	require.NoError(t, err)

	lines := make([][]string, workers)
	var g errgroup.Group
	for w := range workers {
		s, key := store.Store(outer), "sub/counter"
		if w%2 == 1 {
			s, key = inner, "counter"
		}
		g.Go(func() error {
			return storetest.Increment(ctx, s, key, incs, func(v int) { lines[w] = append(lines[w], fmt.Sprintf("inc %d", v)) })
		})
	}
	require.NoError(t, g.Wait())
	checkIncrements(t, outer, "sub/counter", lines, incs)
}

// TestLockWaitBounded: a write whose directory's lock another process
// holds (a writer paused inside its critical section) gives up after the
// store's lock wait with an error naming the directory, instead of
// hanging, and writes nothing.
func TestLockWaitBounded(t *testing.T) {
	s := newStore(t)
	a := put(t, s, "d/k", "v")
	release := holdDirLock(t, filepath.Join(s.Root(), "d"))
	defer release()
	s.SetLockWait(200 * time.Millisecond)
	start := time.Now()
	_, err := s.Put(context.Background(), "d/k", strings.NewReader("w"), store.PutOptions{IfMatch: a.ETag})
	require.ErrorIs(t, err, fs.ErrLockWait)
	assert.Contains(t, err.Error(), filepath.Join(s.Root(), "d"))
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
	err = s.Delete(context.Background(), "d/k", store.DeleteOptions{IfMatch: a.ETag})
	require.ErrorIs(t, err, fs.ErrLockWait)
	release()
	assert.Equal(t, "v", read(t, s, "d/k"), "nothing was written")
	_, err = s.Put(context.Background(), "d/k", strings.NewReader("w"), store.PutOptions{IfMatch: a.ETag})
	require.NoError(t, err)
}
