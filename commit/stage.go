package commit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/localfile"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// Tx is a generation being staged. Create it with Dataset.Begin, add files,
// then Commit or Discard. Its methods are safe for concurrent use.
type Tx struct {
	d   *Dataset
	gen string
	// ready is closed once the base pointer has been read (Begin,
	// BeginAhead); base, baseETag, stagingStart, baseCommittedAt and
	// baseErr are set before, and read only after it.
	ready        chan struct{}
	baseErr      error
	base         *pointer.Pointer // nil for the first commit
	baseETag     string
	baseManifest *generation.Manifest // loaded on first use; see loadBase
	stagingStart time.Time
	// baseCommittedAt is the base pointer's Last-Modified.
	baseCommittedAt time.Time
	// expected is the manifest BeginAhead expects the base to have, or
	// nil; expectedSum is its sha256.
	expected    *generation.Manifest
	expectedSum string

	mu      sync.Mutex
	entries map[string]generation.Entry
	// staged holds the keys this Tx wrote: its objects and its manifest,
	// under its own generation, and the manifest of each rebase, under the
	// fresh generation id of that rebase.
	staged []string
	reused int
	// resumed counts the files that reference an object Resume offered.
	resumed int
	done    bool
	// committing is set when Commit starts; from then on only Commit may
	// discard.
	committing bool
	winner     string // set when the commit is proven lost
	// refSeq is the lowest seq of a non-base generation whose files this
	// Tx references (KeepFrom), or 0.
	refSeq uint64
	// keys holds every key a Put of this Tx has claimed: no two Puts
	// write the same key, so a Put that fails or lands late never changes
	// an object another Put staged.
	keys map[string]bool
	refs refState
	// refPin holds the generation of refSeq for the commit (HoldPin).
	refPin *Pin
	// touched holds the paths Put, PutFile, Remove and KeepFrom set, and
	// readBase is set once BaseSnapshot was called: what the Tx read, for
	// a rebase (see EnableRebase).
	touched  map[string]bool
	readBase bool
	rebase   *Rebase // nil unless EnableRebase
	noRebase bool    // set for the Tx of Dataset.Update, which must not rebase
	rebased  int
	lastSent *pointer.Pointer // the last pointer value Commit sent
	// reads is what the Tx read, once a rebase or a round needed it.
	reads *rebaseState
	grp   groupState
	// keptPending, while not nil, says which entries are files kept from
	// the base whose proof waits until the Tx writes a manifest naming
	// them itself (see keptFromBase).
	keptPending func(generation.Entry) bool
	// stageOnly is set on a Tx of Dataset.Stage, which has no base and
	// must never commit.
	stageOnly bool
	// left is what the last attempt to delete the staged objects left.
	left *Leftover
	// ahead holds the paths PutFile uploaded before the base was read
	// (BeginAhead), for Unchanged.
	ahead map[string]bool
	// scope and replaced are set by ReplacePrefix: the prefix the Tx
	// replaces and the base's entries under it.
	scope    string
	replaced map[string]generation.Entry
}

// Begin reads the current pointer and starts staging a new generation on
// top of it. The generation starts empty; see KeepAll.
func (d *Dataset) Begin(ctx context.Context) (*Tx, error) {
	tx, err := d.newTx()
	if err != nil {
		return nil, err
	}
	tx.readPointer(ctx, time.Time{})
	if tx.baseErr != nil {
		return nil, tx.baseErr
	}
	return tx, nil
}

// BeginAhead is Begin for a writer that expects the pointer to name the
// manifest whose sha256 is sum: the one it committed or read last. It
// returns before the pointer is read, and reads it while the Tx stages,
// so that files go up without waiting a round trip for it.
//
// While the pointer is being read, PutFile uploads at once a file that
// differs from that manifest, if this Dataset or its cache
// (WithManifestCache) holds it; a file that matches it waits for the
// pointer, and is reused only if the base holds it. Every method that
// needs the base (Base, BaseSnapshot, KeepAll, ReplacePrefix, Replaced,
// Unchanged, VerifyReferences, Adopt, Commit) waits for the read, and
// fails as Begin would have if it failed. So does every PutFile when the
// manifest is not held.
//
// The staging start is the Date of the pointer GET, less the time from
// sending the GET to its answer and one second: a file staged after the
// GET was sent is stored no earlier than that, even with Date and
// Last-Modified in whole seconds.
func (d *Dataset) BeginAhead(ctx context.Context, sum string) (*Tx, error) {
	tx, err := d.newTx()
	if err != nil {
		return nil, err
	}
	if b := d.heldManifest(sum); b != nil {
		if m, err := generation.Decode(b); err == nil {
			tx.expected, tx.expectedSum = m, sum
		}
	}
	// The GET's send time is taken before any PutFile can upload.
	go tx.readPointer(ctx, d.clock.Now())
	return tx, nil
}

func (d *Dataset) newTx() (*Tx, error) {
	gen, err := generation.New()
	if err != nil {
		return nil, err
	}
	return &Tx{d: d, gen: gen, entries: map[string]generation.Entry{}, ready: make(chan struct{})}, nil
}

// readPointer reads the base pointer and sets what ready promises, then
// closes it. sent, unless zero, is a time before the GET and before any
// file was staged: files may be staged while it reads (BeginAhead).
func (tx *Tx) readPointer(ctx context.Context, sent time.Time) {
	defer close(tx.ready)
	ahead := !sent.IsZero()
	p, attrs, err := pointer.Read(ctx, tx.d.s)
	switch {
	case errors.Is(err, store.ErrNotExist):
		// First commit. No collector runs on a dataset without a pointer
		// (it has nowhere to publish a horizon), and a first commit is
		// refused once one has been published (see guard), so the local
		// clock will do for a start that is never compared.
		tx.stagingStart = time.Now().UTC()
	case err != nil:
		tx.baseErr = fmt.Errorf("commit: read base pointer: %w", err)
	default:
		// The Date of the pointer GET bounds the Last-Modified of every
		// object this Tx writes from below. Without it, the commit could
		// not be held against the collector's horizon.
		if err := store.CheckServerTime(attrs.ServerTime, store.OpGet, pointer.Key, "the staging start against the collector's horizon"); err != nil {
			tx.baseErr = fmt.Errorf("commit: %w", err)
			return
		}
		tx.base, tx.baseETag = p, attrs.ETag
		tx.stagingStart = attrs.ServerTime.UTC()
		if ahead {
			tx.stagingStart = aheadStart(attrs.ServerTime, tx.d.clock.Now().Sub(sent))
		}
		tx.baseCommittedAt = p.CommittedAtServer(attrs.LastModified).UTC()
	}
}

// aheadStart is the staging start of a Tx that stages while it reads the
// pointer: date is the pointer GET's Date and took the time from sending
// the GET to its answer. An object sent after the GET is stored no earlier
// than date less took; one second less covers HTTP's whole seconds.
func aheadStart(date time.Time, took time.Duration) time.Time {
	return date.Add(-took - time.Second).UTC()
}

// WaitBase waits until the base pointer has been read, and returns what
// the read failed with (after BeginAhead; Begin returns that error itself).
// Commit fails with it too, deleting what was staged.
func (tx *Tx) WaitBase(ctx context.Context) error { return tx.awaitBase(ctx) }

// awaitBase waits until the base pointer has been read, and returns what
// the read failed with.
func (tx *Tx) awaitBase(ctx context.Context) error {
	// A base already read is returned even on a context that is done.
	select {
	case <-tx.ready:
		return tx.baseErr
	default:
	}
	select {
	case <-tx.ready:
		return tx.baseErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// expectation returns the manifest BeginAhead expects while the pointer
// is still being read, and nil once it has been.
func (tx *Tx) expectation() *generation.Manifest {
	select {
	case <-tx.ready:
		return nil
	default:
		return tx.expected
	}
}

// loadBase returns the base generation's manifest, reading it on first
// use, or nil for the first commit. A commit that never looks at its base
// does not pay for the GET.
func (tx *Tx) loadBase(ctx context.Context) (*generation.Manifest, error) {
	if err := tx.awaitBase(ctx); err != nil {
		return nil, err
	}
	if tx.base == nil {
		return nil, nil
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.baseManifest == nil {
		m, err := tx.d.writerManifest(ctx, tx.base.Generation, tx.base.ManifestSHA256)
		if err != nil {
			return nil, fmt.Errorf("commit: base generation %s: %w", tx.base.Generation, err)
		}
		tx.baseManifest = m
	}
	return tx.baseManifest, nil
}

// Generation returns the id of the generation being staged: its objects
// are written under it. A rebased commit (see EnableRebase) publishes
// another id, the returned pointer's, whose manifest references them.
func (tx *Tx) Generation() string { return tx.gen }

// Base returns the pointer the Tx builds on, or nil for the first commit
// or a read that failed (see BeginAhead).
func (tx *Tx) Base() *pointer.Pointer {
	<-tx.ready
	return tx.base
}

// BaseSnapshot returns the snapshot the Tx builds on, for reading while
// modifying. It returns ErrNoCommits for the first commit.
func (tx *Tx) BaseSnapshot(ctx context.Context) (*Snapshot, error) {
	m, err := tx.loadBase(ctx)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, ErrNoCommits
	}
	tx.mu.Lock()
	tx.readBase = true
	tx.mu.Unlock()
	return &Snapshot{d: tx.d, Pointer: tx.base, Manifest: m, sha: tx.base.ManifestSHA256}, nil
}

// Files returns the paths staged so far, sorted.
func (tx *Tx) Files() []string {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return slices.Sorted(maps.Keys(tx.entries))
}

// Entries returns the entries staged so far, sorted by path.
func (tx *Tx) Entries() []generation.Entry {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	out := slices.Collect(maps.Values(tx.entries))
	slices.SortFunc(out, func(a, b generation.Entry) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// KeepAll carries every file of the base generation into this one, by
// reference: nothing is copied. Later Puts and Removes override it. The
// commit proves the objects kept are still present; see VerifyReferences.
func (tx *Tx) KeepAll(ctx context.Context) error {
	m, err := tx.loadBase(ctx)
	if err != nil || m == nil {
		return err
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	for _, e := range m.Entries {
		tx.entries[e.Path] = e
	}
	return nil
}

// KeepFrom carries every file of another snapshot of the same dataset into
// this generation, by reference, replacing what was staged at the same
// paths. It is how a rollback re-publishes a retained generation. The
// commit is refused with ErrStale if, by then, the collector's floor has
// passed that snapshot's seq: its objects may be gone, and with
// ErrMissingObject if one of them is gone already (see VerifyReferences).
func (tx *Tx) KeepFrom(snap *Snapshot) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	for _, e := range snap.Files() {
		tx.entries[e.Path] = e
		tx.touch(e.Path)
	}
	if tx.refSeq == 0 || snap.Seq() < tx.refSeq {
		tx.refSeq = snap.Seq()
	}
}

// Remove drops a path from the generation being staged.
func (tx *Tx) Remove(path string) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	delete(tx.entries, path)
	tx.touch(path)
}

// touch records that the Tx set or removed path. The caller holds tx.mu.
func (tx *Tx) touch(path string) {
	if tx.touched == nil {
		tx.touched = map[string]bool{}
	}
	tx.touched[path] = true
}

func (tx *Tx) checkOpen() error {
	if tx.done {
		return errors.New("commit: transaction already committed or discarded")
	}
	return nil
}

// Put stages one file from r. The sha256 and size are computed while the
// body streams to the store; r is read once. size is the length of r when
// known, or 0.
//
// Each Put writes an object of its own: staging a path again writes a new
// key (the path with a "~N" suffix) and replaces the path's entry once
// the write succeeded. A Put that fails leaves the Tx as it was, and its
// object, even if it lands late, is never referenced. A Put that has not
// finished when Commit (or Discard) is called fails and is not part of
// the generation.
func (tx *Tx) Put(ctx context.Context, path string, r io.Reader, size int64) error {
	return tx.put(ctx, path, r, size, fileAttrs{}, "")
}

// Restage stages r as the file e describes, with e's path, permission bits
// and modification time, and fails unless r delivers exactly e's content
// (its size and sha256): then the Tx's entry for e.Path stays as it was,
// though the object written may remain until Discard. A repair uses it to
// upload a damaged file again from a local copy without changing what the
// generation publishes.
func (tx *Tx) Restage(ctx context.Context, e generation.Entry, r io.Reader) error {
	return tx.put(ctx, e.Path, r, e.Size, fileAttrs{mode: e.Mode, mtime: e.MTime}, e.SHA256)
}

// fileAttrs are what a staged entry records of its local file besides the
// content: see generation.Entry.
type fileAttrs struct {
	mode  string
	mtime time.Time
}

func attrsOf(fi fs.FileInfo) fileAttrs {
	return fileAttrs{mode: generation.FormatMode(fi.Mode()), mtime: fi.ModTime().UTC()}
}

// put stages r at path. With want set, the content must have that sha256.
func (tx *Tx) put(ctx context.Context, path string, r io.Reader, size int64, attrs fileAttrs, want string) error {
	e, err := tx.upload(ctx, path, r, size, attrs, want)
	if err != nil {
		return err
	}
	if err := tx.add(e); err != nil {
		return fmt.Errorf("commit: stage %q: %w", path, err)
	}
	return nil
}

// upload writes r to a fresh key of path, as put does, and returns the
// entry without adding it to the Tx.
func (tx *Tx) upload(ctx context.Context, path string, r io.Reader, size int64, attrs fileAttrs, want string) (generation.Entry, error) {
	if err := generation.CheckPath(path); err != nil {
		return generation.Entry{}, err
	}
	// Record the key before the PUT: a PUT that fails may still have
	// landed, and Discard must remove it.
	tx.mu.Lock()
	key, err := tx.claimKey(path)
	tx.mu.Unlock()
	if err != nil {
		return generation.Entry{}, err
	}
	h := sha256.New()
	var sums io.Writer = h
	var parts *generation.PartHasher
	if tx.d.partSize > 0 && !tx.d.compress {
		parts = generation.NewPartHasher(tx.d.partSize)
		sums = io.MultiWriter(h, parts)
	}
	counted := &countingReader{r: io.TeeReader(r, sums)}
	opts := store.PutOptions{Size: size}
	var body io.Reader = counted
	encoding := generation.EncodingNone
	if tx.d.compress {
		encoding = generation.EncodingZstd
		opts.Size, opts.ContentEncoding = 0, "zstd"
		zr := compressing(counted)
		defer zr.Close() // unblocks the encoder if the PUT stops reading
		body = zr
	}
	if _, err := tx.d.s.Put(ctx, key, body, opts); err != nil {
		return generation.Entry{}, fmt.Errorf("commit: stage %q: %w", path, err)
	}
	if size > 0 && counted.n != size {
		return generation.Entry{}, fmt.Errorf("commit: stage %q: read %d bytes, expected %d (file changed while publishing?)", path, counted.n, size)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if want != "" && sum != want {
		return generation.Entry{}, fmt.Errorf("commit: stage %q: the content differs from the entry: sha256 %s, not %s", path, sum, want)
	}
	e := generation.Entry{Path: path, Key: key, Size: counted.n, SHA256: sum, Encoding: encoding,
		Mode: attrs.mode, MTime: attrs.mtime}
	if parts != nil {
		e.PartSize, e.Parts = parts.Parts()
	}
	return e, nil
}

// localParts returns the part checksums of the first size bytes of f, for
// an entry that has none: only if those bytes still have the entry's
// sha256, so that they describe its object; otherwise none. f is read from
// its start, and left there.
func localParts(f *os.File, size, partSize int64, sum string) (int64, string, error) {
	h := sha256.New()
	parts := generation.NewPartHasher(partSize)
	if _, err := io.Copy(io.MultiWriter(h, parts), io.LimitReader(f, size)); err != nil {
		return 0, "", err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, "", err
	}
	if hex.EncodeToString(h.Sum(nil)) != sum {
		return 0, "", nil
	}
	ps, p := parts.Parts()
	return ps, p, nil
}

// putLocal stages the local file f at path, as put does, reading at most
// the size fi, its state when it was opened, gives. Unless o ignores
// changes, it fails with a *ChangedError when f no longer is as fi says
// after the upload: what was read may mix old and new content. A failed
// upload of a file that changed fails the same way, naming the file
// instead of the byte counts the store saw.
func (tx *Tx) putLocal(ctx context.Context, path string, f *os.File, fi fs.FileInfo, size int64, attrs fileAttrs, o fileOptions) error {
	e, err := tx.upload(ctx, path, io.LimitReader(f, fi.Size()), size, attrs, "")
	if err != nil {
		if ctx.Err() == nil {
			if cerr := changedSince(path, f, fi); cerr != nil {
				return cerr
			}
		}
		return err
	}
	if !o.ignoreChanges {
		if err := changedSince(path, f, fi); err != nil {
			return err
		}
	}
	if err := tx.add(e); err != nil {
		return fmt.Errorf("commit: stage %q: %w", path, err)
	}
	return nil
}

// ErrChanged is what a *ChangedError matches with errors.Is.
var ErrChanged = errors.New("changed while it was read")

// ChangedError reports a local file that changed while PutFile read it
// (see IgnoreChanges).
type ChangedError struct {
	Path  string // the path in the dataset
	Local string // the local file
	What  string // what changed, in words
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("commit: %s: changed while it was read (%s)", e.Local, e.What)
}

// Is makes a *ChangedError match ErrChanged.
func (e *ChangedError) Is(target error) bool { return target == ErrChanged }

// changedSince returns a *ChangedError if the open file f is no longer as
// before describes, and nil if it is, or if it cannot be looked at.
func changedSince(path string, f *os.File, before fs.FileInfo) error {
	now, err := f.Stat()
	if err != nil {
		return nil
	}
	if what := localfile.Changed(before, now); what != "" {
		return &ChangedError{Path: path, Local: f.Name(), What: what}
	}
	return nil
}

// claimKey returns a key no other Put of the Tx has used for path, and
// records it as staged. The caller holds tx.mu.
func (tx *Tx) claimKey(path string) (string, error) {
	if err := tx.checkOpen(); err != nil {
		return "", err
	}
	if tx.keys == nil {
		tx.keys = map[string]bool{}
	}
	key := generation.DataKey(tx.gen, path)
	for n := 2; tx.keys[key]; n++ {
		// A key must pass as a path, 1024 bytes at most (see CheckPath).
		suffixed := fmt.Sprintf("%s~%d", path, n)
		if err := generation.CheckPath(suffixed); err != nil {
			return "", fmt.Errorf("commit: stage %q again: %w", path, err)
		}
		key = generation.DataKey(tx.gen, suffixed)
	}
	if err := store.CheckKeyLength(tx.d.s, key); err != nil {
		return "", fmt.Errorf("commit: stage %q: %w", path, err)
	}
	tx.keys[key] = true
	tx.staged = append(tx.staged, key)
	return key, nil
}

func (tx *Tx) add(e generation.Entry) error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if err := tx.checkOpen(); err != nil {
		return err
	}
	tx.entries[e.Path] = e
	tx.touch(e.Path)
	return nil
}

// PutBytes stages one file from memory.
func (tx *Tx) PutBytes(ctx context.Context, path string, data []byte) error {
	return tx.Put(ctx, path, bytes.NewReader(data), int64(len(data)))
}

// PutFile stages a local file, recording its permission bits and
// modification time (see generation.Entry). If the base generation has a
// file at the same path with the same size and sha256, the new generation
// references the existing object instead of uploading it again
// (incremental publish), unless the dataset was opened WithReuse(false);
// failing that, an entry that Resume offered for the path with the same
// size and sha256 is referenced the same way. The entry records the local
// file's mode and time all the same. Before the commit, the referenced
// object is proven present, and the file is uploaded again if it is not;
// see VerifyReferences.
//
// Without options, local is opened as the operating system resolves it,
// symbolic links included. A caller that listed its files first should
// pass Expect with what it listed.
//
// A file that changes while PutFile reads it (its size, modification time
// or status change time differs after the upload, or the reading that
// matched it, from when it was opened) fails with a *ChangedError, which
// matches ErrChanged, and the Tx is left without it; IgnoreChanges stages
// it anyway.
func (tx *Tx) PutFile(ctx context.Context, path, local string, opts ...FileOption) error {
	var o fileOptions
	for _, opt := range opts {
		opt(&o)
	}
	f, fi, err := openLocal(local, o)
	if err != nil {
		return err
	}
	defer f.Close()
	// The local file's sha256, read once, and only if a candidate to
	// reference instead of uploading has its size.
	var sum string
	readSum := func() (string, error) {
		if sum != "" {
			return sum, nil
		}
		h := sha256.New()
		if _, err := io.Copy(h, io.LimitReader(f, fi.Size())); err != nil {
			return "", fmt.Errorf("commit: read %s: %w", local, err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return "", fmt.Errorf("commit: %w", err)
		}
		sum = hex.EncodeToString(h.Sum(nil))
		return sum, nil
	}
	// The candidates: the base's entry, then the one Resume offered.
	type candidate struct {
		generation.Entry
		resumed bool
	}
	var candidates []candidate
	ahead := false // uploaded without waiting for the base
	if tx.d.reuse {
		var err error
		var e generation.Entry
		var ok bool
		e, ok, ahead, err = tx.baseEntry(ctx, path, fi.Size(), readSum, o.matched)
		if err != nil {
			return err
		}
		if ok {
			candidates = append(candidates, candidate{e, false})
		}
	}
	if e, ok := tx.resumable(path); ok && e.Size == fi.Size() {
		candidates = append(candidates, candidate{e, true})
	}
	for _, c := range candidates {
		sum, err := readSum()
		if err != nil {
			return err
		}
		if sum != c.SHA256 {
			continue
		}
		e := c.Entry
		if !e.HasParts() && e.Encoding == generation.EncodingNone && generation.NumParts(e.Size, tx.d.partSize) > 0 {
			if e.PartSize, e.Parts, err = localParts(f, e.Size, tx.d.partSize, e.SHA256); err != nil {
				return fmt.Errorf("commit: read %s: %w", local, err)
			}
		}
		// What was read is the entry's content only if it is the file as
		// it was opened.
		if !o.ignoreChanges {
			if err := changedSince(path, f, fi); err != nil {
				return err
			}
		}
		a := attrsOf(fi)
		e.Mode, e.MTime = a.mode, a.mtime
		if err := tx.noteReuse(e, local, o, c.resumed); err != nil {
			return err
		}
		if o.decided != nil {
			o.decided(true)
		}
		return nil
	}
	if o.decided != nil {
		o.decided(false)
	}
	if err := tx.putLocal(ctx, path, f, fi, fi.Size(), attrsOf(fi), o); err != nil {
		return err
	}
	if ahead {
		tx.mu.Lock()
		if tx.ahead == nil {
			tx.ahead = map[string]bool{}
		}
		tx.ahead[path] = true
		tx.mu.Unlock()
	}
	return nil
}

// uploadedAhead reports whether PutFile uploaded path before the base was
// read, because it differed from the expected manifest (BeginAhead).
func (tx *Tx) uploadedAhead(path string) bool {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.ahead[path]
}

// baseEntry returns the base's entry for path if it has size, the local
// file's, for PutFile to compare. While BeginAhead's read of the pointer
// is under way, a file that differs from the expected manifest's entry,
// in size or in sha256 (sum), does not wait for the base: none is
// returned, and ahead says so. One that matches it is reported to matched,
// if set, before it waits.
func (tx *Tx) baseEntry(ctx context.Context, path string, size int64, sum func() (string, error), matched func(generation.Entry)) (e generation.Entry, ok, ahead bool, err error) {
	if exp := tx.expectation(); exp != nil {
		e, ok := exp.Find(path)
		if !ok || e.Size != size {
			return generation.Entry{}, false, true, nil
		}
		s, err := sum()
		if err != nil {
			return generation.Entry{}, false, false, err
		}
		if s != e.SHA256 {
			return generation.Entry{}, false, true, nil
		}
		if matched != nil {
			matched(e)
		}
	}
	base, err := tx.loadBase(ctx)
	if err != nil || base == nil {
		return generation.Entry{}, false, false, err
	}
	e, ok = base.Find(path)
	return e, ok && e.Size == size, false, nil
}

// FileOption changes how PutFile reads its local file.
type FileOption func(*fileOptions)

type fileOptions struct {
	expect        fs.FileInfo
	ignoreChanges bool
	// decided, if set, is told whether PutFile reuses the base's object
	// (true) or uploads the file (false), before any upload (ReuseProof).
	decided func(reused bool)
	// matched, if set, is told the expected manifest's entry the file
	// matches while BeginAhead's read of the base is under way, before
	// PutFile waits for the base to decide (ReuseProof).
	matched func(generation.Entry)
}

// Expect makes PutFile read its local file only if that is still the file
// fi describes (os.SameFile: the same device and inode), and never through
// a symbolic link in its last element. A caller that lists files before it
// stages them passes what it listed: an os.Lstat of a regular file, or the
// os.Stat of a link's resolved target. A file replaced in between, by a
// link or by another file, is then refused with its path instead of read
// through.
func Expect(fi fs.FileInfo) FileOption {
	return func(o *fileOptions) { o.expect = fi }
}

// IgnoreChanges makes PutFile stage a local file that changes while it
// reads it, instead of failing with a *ChangedError: it stages the bytes
// it read, up to the size the file had when PutFile opened it. For a file
// that only grows, such as a log being written, that is the content it
// had then; a file rewritten in place may be staged as a mix of old and
// new content. A file cut short while it is read still fails, since it
// no longer has the bytes its entry would record.
func IgnoreChanges() FileOption {
	return func(o *fileOptions) { o.ignoreChanges = true }
}

// openLocal opens a regular file for PutFile, as o says.
func openLocal(local string, o fileOptions) (*os.File, fs.FileInfo, error) {
	flags := os.O_RDONLY
	if o.expect != nil {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(local, flags, 0)
	if err != nil {
		if o.expect != nil && errors.Is(err, syscall.ELOOP) {
			return nil, nil, fmt.Errorf("commit: %s changed after it was listed: it is a symbolic link now", local)
		}
		return nil, nil, fmt.Errorf("commit: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("commit: %w", err)
	}
	switch {
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, nil, fmt.Errorf("commit: %s: not a regular file", local)
	case o.expect != nil && !os.SameFile(o.expect, fi):
		f.Close()
		return nil, nil, fmt.Errorf("commit: %s changed after it was listed: it is another file now", local)
	}
	return f, fi, nil
}

// AddDir stages every regular file below dir, with paths relative to it,
// uploading in parallel up to the dataset's concurrency. Symbolic links and
// other special files are refused rather than followed, and a file that
// changes while it is read fails the call with a *ChangedError (see
// PutFile).
func (tx *Tx) AddDir(ctx context.Context, dir string) error {
	type listed struct {
		path string
		info fs.FileInfo
	}
	var files []listed
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() {
			return nil
		}
		if !de.Type().IsRegular() {
			return fmt.Errorf("commit: %s: not a regular file (symbolic links are not followed)", p)
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		files = append(files, listed{p, fi})
		return nil
	})
	if err != nil {
		return err
	}
	rels := make([]string, len(files))
	for i, f := range files {
		rel, err := filepath.Rel(dir, f.path)
		if err != nil {
			return err
		}
		rels[i] = filepath.ToSlash(rel)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(tx.d.concurrency)
	proof := tx.NewReuseProof(ctx, len(files))
	for i, f := range files {
		g.Go(func() error { return tx.PutFile(gctx, rels[i], f.path, Expect(f.info), proof.Option()) })
	}
	err = g.Wait()
	return errors.Join(err, proof.Wait())
}

// Reused returns how many files were referenced from the base generation
// instead of uploaded.
func (tx *Tx) Reused() int {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.reused
}

// Discard deletes the objects this Tx staged. It never touches objects of
// other generations, including those reused by reference. It is a best
// effort; the collector's orphan sweep is the backstop, and Leftover says
// what it left.
//
// Once Commit has been called, Discard does nothing: the generation may be
// live, and Commit itself deletes it when, and only when, it proves the
// commit lost. So `defer tx.Discard(ctx)` is safe.
func (tx *Tx) Discard(ctx context.Context) error {
	tx.mu.Lock()
	committing := tx.committing
	tx.done = true
	tx.mu.Unlock()
	if committing {
		return nil
	}
	return tx.discard(ctx)
}

// discard deletes the staged objects; only for a Tx proven not live.
func (tx *Tx) discard(ctx context.Context) error {
	tx.mu.Lock()
	keys := slices.Clone(tx.staged)
	tx.mu.Unlock()
	if len(keys) == 0 {
		return nil
	}
	if err := tx.d.s.DeleteMany(ctx, keys); err != nil {
		err = fmt.Errorf("commit: discard generation %s: %w", tx.gen, err)
		var left *Leftover
		if rest := tx.remaining(ctx, keys); len(rest) > 0 {
			left = &Leftover{Generation: tx.gen, Keys: rest, Err: err}
		}
		tx.mu.Lock()
		tx.left = left
		tx.mu.Unlock()
		return err
	}
	tx.mu.Lock()
	tx.grp.written = nil // deleted with the rest (staged holds them too)
	tx.left = nil
	tx.mu.Unlock()
	return nil
}

// remaining returns those of keys, whose delete failed, that a listing of
// their directories still shows: a delete that failed may have deleted
// some. Without a listing any of them may be left, and it returns keys.
func (tx *Tx) remaining(ctx context.Context, keys []string) []string {
	var dirs []string // the first two levels: _gen/<id>/, or an intent's
	for _, k := range keys {
		dir := k
		if i := strings.Index(k, "/"); i >= 0 {
			if j := strings.Index(k[i+1:], "/"); j >= 0 {
				dir = k[:i+1+j+1]
			}
		}
		if !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	there := map[string]bool{}
	for _, dir := range dirs {
		for o, err := range store.List(ctx, tx.d.s, dir, "", "") {
			if err != nil {
				return keys
			}
			there[o.Key] = true
		}
	}
	var rest []string
	for _, k := range keys {
		if there[k] {
			rest = append(rest, k)
		}
	}
	return rest
}

// Leftover is what a Tx that did not commit staged and could not delete.
// Nothing references those objects: the collector's orphan sweep deletes
// them once they are older than its orphan age, and group-commit intents
// (under IntentDir) at its next run.
type Leftover struct {
	Generation string
	Keys       []string // the keys still there after the delete failed (all it tried, if that could not be told)
	Err        error
}

// Leftover returns what the last attempt to delete the staged objects, by
// Discard or by a Commit that did not commit, could not delete; nil if it
// deleted them, or none was made.
func (tx *Tx) Leftover() *Leftover {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.left
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// compressing returns a reader of the zstd encoding of r. Closing it stops
// the encoder.
func compressing(r io.Reader) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		enc, err := zstd.NewWriter(pw, zstd.WithEncoderConcurrency(1))
		if err != nil {
			pw.CloseWithError(err)
			return
		}
		if _, err := io.Copy(enc, r); err != nil {
			enc.Close()
			pw.CloseWithError(err)
			return
		}
		pw.CloseWithError(enc.Close())
	}()
	return pr
}
