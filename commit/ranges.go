package commit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/store"
)

// OpenRange opens n bytes of the file e describes, from byte off; the range
// must lie within the file. Every byte it delivers is verified first:
//   - for an entry with part checksums, only the parts the range touches are
//     read, in one ranged GET, and each part is held and checked before any
//     of its bytes is delivered;
//   - for any other entry, the file is read from its start through the
//     verifying reader of OpenEntry, and the read that would deliver the
//     range's last bytes first reads the rest of the file and delivers
//     nothing if the file does not match its manifest.
//
// A mismatch is an error matching ErrChecksum.
func (s *Snapshot) OpenRange(ctx context.Context, e generation.Entry, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 1 || off >= e.Size || n > e.Size-off {
		return nil, fmt.Errorf("commit: %q: range of %d bytes at %d is outside its %d bytes", e.Path, n, off, e.Size)
	}
	if !e.HasParts() {
		rc, err := s.OpenEntry(ctx, e)
		if err != nil {
			return nil, err
		}
		return &prefixRange{rc: rc, skip: off, left: n}, nil
	}
	first := int(off / e.PartSize)
	last := int((off + n - 1) / e.PartSize)
	start, _, _ := e.Part(first)
	lastOff, lastN, _ := e.Part(last)
	body, attrs, err := s.d.s.GetRange(ctx, e.Key, start, lastOff+lastN-start)
	switch {
	case errors.Is(err, store.ErrNotExist):
		return nil, fmt.Errorf("%w: %q of generation %s (seq %d): %v", s.whyGone(ctx), e.Path, s.Generation(), s.Seq(), err)
	case errors.Is(err, store.ErrInvalidRange):
		return nil, fmt.Errorf("%w: %q (key %q) is stored with fewer bytes than its manifest's %d: %v", ErrChecksum, e.Path, e.Key, e.Size, err)
	case err != nil:
		return nil, err
	case attrs.Size >= 0 && attrs.Size != e.Size:
		body.Close()
		return nil, fmt.Errorf("%w: %q (key %q) is stored with %d bytes, its manifest says %d", ErrChecksum, e.Path, e.Key, attrs.Size, e.Size)
	}
	return &partRange{e: e, body: body, part: first, off: off, end: off + n}, nil
}

// ReadPart returns part i of the file e describes, once its size and
// sha256 matched its part checksum. e must have part checksums.
func (s *Snapshot) ReadPart(ctx context.Context, e generation.Entry, i int) ([]byte, error) {
	if i < 0 || i >= e.NumParts() {
		return nil, fmt.Errorf("commit: %q: no part %d of %d", e.Path, i, e.NumParts())
	}
	off, n, _ := e.Part(i)
	rc, err := s.OpenRange(ctx, e, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	pr := rc.(*partRange)
	if err := pr.next(); err != nil {
		return nil, err
	}
	return pr.buf, nil
}

// partRange delivers the bytes [off, end) of a file with part checksums
// from a body that begins at the first part the range touches. It holds
// one part at a time, and delivers none of a part's bytes before the part
// matched.
type partRange struct {
	e    generation.Entry
	body io.ReadCloser
	part int    // the next part to read from body
	hold []byte // the part last read
	buf  []byte // its verified bytes of the range not yet delivered
	off  int64  // the file offset where the range goes on after buf
	end  int64  // the file offset where the range ends
	err  error  // sticky
}

func (r *partRange) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.off == r.end {
			return 0, io.EOF
		}
		if r.err = r.next(); r.err != nil {
			return 0, r.err
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// next reads the next part whole, checks it, and keeps the bytes of it
// that the range holds in buf.
func (r *partRange) next() error {
	off, n, sum := r.e.Part(r.part)
	if int64(cap(r.hold)) < n {
		r.hold = make([]byte, n)
	}
	part := r.hold[:n]
	got, err := io.ReadFull(r.body, part)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %q (key %q): part %d (bytes %d to %d) ends after %d bytes", ErrChecksum, r.e.Path, r.e.Key, r.part, off, off+n-1, got)
	}
	if err != nil {
		return fmt.Errorf("commit: read %q (key %q): %w", r.e.Path, r.e.Key, err)
	}
	h := sha256.Sum256(part)
	if hex.EncodeToString(h[:]) != sum {
		return fmt.Errorf("%w: %q (key %q): part %d (bytes %d to %d) has sha256 %x, its manifest says %s", ErrChecksum, r.e.Path, r.e.Key, r.part, off, off+n-1, h, sum)
	}
	r.part++
	r.buf = part[max(r.off-off, 0):min(r.end-off, n)]
	r.off = min(r.end, off+n)
	return nil
}

func (r *partRange) Close() error { return r.body.Close() }

// prefixRange delivers a range of a file that can only be verified whole:
// it reads the file from its start, and the read that would deliver the
// range's last bytes first reads the rest of the file, which fails if the
// file does not match its manifest.
type prefixRange struct {
	rc         io.ReadCloser
	skip, left int64
}

func (r *prefixRange) Read(p []byte) (int, error) {
	if r.skip > 0 {
		if err := discard(r.rc, r.skip); err != nil {
			return 0, err
		}
		r.skip = 0
	}
	if r.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.rc.Read(p)
	r.left -= int64(n)
	if err == io.EOF && r.left > 0 {
		return n, io.ErrUnexpectedEOF
	}
	if err != nil && err != io.EOF {
		return 0, err
	}
	if r.left == 0 {
		if err := discard(r.rc, -1); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func (r *prefixRange) Close() error { return r.rc.Close() }

// discardBuffers hold what discard drops: reads of 256 KiB cost fewer
// system calls than io.Discard's 8 KiB.
var discardBuffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// discard reads n bytes of r, or all of it when n is negative, and drops
// them.
func discard(r io.Reader, n int64) error {
	buf := discardBuffers.Get().(*[]byte)
	defer discardBuffers.Put(buf)
	if n >= 0 {
		r = io.LimitReader(r, n)
	}
	got, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{r}, *buf)
	if err == nil && n >= 0 && got < n {
		err = io.ErrUnexpectedEOF
	}
	return err
}
