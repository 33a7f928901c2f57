// Package mount is a read-only FUSE file system of a dataset's snapshot,
// on github.com/hanwen/go-fuse/v2. It owns the file system's tree (the
// directories the manifest's paths imply), the verified file cache, the
// pins of the generations it shows, and following the pointer (Follow).
//
// The snapshot is resolved once, as commit.Dataset.OpenRef resolves a
// commit.Ref, and pinned while mounted (the pin renewed every third of its
// TTL). Directory listings and attributes come from the manifest: no
// request reaches the store for them.
//
// Every byte served is verified first. A file whose entry has part
// checksums (generation.Entry.Parts: put records them for files longer
// than a part, 8 MiB by default) is read by parts as it is read: each part
// a read touches is fetched in one ranged GET through
// commit.Snapshot.ReadPart, checked against its sha256, and kept in the
// cache; a read in the second half of a part fetches the next one ahead.
// A part whose stored bytes do not match fails the reads that touch it
// with EIO, and the reason is logged. Any other file (small, compressed,
// or written before part checksums) is verified whole: opening it reads
// its object in one GET through commit.Snapshot.OpenEntry, which checks
// size and sha256 while it streams, and the open succeeds only once every
// byte matched; a file that does not match cannot be opened (EIO). No byte
// that failed verification is ever served.
//
// The cache keeps the verified files and parts by content, bounded by
// Options.CacheBytes (least recently used first out); an open file read
// whole keeps its copy until it is closed, so the disk used is at most the
// bound plus those files and the parts being read.
//
// With Follow, the pointer (or, for a tag, the tag) is read every
// Options.Refresh; when it names a new generation, the root shows it at
// once: the root's entries are never
// cached by the kernel, and every lookup from the root resolves in the
// current generation. Below the root, each generation has inodes of its
// own, so a file or directory already open stays in its generation, whose
// pin is kept until its last file is closed.
package mount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/pointer"
)

// ErrNoFUSE means FUSE cannot be used here: the kernel has no FUSE device,
// or this process may not mount.
var ErrNoFUSE = errors.New("FUSE is not available")

// Options configure a mount.
type Options struct {
	// Ref names the snapshot to show; the zero Ref is the current one.
	Ref commit.Ref
	// Follow shows each new commit as it lands, or with a tag Ref each
	// generation the tag is moved to. Ref must be current or a tag.
	Follow bool
	// Refresh is how often the pointer is read when following; the
	// default is five seconds.
	Refresh time.Duration
	// CacheBytes bounds the verified copies of files and parts that no
	// reader holds; the default is 256 MiB.
	CacheBytes int64
	// CacheDir holds the copies, as unlinked files; the default is
	// os.TempDir().
	CacheDir string
	// PinTTL is the TTL of the pins that hold the generations shown,
	// renewed every third of it. The default is five minutes; a negative
	// value pins nothing.
	PinTTL time.Duration
	// Owner names the mount in its pins.
	Owner string
	// FsName is the source shown in the mount table (the dataset's URL).
	FsName string
	// Logger receives warnings and the files that fail verification;
	// the default discards.
	Logger *slog.Logger
	// AllowOther lets users other than the one mounting read the files,
	// as their recorded permission bits allow (the kernel checks them).
	// A user other than root needs user_allow_other in /etc/fuse.conf.
	AllowOther bool
}

// FS is a mounted snapshot. Unmount it to release its pins.
type FS struct {
	d    *commit.Dataset
	dir  string
	opts Options
	log  *slog.Logger

	srv         *fuse.Server
	cache       *cache
	pins        *commit.PinHolder // nil when nothing is pinned
	rootTimeout time.Duration
	inos        atomic.Uint64

	cur atomic.Pointer[tree]

	mu   sync.Mutex
	old  []*tree // generations no longer current, with files open
	idle chan struct{}

	life     context.Context
	stop     context.CancelFunc
	loopDone chan struct{}
	unmount  sync.Once
	err      error
	gone     atomic.Bool // the server ended: unmounted (from outside, or by Unmount)
}

// Mount resolves opts.Ref in d, pins it, and mounts it read-only at dir,
// an existing directory. It returns once the file system answers.
func Mount(ctx context.Context, d *commit.Dataset, dir string, opts Options) (*FS, error) {
	if opts.Follow && !movable(opts.Ref) {
		return nil, fmt.Errorf("mount: follow shows the current snapshot or a tag's; %s names one that does not move", opts.Ref)
	}
	if opts.Refresh <= 0 {
		opts.Refresh = 5 * time.Second
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 256 << 20
	}
	if opts.CacheDir == "" {
		opts.CacheDir = os.TempDir()
	}
	if opts.PinTTL == 0 {
		opts.PinTTL = 5 * time.Minute
	}
	if opts.Owner == "" {
		opts.Owner = "publish mount"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := checkDevice(fuseDevice); err != nil {
		return nil, err
	}
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("mount: mount point: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("mount: mount point %s is not a directory", dir)
	}
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	m := &FS{d: d, dir: dir, opts: opts, log: opts.Logger, idle: make(chan struct{}, 1),
		life: life, stop: stop, loopDone: make(chan struct{})}
	m.inos.Store(rootIno)
	m.cache = newCache(life, opts.CacheDir, opts.CacheBytes)
	if opts.PinTTL > 0 {
		m.pins = commit.NewPinHolder(opts.PinTTL, opts.Owner, opts.Logger)
	}

	snap, err := d.OpenRef(ctx, opts.Ref)
	if err != nil {
		stop()
		return nil, err
	}
	t := m.newTree(snap)
	m.pin(ctx, t)
	m.cur.Store(t)

	long := immutable
	fo := &fs.Options{
		MountOptions: fuse.MountOptions{
			FsName:           opts.FsName,
			Name:             "commitptr",
			DirectMount:      true,
			DirectMountFlags: directMountFlags,
			MaxReadAhead:     1 << 20,
			DisableXAttrs:    true,
			AllowOther:       opts.AllowOther,
		},
		UID: uint32(os.Getuid()), GID: uint32(os.Getgid()),
	}
	if opts.AllowOther {
		// Other users are held to the files' permission bits.
		fo.MountOptions.Options = append(fo.MountOptions.Options, "default_permissions")
	}
	if opts.Follow {
		// The root's entries and attributes are not cached, so that a
		// lookup from the root always reaches the current generation.
		m.rootTimeout = 0
	} else {
		m.rootTimeout = long
		fo.EntryTimeout, fo.AttrTimeout, fo.NegativeTimeout = &long, &long, &long
	}
	srv, err := fs.Mount(dir, &rootNode{m: m}, fo)
	if err != nil {
		rerr := m.releasePins(context.WithoutCancel(ctx))
		stop()
		return nil, errors.Join(mountError(dir, err), rerr)
	}
	m.srv = srv
	go m.loop()
	return m, nil
}

// Snapshot returns the snapshot the root shows now.
func (m *FS) Snapshot() *commit.Snapshot { return m.current().snap }

// Dir returns the mount point.
func (m *FS) Dir() string { return m.dir }

// Wait returns once the file system is unmounted, by Unmount or from
// outside (umount).
func (m *FS) Wait() {
	m.srv.Wait()
	m.gone.Store(true)
}

// Unmount unmounts the file system, waits until it stops answering, and
// releases its pins. A mount point still in use (a process has a file or
// its working directory there) is detached lazily: it leaves the mount
// table at once, and those processes get errors.
func (m *FS) Unmount(ctx context.Context) error {
	m.unmount.Do(func() {
		var err error
		if !m.gone.Load() {
			err = m.srv.Unmount()
		}
		if err != nil {
			if derr := detach(m.dir); derr == nil {
				m.log.Warn("mount: the mount point was busy; it is detached, and processes still using it get errors", "dir", m.dir)
				err = nil
			} else {
				err = fmt.Errorf("mount: unmount %s: %w (and detaching it: %v)", m.dir, err, derr)
			}
		}
		m.stop()
		<-m.loopDone
		m.cache.close()
		m.err = errors.Join(err, m.releasePins(ctx))
	})
	return m.err
}

func (m *FS) current() *tree { return m.cur.Load() }

func (m *FS) newTree(snap *commit.Snapshot) *tree {
	return newTree(snap, &m.inos, func(path string) {
		m.log.Warn("mount: a path is a file and a directory's prefix; the directory is shown", "path", path, "generation", snap.Generation())
	})
}

// pin holds t's generation pinned until unpin; a store that refuses (a
// read-only role) leaves it unpinned, readable while the collector
// retains it.
func (m *FS) pin(ctx context.Context, t *tree) {
	if m.pins != nil {
		m.pins.Hold(ctx, t.snap)
	}
}

// unpin drops the hold pin took on t's generation.
func (m *FS) unpin(ctx context.Context, t *tree) {
	if m.pins != nil {
		m.pins.Drop(ctx, t.snap.Generation())
	}
}

// opened counts a file handle of t. A generation no longer shown is held
// again if it was let go: a process may open a file from a directory of
// it that it keeps open.
func (m *FS) opened(ctx context.Context, t *tree) {
	m.mu.Lock()
	t.open.Add(1)
	again := t != m.current() && !slices.Contains(m.old, t)
	if again {
		m.old = append(m.old, t)
	}
	m.mu.Unlock()
	if again {
		m.pin(ctx, t)
	}
}

// closed is called when a file handle of t closes.
func (m *FS) closed(t *tree) {
	if t.open.Add(-1) == 0 && t != m.current() {
		select {
		case m.idle <- struct{}{}:
		default:
		}
	}
}

// loop follows the pointer, renews the pins, and unpins the generations
// that are neither current nor open.
func (m *FS) loop() {
	defer close(m.loopDone)
	var follow <-chan time.Time
	if m.opts.Follow {
		t := time.NewTicker(m.opts.Refresh)
		defer t.Stop()
		follow = t.C
	}
	var renew <-chan time.Time
	if m.opts.PinTTL > 0 {
		t := time.NewTicker(m.opts.PinTTL / 3)
		defer t.Stop()
		renew = t.C
	}
	go func() {
		// Unmounted from outside: stop too.
		m.Wait()
		m.stop()
	}()
	for {
		select {
		case <-m.life.Done():
			return
		case <-follow:
			m.refresh()
		case <-renew:
			m.renewPins()
		case <-m.idle:
		}
		m.dropIdle()
	}
}

// movable reports whether r names a snapshot that can change: the
// current one, or a tag's.
func movable(r commit.Ref) bool { return r.Kind == commit.RefCurrent || r.Kind == commit.RefTag }

// refresh reads the pointer, or the tag followed, and when it names a new
// generation, makes it the root's.
func (m *FS) refresh() {
	ctx, cancel := context.WithTimeout(m.life, m.opts.Refresh+time.Minute)
	defer cancel()
	gen, open, err := m.head(ctx)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			m.log.Warn("mount: cannot read what it follows; still showing the last generation read", "ref", m.opts.Ref, "err", err)
		}
		return
	}
	old := m.current()
	if gen == old.snap.Generation() {
		return
	}
	snap, err := open()
	if err != nil {
		m.log.Warn("mount: cannot open the new generation; still showing the last one read", "generation", gen, "err", err)
		return
	}
	t := m.newTree(snap)
	m.pin(ctx, t)
	m.mu.Lock()
	m.old = append(m.old, old)
	m.mu.Unlock()
	m.cur.Store(t)
	m.log.Info("mount: now showing", "seq", snap.Seq(), "generation", snap.Generation())
}

// head reads the generation the followed ref names now, and returns a
// function that opens its snapshot.
func (m *FS) head(ctx context.Context) (string, func() (*commit.Snapshot, error), error) {
	if m.opts.Ref.Kind == commit.RefTag {
		t, err := m.d.ReadTag(ctx, m.opts.Ref.Name)
		if err != nil {
			return "", nil, err
		}
		return t.Generation, func() (*commit.Snapshot, error) { return m.d.OpenRef(ctx, m.opts.Ref) }, nil
	}
	p, _, err := pointer.Read(ctx, m.d.Store())
	if err != nil {
		return "", nil, err
	}
	return p.Generation, func() (*commit.Snapshot, error) { return m.d.OpenPointer(ctx, p) }, nil
}

func (m *FS) renewPins() {
	ctx, cancel := context.WithTimeout(m.life, m.opts.PinTTL/3)
	defer cancel()
	m.pins.Renew(ctx)
}

// dropIdle unpins the generations no longer current that have no file
// open.
func (m *FS) dropIdle() {
	m.mu.Lock()
	var idle []*tree
	keep := m.old[:0]
	for _, t := range m.old {
		if t.open.Load() > 0 {
			keep = append(keep, t)
		} else {
			idle = append(idle, t)
		}
	}
	clear(m.old[len(keep):])
	m.old = keep
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(m.life, time.Minute)
	defer cancel()
	for _, t := range idle {
		m.unpin(ctx, t)
	}
}

// releasePins deletes every pin the mount holds.
func (m *FS) releasePins(ctx context.Context) error {
	if m.pins == nil {
		return nil
	}
	if err := m.pins.Close(ctx); err != nil {
		return fmt.Errorf("mount: release pins: %w", err)
	}
	return nil
}
