package fs

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/portable"
)

func init() {
	store.Register("file", openURL)
}

// openURL opens file:///abs/dir. The whole path is the root directory. A
// root that does not exist yet, in a directory that does, reads as an empty
// store and is created (mode 0700) by the first write, so that a command
// that only reads leaves nothing behind.
func openURL(_ context.Context, u *url.URL, cfg store.Config) (store.Store, error) {
	if err := cfg.RefuseObjectSettings("file"); err != nil {
		return nil, err
	}
	if err := store.RefuseObjectSettingsInURL(u); err != nil {
		return nil, err
	}
	if u.Host != "" && u.Host != "localhost" {
		return nil, fmt.Errorf("fs: URL %q names host %q; want file:///absolute/path", u.String(), u.Host)
	}
	if u.Path == "" || !filepath.IsAbs(u.Path) {
		return nil, fmt.Errorf("fs: URL %q has no absolute path; want file:///absolute/path", u.String())
	}
	root := filepath.Clean(filepath.FromSlash(u.Path))
	_, err := os.Stat(root)
	lazy := errors.Is(err, fs.ErrNotExist)
	if lazy {
		if fi, err := os.Stat(filepath.Dir(root)); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("fs: root directory %s: its parent does not exist: %w", root, store.ErrNoBucket)
		}
	}
	var s *Store
	if lazy {
		s = &Store{root: root, lockWait: store.DefaultHeaderTimeout}
		s.lazyRoot.Store(true)
	} else if s, err = New(root); err != nil {
		return nil, err
	}
	s.SetLockWait(cfg.Timeouts.OrDefaults().Header)
	return s, nil
}

// Store is an object store in a local directory. It is safe for concurrent
// use, also by several processes sharing the directory. Create it with New.
type Store struct {
	root     string        // absolute and clean
	lockWait time.Duration // how long a write waits for a directory's lock
	// lazyRoot is set while the root, missing when the store was opened
	// by URL, is yet to be created by the first write; until then a
	// missing root is an empty store, not a store whose root is gone.
	lazyRoot atomic.Bool
}

// New returns the store rooted at the directory root, which must exist. A
// relative root is made absolute against the current directory. If root is
// missing or not a directory, New returns an error naming it that matches
// store.ErrNoBucket.
func New(root string) (*Store, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("fs: root %q: %w", root, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("fs: root directory %s does not exist: %w", abs, store.ErrNoBucket)
	case err != nil:
		return nil, fmt.Errorf("fs: root directory %s: %w", abs, err)
	case !fi.IsDir():
		return nil, fmt.Errorf("fs: root %s is not a directory: %w", abs, store.ErrNoBucket)
	}
	return &Store{root: abs, lockWait: store.DefaultHeaderTimeout}, nil
}

// SetLockWait sets how long a write waits for the lock of its object's
// directory (store.DefaultHeaderTimeout unless set; file:// URLs take the
// header timeout of store.Config). A lock is held only while one write
// checks and renames, so a long wait means that its holder is paused or
// stuck: a stopped process (SIGSTOP, a frozen container) holds it until it
// resumes, and no other process can safely take it over, since the paused
// write may still complete. The wait fails with an error naming the
// directory instead of hanging. Zero or less means no limit.
func (s *Store) SetLockWait(d time.Duration) { s.lockWait = d }

// Root returns the store's root directory, an absolute path.
func (s *Store) Root() string { return s.root }

// String returns the store's URL.
func (s *Store) String() string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(s.root)}).String()
}

// rootLookedAt runs in classify between its look at the root and its
// judgement; tests make the root there.
var rootLookedAt = func() {}

// classify turns err into the error Store methods return: nil stays nil,
// an error that already carries a store class (or is a *store.OpError) keeps
// it, and an OS error is mapped to its class. This is the driver's only
// classifier.
func (s *Store) classify(op, key string, err error) error {
	var oe *store.OpError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &oe):
		return err
	case errors.Is(err, store.ErrPrecondition), errors.Is(err, store.ErrNotExist),
		errors.Is(err, store.ErrNoBucket), errors.Is(err, store.ErrAccess),
		errors.Is(err, errBadKey),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return store.Wrap(op, key, nil, err)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		// Whether the root is yet to be made is read before the root is
		// looked at: a write that makes it in between makes it exist.
		lazy := s.lazyRoot.Load()
		fi, serr := os.Stat(s.root)
		rootLookedAt()
		if (serr != nil || !fi.IsDir()) && !(errors.Is(serr, fs.ErrNotExist) && lazy) {
			return store.Wrap(op, key, store.ErrNoBucket, fmt.Errorf("root directory %s is gone: %w", s.root, err))
		}
		return store.Wrap(op, key, store.ErrNotExist, err)
	case errors.Is(err, fs.ErrPermission):
		return store.Wrap(op, key, store.ErrAccess, err)
	default:
		return store.Wrap(op, key, nil, err)
	}
}

// precondition returns an error matching store.ErrPrecondition.
func precondition(format string, args ...any) error {
	return fmt.Errorf("%w: %s", store.ErrPrecondition, fmt.Sprintf(format, args...))
}

// open opens the object file of a valid key and reads its trailer.
func (s *Store) open(key string) (*os.File, trailer, time.Time, error) {
	_, file := s.paths(key)
	f, err := os.Open(file)
	if err != nil {
		return nil, trailer{}, time.Time{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, trailer{}, time.Time{}, err
	}
	t, err := readTrailer(f, fi.Size())
	if err != nil {
		f.Close()
		return nil, trailer{}, time.Time{}, err
	}
	return f, t, fi.ModTime(), nil
}

// currentETag returns the ETag of the object file at path.
func currentETag(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	t, err := readTrailer(f, fi.Size())
	return t.ETag, err
}

func attrsOf(t trailer, modified time.Time) store.Attrs {
	a := store.Attrs{
		ETag:            t.ETag,
		Size:            t.Size,
		LastModified:    modified,
		ServerTime:      time.Now(),
		ContentType:     t.ContentType,
		ContentEncoding: t.ContentEncoding,
	}
	if len(t.Metadata) > 0 {
		a.Metadata = maps.Clone(t.Metadata)
	}
	return a
}

// body is the reader Get returns: the body section of the open file.
type body struct {
	*io.SectionReader
	f *os.File
}

func (b *body) Close() error { return b.f.Close() }

// Get implements store.Store. The returned body reads from a file opened
// once, so it sees one version even if the object is replaced meanwhile.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	return s.get(ctx, key, 0, -1)
}

// GetRange implements store.Store. Like Get's, its body reads from a file
// opened once.
func (s *Store) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	if err := portable.CheckRange(off, n); err != nil {
		return nil, store.Attrs{}, store.Wrap("get", key, nil, err)
	}
	return s.get(ctx, key, off, n)
}

// get opens n bytes of the object from off, or all of it when n < 0.
func (s *Store) get(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	const op = "get"
	if err := checkKey(key); err != nil {
		return nil, store.Attrs{}, s.classify(op, key, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, store.Attrs{}, s.classify(op, key, err)
	}
	f, t, mod, err := s.open(key)
	if err != nil {
		return nil, store.Attrs{}, s.classify(op, key, err)
	}
	if n < 0 {
		return &body{SectionReader: io.NewSectionReader(f, 0, t.Size), f: f}, attrsOf(t, mod), nil
	}
	// The file holds the body, then the trailer: the range ends at the
	// body's end, t.Size, not the file's.
	if off >= t.Size {
		f.Close()
		return nil, store.Attrs{}, store.Wrap(op, key, store.ErrInvalidRange, fmt.Errorf("offset %d of an object of %d bytes", off, t.Size))
	}
	return &body{SectionReader: io.NewSectionReader(f, off, min(n, t.Size-off)), f: f}, attrsOf(t, mod), nil
}

// Head implements store.Store.
func (s *Store) Head(ctx context.Context, key string) (store.Attrs, error) {
	const op = "head"
	if err := checkKey(key); err != nil {
		return store.Attrs{}, s.classify(op, key, err)
	}
	if err := ctx.Err(); err != nil {
		return store.Attrs{}, s.classify(op, key, err)
	}
	f, t, mod, err := s.open(key)
	if err != nil {
		return store.Attrs{}, s.classify(op, key, err)
	}
	f.Close()
	return attrsOf(t, mod), nil
}

// Put implements store.Store. The body is written to a temp file and synced
// before the lock of the object's directory is taken; under the lock the
// condition is checked and the file is published with link(2) (IfNoneMatch)
// or rename(2). It never returns store.ErrConflict. If opts.Size is set and
// the body's length differs, Put fails and writes nothing.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, opts store.PutOptions) (store.Attrs, error) {
	const op = "put"
	if err := checkKey(key); err != nil {
		return store.Attrs{}, s.classify(op, key, err)
	}
	a, err := s.put(ctx, key, r, opts)
	return a, s.classify(op, key, err)
}

func (s *Store) put(ctx context.Context, key string, r io.Reader, opts store.PutOptions) (store.Attrs, error) {
	if err := portable.Check(r, opts, math.MaxInt64); err != nil {
		return store.Attrs{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Attrs{}, err
	}
	dir, file := s.paths(key)

	// Fail early, before writing the body, when the condition already
	// fails. This is only a shortcut: the condition is checked again
	// under the lock, and a failure seen here is a valid answer at the
	// time it was seen.
	switch {
	case opts.IfNoneMatch:
		if _, err := os.Lstat(file); err == nil {
			return store.Attrs{}, precondition("object exists")
		}
	case opts.IfMatch != "":
		if err := checkETag(file, opts.IfMatch); err != nil {
			return store.Attrs{}, err
		}
	}

	f, err := s.createTemp(dir)
	if err != nil {
		return store.Attrs{}, err
	}
	tmp := f.Name()
	published := false
	defer func() {
		if !published {
			f.Close()
			os.Remove(tmp)
		}
	}()
	h := md5.New()
	n, err := io.Copy(io.MultiWriter(f, h), r)
	if err != nil {
		return store.Attrs{}, fmt.Errorf("read body: %w", err)
	}
	if opts.Size > 0 && n != opts.Size {
		return store.Attrs{}, fmt.Errorf("fs: body is %d bytes, PutOptions.Size says %d", n, opts.Size)
	}
	t := trailer{
		ETag:            hex.EncodeToString(h.Sum(nil)),
		Size:            n,
		ContentType:     opts.ContentType,
		ContentEncoding: opts.ContentEncoding,
	}
	if len(opts.Metadata) > 0 {
		t.Metadata = maps.Clone(opts.Metadata)
	}
	if err := writeTrailer(f, t); err != nil {
		return store.Attrs{}, err
	}
	if err := f.Sync(); err != nil {
		return store.Attrs{}, err
	}
	if err := f.Close(); err != nil {
		return store.Attrs{}, err
	}
	if err := ctx.Err(); err != nil {
		return store.Attrs{}, err
	}

	l, err := s.lock(ctx, dir)
	if err != nil {
		return store.Attrs{}, tempGone(err) // the temp file was in dir
	}
	defer l.release()
	if opts.IfMatch != "" {
		if err := checkETag(file, opts.IfMatch); err != nil {
			return store.Attrs{}, err
		}
	}
	now := time.Now()
	if err := os.Chtimes(tmp, now, now); err != nil {
		return store.Attrs{}, tempGone(err)
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		return store.Attrs{}, tempGone(err)
	}
	if opts.IfNoneMatch {
		err := os.Link(tmp, file)
		if errors.Is(err, fs.ErrExist) {
			return store.Attrs{}, precondition("object exists")
		}
		if err != nil {
			return store.Attrs{}, tempGone(err)
		}
		published = true
		// The object is published; a sweep of leftovers may have removed
		// the temp name already.
		if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return store.Attrs{}, err
		}
	} else {
		if err := os.Rename(tmp, file); err != nil {
			return store.Attrs{}, tempGone(err)
		}
		published = true
	}
	if err := l.releaseSynced(); err != nil {
		return store.Attrs{}, err
	}
	return attrsOf(t, fi.ModTime()), nil
}

// tempGone explains a put's failure to publish because its temp file went
// missing, which only a sweep of leftovers does (after the body stalled for
// longer than the sweep's age). It is not store.ErrNotExist: nothing was
// published, whatever the object's state.
func tempGone(err error) error {
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fmt.Errorf("fs: the put's temp file was removed before it was published (swept as a leftover?): %v", err)
}

// checkETag returns nil if the object file at path has ETag etag, and an
// error matching store.ErrPrecondition if it has another or does not exist.
func checkETag(path, etag string) error {
	cur, err := currentETag(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return precondition("object does not exist (If-Match %q)", etag)
	case err != nil:
		return err
	case cur != etag:
		return precondition("ETag is %q, not %q", cur, etag)
	}
	return nil
}

// createTemp creates a new temp file in dir, creating dir first if needed.
// A concurrent Delete may remove an empty dir between the two steps, so it
// retries.
func (s *Store) createTemp(dir string) (*os.File, error) {
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(filepath.Join(dir, tmpPrefix+rand.Text()), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil || !errors.Is(err, fs.ErrNotExist) || attempt == 20 {
			return f, err
		}
		// A concurrent delete may prune a directory mkdirs just made;
		// that is ENOENT again, and worth another attempt.
		if err := s.mkdirs(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
}

// mkdirs creates dir and its missing parents below the root, each with mode
// 0700, and syncs the directory that gains an entry. It creates the root
// only while it is yet to be made (lazyRoot).
func (s *Store) mkdirs(dir string) error {
	if dir == s.root || len(dir) <= len(s.root) {
		if s.lazyRoot.Load() {
			if err := s.makeRoot(); err != nil {
				return err
			}
		}
		fi, err := os.Stat(s.root)
		if err == nil && !fi.IsDir() {
			err = syscall.ENOTDIR
		}
		return err
	}
	err := os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrNotExist) {
		if err := s.mkdirs(filepath.Dir(dir)); err != nil {
			return err
		}
		err = os.Mkdir(dir, 0o700)
	}
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return err
	}
	return syncDir(filepath.Dir(dir))
}

// makeRoot creates the root that opening the store left to the first
// write, and makes its name durable.
func (s *Store) makeRoot() error {
	err := os.Mkdir(s.root, 0o700)
	switch {
	case errors.Is(err, fs.ErrExist):
	case err != nil:
		return fmt.Errorf("create root directory %s: %w", s.root, err)
	default:
		if err := syncDir(filepath.Dir(s.root)); err != nil {
			return err
		}
	}
	s.lazyRoot.Store(false)
	return nil
}

// syncDir fsyncs a directory, making the entries added or removed in it
// durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Delete implements store.Store. It removes the object under the lock of its
// directory, then removes the directories left empty, best effort.
func (s *Store) Delete(ctx context.Context, key string, opts store.DeleteOptions) error {
	const op = "delete"
	if err := checkKey(key); err != nil {
		return s.classify(op, key, err)
	}
	return s.classify(op, key, s.delete(ctx, key, opts))
}

func (s *Store) delete(ctx context.Context, key string, opts store.DeleteOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dir, file := s.paths(key)
	if _, err := os.Lstat(file); errors.Is(err, fs.ErrNotExist) {
		return nil // missing: nothing to do, with or without IfMatch
	}
	l, err := s.lock(ctx, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the object's directory went missing meanwhile, and the object with it
	}
	if err != nil {
		return err
	}
	defer l.release()
	if opts.IfMatch != "" {
		cur, err := currentETag(file)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // it went missing meanwhile: not an error
		case err != nil:
			return err
		case cur != opts.IfMatch:
			return precondition("ETag is %q, not %q", cur, opts.IfMatch)
		}
	}
	err = os.Remove(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := l.releaseSynced(); err != nil {
		return err
	}
	s.pruneDirs(dir)
	return nil
}

// pruneDirs removes dir and its parents below the root while they are empty.
// A Put that loses its directory to this retries (see createTemp).
func (s *Store) pruneDirs(dir string) {
	for len(dir) > len(s.root) && dir != s.root {
		if err := syscall.Rmdir(dir); err != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

// DeleteMany implements store.Store. It deletes the keys one by one, goes on
// past failures, and returns the per-key errors joined; invalid keys are
// among them.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	const op = "delete-many"
	var errs []error
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			errs = append(errs, s.classify(op, key, err))
			break
		}
		if err := checkKey(key); err != nil {
			errs = append(errs, s.classify(op, key, err))
			continue
		}
		if err := s.delete(ctx, key, store.DeleteOptions{}); err != nil {
			errs = append(errs, s.classify(op, key, err))
		}
	}
	return errors.Join(errs...)
}
