package commit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// Snapshot is one generation of a dataset, opened for reading. It stays
// valid while its generation is retained by the collector; pin it to keep
// it longer.
type Snapshot struct {
	d *Dataset
	// Pointer is the pointer the snapshot was resolved through: the
	// current one when the snapshot was opened.
	Pointer  *pointer.Pointer
	Manifest *generation.Manifest
	// sha is the sha256 of the manifest's stored bytes, as recorded by
	// whoever named it (the pointer, a child manifest or a pin); a pin
	// records it so that the generation stays verifiable off the chain.
	sha string
}

// Generation returns the snapshot's generation id.
func (s *Snapshot) Generation() string { return s.Manifest.Generation }

// Seq returns the pointer sequence number of the snapshot's generation.
func (s *Snapshot) Seq() uint64 { return s.Manifest.Seq }

// Files returns the snapshot's entries, sorted by path.
func (s *Snapshot) Files() []generation.Entry { return s.Manifest.Entries }

// Open reads the current generation: one pointer GET and one manifest GET.
// A dataset without commits returns ErrNoCommits.
func (d *Dataset) Open(ctx context.Context) (*Snapshot, error) {
	p, _, err := pointer.Read(ctx, d.s)
	if errors.Is(err, store.ErrNotExist) {
		return nil, fmt.Errorf("%w (no %s)", ErrNoCommits, pointer.Key)
	}
	if err != nil {
		return nil, err
	}
	return d.OpenPointer(ctx, p)
}

// OpenPointer reads the generation the pointer p names, as Open does after
// reading the pointer: one manifest GET, none when WithManifestCache keeps
// the manifest. A reader that polls the pointer opens a new generation
// with it without reading the pointer again.
func (d *Dataset) OpenPointer(ctx context.Context, p *pointer.Pointer) (*Snapshot, error) {
	load := d.loadManifest
	if d.cache != nil {
		load = d.cachedManifest
	}
	m, err := load(ctx, p.Generation, p.ManifestSHA256)
	if err != nil {
		return nil, fmt.Errorf("commit: pointer seq %d names generation %s: %w", p.Seq, p.Generation, err)
	}
	if m.Seq != p.Seq {
		return nil, fmt.Errorf("%w: pointer seq %d, manifest seq %d", generation.ErrCorrupt, p.Seq, m.Seq)
	}
	return &Snapshot{d: d, Pointer: p, Manifest: m, sha: p.ManifestSHA256}, nil
}

// OpenAt reads an older generation while it is retained (time travel). ref
// is a seq number or a generation id; it is looked up by walking the parent
// chain from the current pointer, one manifest GET per step. Where the
// collector has removed a link of the chain, a pinned or tagged generation
// beyond it is found through its pins or tags (see openPinned for the
// cost). A ref "tag:NAME" (TagRefPrefix) opens the generation the tag
// names: one more GET of the tag and of its manifest.
func (d *Dataset) OpenAt(ctx context.Context, ref string) (*Snapshot, error) {
	cur, err := d.Open(ctx)
	if err != nil {
		return nil, err
	}
	if name, ok := strings.CutPrefix(ref, TagRefPrefix); ok {
		return d.openTag(ctx, cur.Pointer, name)
	}
	seq, serr := strconv.ParseUint(ref, 10, 64)
	if serr != nil && generation.Valid(ref) != nil {
		return nil, fmt.Errorf("commit: %q is neither a seq number nor a generation id", ref)
	}
	sha := cur.sha // of the manifest History yields next
	for m, err := range d.History(ctx, cur) {
		if errors.Is(err, ErrCollected) {
			snap, perr := d.openPinned(ctx, cur.Pointer, ref)
			if perr == nil || !errors.Is(perr, ErrNotFound) {
				return snap, perr
			}
		}
		if err != nil {
			return nil, fmt.Errorf("commit: looking for %s: %w", ref, err)
		}
		if (serr == nil && m.Seq == seq) || m.Generation == ref {
			return &Snapshot{d: d, Pointer: cur.Pointer, Manifest: m, sha: sha}, nil
		}
		if serr == nil && m.Seq < seq {
			break
		}
		sha = m.ParentManifestSHA256
	}
	return nil, fmt.Errorf("%w: %s is not in the history of %s", ErrNotFound, ref, pointer.Key)
}

// History yields the manifests from the snapshot's generation back through
// its parents, newest first. Each link is verified against the checksum its
// child recorded. It ends at the first generation, or with an error
// matching ErrCollected where the collector has removed older history.
func (d *Dataset) History(ctx context.Context, from *Snapshot) iter.Seq2[*generation.Manifest, error] {
	return func(yield func(*generation.Manifest, error) bool) {
		m := from.Manifest
		for {
			if !yield(m, nil) || m.Parent == "" {
				return
			}
			parent, err := d.loadManifest(ctx, m.Parent, m.ParentManifestSHA256)
			if err == nil && parent.Seq+1 != m.Seq {
				err = fmt.Errorf("%w: generation %s has seq %d but its child %s has seq %d", generation.ErrCorrupt, parent.Generation, parent.Seq, m.Generation, m.Seq)
			}
			if err != nil {
				yield(nil, err)
				return
			}
			m = parent
		}
	}
}

// loadManifest reads and validates a generation's manifest. If wantSHA is
// not empty the stored bytes must match it. A missing manifest matches
// ErrCollected.
func (d *Dataset) loadManifest(ctx context.Context, gen, wantSHA string) (*generation.Manifest, error) {
	m, _, err := d.readManifest(ctx, gen, wantSHA)
	return m, err
}

// writerManifest is loadManifest for a writer, which needs a manifest by
// its sha256 only: the one this Dataset wrote or read last, or one kept by
// WithManifestCache, is not read again. Readers of other than the current
// generation use loadManifest, which always asks the store.
func (d *Dataset) writerManifest(ctx context.Context, gen, sha string) (*generation.Manifest, error) {
	if b := d.last.get(gen, sha); b != nil {
		return decodeManifest(generation.ManifestKey(gen), gen, b)
	}
	return d.cachedManifest(ctx, gen, sha)
}

// cachedManifest is loadManifest through the cache of WithManifestCache,
// which keeps what it reads.
func (d *Dataset) cachedManifest(ctx context.Context, gen, sha string) (*generation.Manifest, error) {
	if b := d.cache.get(sha); b != nil {
		d.last.put(gen, sha, b)
		return decodeManifest(generation.ManifestKey(gen), gen, b)
	}
	m, b, err := d.readManifest(ctx, gen, sha)
	if err == nil && sha != "" {
		d.remember(gen, sha, b)
	}
	return m, err
}

// heldManifest returns the stored bytes of the manifest whose sha256 is
// sum if this Dataset or its cache holds them, else nil. It reads no store.
func (d *Dataset) heldManifest(sum string) []byte {
	if b := d.last.bySum(sum); b != nil {
		return b
	}
	return d.cache.get(sum)
}

// remember keeps the stored bytes of generation gen's manifest, whose
// sha256 is sha, as the one this Dataset wrote or read last, and in the
// cache of WithManifestCache.
func (d *Dataset) remember(gen, sha string, stored []byte) {
	d.last.put(gen, sha, stored)
	d.cache.put(sha, stored)
}

// readManifest is loadManifest, which also returns the stored bytes.
func (d *Dataset) readManifest(ctx context.Context, gen, wantSHA string) (*generation.Manifest, []byte, error) {
	key := generation.ManifestKey(gen)
	rc, _, err := d.s.Get(ctx, key)
	if errors.Is(err, store.ErrNotExist) {
		return nil, nil, fmt.Errorf("%w: manifest %q: %v", ErrCollected, key, err)
	}
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, generation.MaxStored+1))
	if err != nil {
		return nil, nil, fmt.Errorf("commit: read manifest %q: %w", key, err)
	}
	if wantSHA != "" {
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != wantSHA {
			return nil, nil, fmt.Errorf("%w: manifest %q does not match the sha256 recorded for it", generation.ErrCorrupt, key)
		}
	}
	m, err := decodeManifest(key, gen, b)
	return m, b, err
}

// lastManifest holds the stored bytes of the manifest a Dataset's writer
// wrote or read last, by generation and sha256: a writer that begins on
// the value it just committed, or that just carried it, finds it here.
type lastManifest struct {
	mu       sync.Mutex
	gen, sha string
	stored   []byte
}

// get returns the stored bytes of generation gen if they are held and
// their sha256 is sha, else nil.
func (c *lastManifest) get(gen, sha string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sha == "" || c.gen != gen || c.sha != sha {
		return nil
	}
	return c.stored
}

// bySum returns the stored bytes held if their sha256 is sha, else nil.
func (c *lastManifest) bySum(sha string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sha == "" || c.sha != sha {
		return nil
	}
	return c.stored
}

func (c *lastManifest) put(gen, sha string, stored []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen, c.sha, c.stored = gen, sha, stored
}

// decodeManifest decodes the manifest of generation gen, stored at key.
func decodeManifest(key, gen string, b []byte) (*generation.Manifest, error) {
	m, err := generation.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("manifest %q: %w", key, err)
	}
	if m.Generation != gen {
		return nil, fmt.Errorf("%w: manifest %q describes generation %s", generation.ErrCorrupt, key, m.Generation)
	}
	return m, nil
}

// Open opens one file of the snapshot. The reader verifies the size and
// sha256 while streaming and returns an error matching ErrChecksum on a
// mismatch, at the latest in the Read that would deliver the manifest's
// last byte, which then delivers none of its bytes: a reader that stops at
// exactly the manifest's size (io.ReadFull, io.CopyN) gets the error too.
// Treat the data as good only after a nil error at that point. It
// never delivers a byte beyond the manifest's size: a longer file fails
// there, and a stored object whose length differs from the manifest's
// (when it is stored as is) fails before any byte. A file whose object is
// gone returns ErrCollected.
func (s *Snapshot) Open(ctx context.Context, path string) (io.ReadCloser, error) {
	e, ok := s.Manifest.Find(path)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not in generation %s", ErrNotFound, path, s.Generation())
	}
	return s.OpenEntry(ctx, e)
}

// whyGone tells why an object of the snapshot is gone: ErrCollected when
// the collector's floor, read afresh, has passed the snapshot's seq (it
// outlived retention), and ErrMissing otherwise: the collector never
// deletes the objects of a generation it retains, so someone else did. A
// pointer that cannot be read leaves the old answer, ErrCollected.
func (s *Snapshot) whyGone(ctx context.Context) error {
	cur, _, err := pointer.Read(ctx, s.d.s)
	if err != nil || cur.GCFloor > s.Seq() {
		return ErrCollected
	}
	return ErrMissing
}

// OpenEntry opens the file an entry of the snapshot's manifest describes.
func (s *Snapshot) OpenEntry(ctx context.Context, e generation.Entry) (io.ReadCloser, error) {
	rc, attrs, err := s.d.s.Get(ctx, e.Key)
	if errors.Is(err, store.ErrNotExist) {
		return nil, fmt.Errorf("%w: %q of generation %s (seq %d): %v", s.whyGone(ctx), e.Path, s.Generation(), s.Seq(), err)
	}
	if err != nil {
		return nil, err
	}
	if e.Encoding == generation.EncodingNone && attrs.Size >= 0 && attrs.Size != e.Size {
		rc.Close()
		return nil, fmt.Errorf("%w: %q (key %q) is stored with %d bytes, its manifest says %d", ErrChecksum, e.Path, e.Key, attrs.Size, e.Size)
	}
	v := &verifier{e: e, raw: rc, h: sha256.New()}
	v.r = rc
	if e.Encoding == generation.EncodingZstd {
		dec, err := zstd.NewReader(rc, zstd.WithDecoderConcurrency(1))
		if err != nil {
			rc.Close()
			return nil, err
		}
		v.dec, v.r = dec, dec
	}
	return v, nil
}

// ReadFile reads a whole file of the snapshot, verified.
func (s *Snapshot) ReadFile(ctx context.Context, path string) ([]byte, error) {
	rc, err := s.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, rc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// verifier checks size and sha256 of a stream against its entry. The
// size counts decoded bytes, so a zstd object is held to the manifest's
// size after decoding.
type verifier struct {
	e   generation.Entry
	raw io.ReadCloser
	dec *zstd.Decoder
	r   io.Reader
	h   hash.Hash
	n   int64
	// summed is set once the sha256 of the manifest's size was checked,
	// in the Read that delivered the last byte.
	summed bool
	err    error // sticky, once the stream failed verification
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	over := v.n + int64(n) - v.e.Size
	if over > 0 {
		// Deliver the bytes up to the manifest's size, and not one more.
		n -= int(over)
	}
	v.n += int64(n)
	v.h.Write(p[:n])
	if v.n == v.e.Size && !v.summed {
		// The last byte the manifest promises: check the sum before
		// delivering it, as a reader that reads exactly the size (ReadFull,
		// CopyN) never asks for the EOF.
		v.summed = true
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.e.SHA256 {
			v.err = fmt.Errorf("%w: %q (key %q) has sha256 %s, its manifest says %s", ErrChecksum, v.e.Path, v.e.Key, got, v.e.SHA256)
			return 0, v.err
		}
	}
	if over > 0 {
		v.err = fmt.Errorf("%w: %q (key %q) is longer than the %d bytes its manifest says", ErrChecksum, v.e.Path, v.e.Key, v.e.Size)
		return n, v.err
	}
	if err == io.EOF && v.n != v.e.Size {
		v.err = fmt.Errorf("%w: %q (key %q) has %d bytes, its manifest says %d", ErrChecksum, v.e.Path, v.e.Key, v.n, v.e.Size)
		return n, v.err
	}
	return n, err
}

func (v *verifier) Close() error {
	if v.dec != nil {
		v.dec.Close()
	}
	return v.raw.Close()
}

// ReadManifest reads and validates the manifest of generation gen. If
// wantSHA is not empty, the stored bytes must match it. A missing manifest
// matches ErrCollected; a malformed one generation.ErrCorrupt.
func (d *Dataset) ReadManifest(ctx context.Context, gen, wantSHA string) (*generation.Manifest, error) {
	return d.loadManifest(ctx, gen, wantSHA)
}
