package mount

import (
	"context"
	"errors"
	"io"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
)

// tree is the file system of one generation: its directories as the
// manifest's paths imply them. Its inode numbers are its own, never
// shared with another generation's, so that the kernel never mixes the
// cached pages or attributes of two generations.
type tree struct {
	snap *commit.Snapshot
	root *dir
	// open counts the file handles of this generation; a generation no
	// longer current is unpinned once it drops to zero.
	open atomic.Int64
}

type dir struct {
	ino   uint64
	names []string // sorted
	dirs  map[string]*dir
	files map[string]fileEntry
}

type fileEntry struct {
	ino uint64
	e   generation.Entry
}

// newTree builds the directories of snap, numbering inodes from next.
// A path that is both a file and a directory's prefix (which no manifest
// written by put has) keeps the directory; warn is told of the file.
func newTree(snap *commit.Snapshot, next *atomic.Uint64, warn func(path string)) *tree {
	newDir := func() *dir {
		return &dir{ino: next.Add(1), dirs: map[string]*dir{}, files: map[string]fileEntry{}}
	}
	t := &tree{snap: snap, root: newDir()}
	t.root.ino = rootIno
	for _, e := range snap.Files() {
		d := t.root
		elems := strings.Split(e.Path, "/")
		ok := true
		for _, name := range elems[:len(elems)-1] {
			if _, clash := d.files[name]; clash {
				ok = false
				break
			}
			sub, found := d.dirs[name]
			if !found {
				sub = newDir()
				d.dirs[name] = sub
			}
			d = sub
		}
		name := elems[len(elems)-1]
		if _, clash := d.dirs[name]; !ok || clash {
			warn(e.Path)
			continue
		}
		d.files[name] = fileEntry{ino: next.Add(1), e: e}
	}
	var sortNames func(d *dir)
	sortNames = func(d *dir) {
		for n, sub := range d.dirs {
			d.names = append(d.names, n)
			sortNames(sub)
		}
		for n := range d.files {
			d.names = append(d.names, n)
		}
		sort.Strings(d.names)
	}
	sortNames(t.root)
	return t
}

// rootIno is the inode number of the mount's root, whichever generation
// it shows.
const rootIno = 1

// rootNode is the mount's root. It shows the current tree: when a new
// generation becomes current, every lookup from the root sees it at once.
type rootNode struct {
	fs.Inode
	m *FS
}

var (
	_ fs.NodeLookuper  = (*rootNode)(nil)
	_ fs.NodeReaddirer = (*rootNode)(nil)
	_ fs.NodeGetattrer = (*rootNode)(nil)
	_ fs.NodeStatfser  = (*rootNode)(nil)
)

func (r *rootNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t := r.m.current()
	return r.m.lookup(ctx, &r.Inode, t, t.root, name, out, r.m.rootTimeout)
}

func (r *rootNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return readdir(r.m.current().root), 0
}

func (r *rootNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	t := r.m.current()
	r.m.dirAttr(t, t.root, &out.Attr)
	out.SetTimeout(r.m.rootTimeout)
	return 0
}

func (r *rootNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	t := r.m.current()
	var size int64
	for _, e := range t.snap.Files() {
		size += e.Size
	}
	out.Bsize, out.Frsize = 4096, 4096
	out.Blocks = uint64((size + 4095) / 4096)
	out.Files = uint64(len(t.snap.Files()))
	out.NameLen = 255
	return 0
}

// dirNode is a directory of one generation.
type dirNode struct {
	fs.Inode
	m *FS
	t *tree
	d *dir
}

var (
	_ fs.NodeLookuper  = (*dirNode)(nil)
	_ fs.NodeReaddirer = (*dirNode)(nil)
	_ fs.NodeGetattrer = (*dirNode)(nil)
)

func (n *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.m.lookup(ctx, &n.Inode, n.t, n.d, name, out, immutable)
}

func (n *dirNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return readdir(n.d), 0
}

func (n *dirNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.m.dirAttr(n.t, n.d, &out.Attr)
	out.SetTimeout(immutable)
	return 0
}

// immutable is how long the kernel may cache what never changes: the
// entries and attributes below the root, which belong to one generation.
const immutable = time.Hour

func (m *FS) lookup(ctx context.Context, parent *fs.Inode, t *tree, d *dir, name string, out *fuse.EntryOut, timeout time.Duration) (*fs.Inode, syscall.Errno) {
	if sub, ok := d.dirs[name]; ok {
		m.dirAttr(t, sub, &out.Attr)
		setTimeouts(out, timeout)
		return parent.NewInode(ctx, &dirNode{m: m, t: t, d: sub}, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: sub.ino}), 0
	}
	if fe, ok := d.files[name]; ok {
		m.fileAttr(t, fe, &out.Attr)
		setTimeouts(out, timeout)
		return parent.NewInode(ctx, &fileNode{m: m, t: t, fe: fe}, fs.StableAttr{Mode: syscall.S_IFREG, Ino: fe.ino}), 0
	}
	return nil, syscall.ENOENT
}

func setTimeouts(out *fuse.EntryOut, d time.Duration) {
	if d > 0 {
		out.SetEntryTimeout(d)
		out.SetAttrTimeout(d)
	}
}

func readdir(d *dir) fs.DirStream {
	entries := make([]fuse.DirEntry, 0, len(d.names))
	for _, name := range d.names {
		if sub, ok := d.dirs[name]; ok {
			entries = append(entries, fuse.DirEntry{Name: name, Mode: syscall.S_IFDIR, Ino: sub.ino})
		} else {
			entries = append(entries, fuse.DirEntry{Name: name, Mode: syscall.S_IFREG, Ino: d.files[name].ino})
		}
	}
	return fs.NewListDirStream(entries)
}

func (m *FS) dirAttr(t *tree, d *dir, a *fuse.Attr) {
	a.Ino = d.ino
	a.Mode = syscall.S_IFDIR | 0o755
	a.Nlink = uint32(2 + len(d.dirs))
	a.Size = 4096
	m.owner(a)
	a.SetTimes(nil, &t.snap.Manifest.StagingStart, &t.snap.Manifest.StagingStart)
}

func (m *FS) fileAttr(t *tree, fe fileEntry, a *fuse.Attr) {
	a.Ino = fe.ino
	perm, ok := fe.e.Perm()
	if !ok {
		perm = 0o644
	}
	a.Mode = syscall.S_IFREG | uint32(perm)
	a.Nlink = 1
	a.Size = uint64(fe.e.Size)
	a.Blocks = (a.Size + 511) / 512
	a.Blksize = 4096
	m.owner(a)
	mtime := fe.e.MTime
	if mtime.IsZero() {
		mtime = t.snap.Manifest.StagingStart
	}
	a.SetTimes(nil, &mtime, &mtime)
}

func (m *FS) owner(a *fuse.Attr) {
	a.Uid, a.Gid = uint32(os.Getuid()), uint32(os.Getgid())
}

// fileNode is a file of one generation.
type fileNode struct {
	fs.Inode
	m  *FS
	t  *tree
	fe fileEntry
}

var (
	_ fs.NodeOpener    = (*fileNode)(nil)
	_ fs.NodeGetattrer = (*fileNode)(nil)
)

func (n *fileNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.m.fileAttr(n.t, n.fe, &out.Attr)
	out.SetTimeout(immutable)
	return 0
}

// Open opens a file of the tree. A file with part checksums is read by
// parts as it is read (see partsHandle). Any other file is read whole into
// the cache and verified before any of its bytes is served: one that does
// not match its manifest cannot be opened (EIO), and the reason is logged.
func (n *fileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return nil, 0, syscall.EROFS
	}
	n.m.opened(ctx, n.t)
	e := n.fe.e
	if e.HasParts() {
		n.m.cache.prefetch(filePart(n.t.snap, e, 0))
		return &partsHandle{m: n.m, t: n.t, e: e}, fuse.FOPEN_KEEP_CACHE, 0
	}
	b, err := n.m.cache.acquire(ctx, wholeFile(n.t.snap, e))
	if err != nil {
		n.m.closed(n.t)
		return nil, 0, n.m.readFailed(ctx, n.t, e, "opening", err)
	}
	return &handle{m: n.m, t: n.t, b: b}, fuse.FOPEN_KEEP_CACHE, 0
}

// readFailed logs why a file of t cannot be read, and returns the errno
// the doing ("opening", "reading") fails with: EINTR when the request was
// interrupted, and EIO otherwise.
func (m *FS) readFailed(ctx context.Context, t *tree, e generation.Entry, doing string, err error) syscall.Errno {
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return syscall.EINTR
	}
	what := "mount: cannot read a file; " + doing + " it fails with EIO"
	if errors.Is(err, commit.ErrChecksum) {
		what = "mount: a file does not match its manifest; " + doing + " it fails with EIO"
	}
	m.log.Error(what, "path", e.Path, "key", e.Key, "generation", t.snap.Generation(), "seq", t.snap.Seq(), "err", err)
	return syscall.EIO
}

// handle is an open file read whole: a reference to its verified copy.
type handle struct {
	m *FS
	t *tree
	b *blob
}

var (
	_ fs.FileReader   = (*handle)(nil)
	_ fs.FileReleaser = (*handle)(nil)
)

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := h.b.ReadAt(dest, off)
	if err != nil && err != io.EOF {
		h.m.log.Error("mount: cannot read the cached copy of a file", "err", err)
		return nil, syscall.EIO
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.m.cache.release(h.b)
	h.m.closed(h.t)
	return 0
}

// partsHandle is an open file with part checksums. A read fetches the
// parts it touches, each in one ranged GET, into the cache and serves
// them once they matched; a part that does not match fails the read with
// EIO, and is logged. A read in the second half of a part fetches the next
// part ahead.
type partsHandle struct {
	m *FS
	t *tree
	e generation.Entry
}

var (
	_ fs.FileReader   = (*partsHandle)(nil)
	_ fs.FileReleaser = (*partsHandle)(nil)
)

func (h *partsHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	e := h.e
	end := min(off+int64(len(dest)), e.Size)
	n := 0
	for off < end {
		i := int(off / e.PartSize)
		start, size, _ := e.Part(i)
		b, err := h.m.cache.acquire(ctx, filePart(h.t.snap, e, i))
		if err != nil {
			return nil, h.m.readFailed(ctx, h.t, e, "reading", err)
		}
		want := int(min(end, start+size) - off)
		k, err := b.ReadAt(dest[n:n+want], off-start)
		h.m.cache.release(b)
		if k < want {
			h.m.log.Error("mount: cannot read the cached copy of a part of a file", "path", e.Path, "part", i, "err", err)
			return nil, syscall.EIO
		}
		n += want
		off += int64(want)
		if off-start >= size/2 && i+1 < e.NumParts() {
			h.m.cache.prefetch(filePart(h.t.snap, e, i+1))
		}
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *partsHandle) Release(ctx context.Context) syscall.Errno {
	h.m.closed(h.t)
	return 0
}
