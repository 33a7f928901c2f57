package portable

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/commitptr/commitptr/store"
)

// Check refuses a Put that no service may be sent: a nil body, a Size out
// of [0, maxSize], or both conditions at once.
func Check(body io.Reader, opts store.PutOptions, maxSize int64) error {
	switch {
	case body == nil:
		return errors.New("nil body")
	case opts.Size < 0 || opts.Size > maxSize:
		return fmt.Errorf("size %d out of range (at most %d)", opts.Size, maxSize)
	case opts.IfMatch != "" && opts.IfNoneMatch:
		return errors.New("IfMatch and IfNoneMatch are exclusive")
	}
	return nil
}

// Body is a Put's body, split the way a driver sends it.
type Body struct {
	// Single is the whole body when it goes in one request, and Size is
	// its length. Single is nil when the body goes in parts. Its offset 0
	// is the body's offset at the call, so that an SDK may rewind it with
	// Seek(0, io.SeekStart).
	Single io.ReadSeeker
	Size   int64
	// Parts is the whole body when it goes in parts. It fails when the
	// body turns out longer or shorter than a declared Size.
	Parts io.Reader
}

// Read checks a Put (see Check) and splits its body: one request when it
// has at most limit bytes, parts otherwise. A conditional Put must fit in
// one request of at most store.MaxConditionalSize bytes, whatever limit is.
// The errors do not name the key; the driver wraps them.
func Read(body io.Reader, opts store.PutOptions, limit, maxSize int64) (Body, error) {
	return read(body, opts, limit, maxSize, store.MaxConditionalSize)
}

// read is Read with the conditional limit as an argument.
func read(body io.Reader, opts store.PutOptions, limit, maxSize, maxConditional int64) (Body, error) {
	if err := Check(body, opts, maxSize); err != nil {
		return Body{}, err
	}
	conditional := opts.IfMatch != "" || opts.IfNoneMatch
	if conditional {
		if opts.Size > maxConditional {
			return Body{}, fmt.Errorf("a conditional write is one request of at most %d bytes; Size is %d", maxConditional, opts.Size)
		}
		limit = maxConditional
	}
	if rs, ok := body.(io.ReadSeeker); ok {
		// A body that cannot tell its offset (a pipe) or seek to its end
		// (a file in /proc) is read like any other, from its offset.
		if cur, err := rs.Seek(0, io.SeekCurrent); err == nil {
			n, measured, err := remaining(rs, cur)
			if err != nil {
				return Body{}, fmt.Errorf("measure body: %w", err)
			}
			if measured {
				return split(&seekBody{rs: rs, base: cur, size: n, want: opts.Size}, n, opts.Size, limit, conditional)
			}
		}
	}

	// Only the first limit bytes are read; with a known size, the buffer
	// is allocated at once, and without one it grows, so that small bodies
	// stay cheap.
	head, capacity := limit, int64(0)
	if opts.Size > 0 {
		head = min(opts.Size, limit)
		capacity = head
	}
	buf, eof, err := Fill(body, make([]byte, 0, capacity), int(head))
	if err != nil {
		return Body{}, fmt.Errorf("read body: %w", err)
	}
	if eof {
		return split(bytes.NewReader(buf), int64(len(buf)), opts.Size, limit, conditional)
	}
	// buf is full: one byte more tells one request from parts.
	var one [1]byte
	n, err := io.ReadFull(body, one[:])
	switch {
	case err == io.EOF:
		return split(bytes.NewReader(buf), int64(len(buf)), opts.Size, limit, conditional)
	case err != nil:
		return Body{}, fmt.Errorf("read body: %w", err)
	case opts.Size > 0 && int64(len(buf)) >= opts.Size:
		return Body{}, fmt.Errorf("body is longer than Size %d", opts.Size)
	case conditional:
		return Body{}, tooLarge(limit)
	}
	return Body{Parts: &sized{head: buf, r: io.MultiReader(bytes.NewReader(one[:n]), body), want: opts.Size}}, nil
}

// split sends a body of known length n in one request if it fits.
func split(r io.ReadSeeker, n, want, limit int64, conditional bool) (Body, error) {
	switch {
	case want > 0 && n != want:
		return Body{}, fmt.Errorf("body has %d bytes, but Size says %d", n, want)
	case n <= limit:
		return Body{Single: r, Size: n}, nil
	case conditional:
		return Body{}, tooLarge(limit)
	}
	return Body{Parts: r}, nil
}

func tooLarge(limit int64) error {
	return fmt.Errorf("a conditional write is one request of at most %d bytes; the body is larger", limit)
}

// remaining returns the number of bytes from rs's offset cur to its end,
// and leaves the offset at cur. measured is false if rs cannot seek to
// its end; err is set only if rs cannot be put back at cur.
func remaining(rs io.ReadSeeker, cur int64) (n int64, measured bool, err error) {
	end, endErr := rs.Seek(0, io.SeekEnd)
	if _, err := rs.Seek(cur, io.SeekStart); err != nil {
		return 0, false, err
	}
	if endErr != nil {
		return 0, false, nil
	}
	return end - cur, true, nil
}

// seekBody is a seekable body seen from the caller's offset: its 0 is
// base in rs and its end is size, so that an SDK may rewind it with
// Seek(0, io.SeekStart) (minio-go does before every attempt) or require
// it at 0 (azblob). With want set (and then size is want), a body whose
// reads do not end at want bytes, such as a file written to after it was
// measured, fails, and one that is longer fails before it hands over its
// last byte: an HTTP transport sends Content-Length bytes, completing the
// request, before it reads on to find more.
type seekBody struct {
	rs              io.ReadSeeker
	base, size, pos int64
	want            int64
}

func (b *seekBody) Read(p []byte) (int, error) {
	n, err := b.rs.Read(p)
	b.pos += int64(n)
	switch {
	case b.want == 0 || (b.pos < b.want && err != io.EOF):
		return n, err
	case b.pos < b.want:
		return n, fmt.Errorf("body has %d bytes, but Size says %d", b.pos, b.want)
	case b.pos > b.want:
		return 0, fmt.Errorf("body is longer than Size %d", b.want)
	case err == nil:
		// At want bytes: the body must end here.
		var one [1]byte
		switch m, err := io.ReadFull(b.rs, one[:]); {
		case m > 0:
			b.pos += int64(m)
			return 0, fmt.Errorf("body is longer than Size %d", b.want)
		case err != io.EOF:
			return 0, err
		}
	}
	return n, err
}

func (b *seekBody) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += b.pos
	case io.SeekEnd:
		offset += b.size
	default:
		return 0, errors.New("portable: Seek: invalid whence")
	}
	if offset < 0 {
		return 0, errors.New("portable: Seek: negative position")
	}
	abs, err := b.rs.Seek(b.base+offset, io.SeekStart)
	if err != nil {
		return 0, err
	}
	b.pos = abs - b.base
	return b.pos, nil
}

// Fill reads from r into buf[:0] until it holds n bytes or r ends, growing
// buf as needed but never beyond n bytes. eof reports that r ended. From
// Parts not yet read, it takes the bytes Read holds as the buffer rather
// than copying them, so that a driver reading parts of limit bytes keeps
// one part in memory, not two; from Parts of a seekable body, whose length
// is known, it allocates the buffer at once.
func Fill(r io.Reader, buf []byte, n int) (out []byte, eof bool, err error) {
	buf = buf[:0]
	switch s := r.(type) {
	case *sized:
		if s.n == 0 && len(s.head) > 0 && len(s.head) <= n {
			buf, s.head = s.head, nil
			s.n = int64(len(buf)) // at most want: Read read at most that much
		}
	case *seekBody:
		if left := min(int64(n), s.size-s.pos); int64(cap(buf)) < left {
			buf = make([]byte, 0, left)
		}
	}
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(max(2*cap(buf), 64<<10), n))
			copy(grown, buf)
			buf = grown
		}
		m, err := r.Read(buf[len(buf):min(cap(buf), n)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, true, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
	return buf, false, nil
}

// sized passes a body through and fails it, before the upload is
// completed, if its length is not want (when want is not 0).
type sized struct {
	head []byte    // the body's first bytes, which Read read, not yet passed on
	r    io.Reader // the rest of the body
	want int64
	n    int64
}

func (s *sized) Read(p []byte) (int, error) {
	var n int
	var err error
	if len(s.head) > 0 {
		n = copy(p, s.head)
		s.head = s.head[n:]
	} else {
		n, err = s.r.Read(p)
	}
	s.n += int64(n)
	switch {
	case s.want > 0 && s.n > s.want:
		return n, fmt.Errorf("body is longer than Size %d", s.want)
	case err == io.EOF && s.want > 0 && s.n != s.want:
		return n, fmt.Errorf("body has %d bytes, but Size says %d", s.n, s.want)
	}
	return n, err
}
