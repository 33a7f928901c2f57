package generation

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"strings"
)

// Part checksums let a reader verify a range of a file without reading all
// of it: an entry may record the sha256 of each PartSize bytes of its file,
// in order, the last part being the remainder. They are recorded only for a
// file stored as is and longer than one part.
const (
	// DefaultPartSize is the part size writers record by default.
	DefaultPartSize = 8 << 20
	// MinPartSize and MaxPartSize bound the part size a manifest may hold:
	// a reader holds a part in memory to verify it.
	MinPartSize = 4 << 10
	MaxPartSize = 64 << 20
)

// NumParts returns how many part checksums an entry of this size and part
// size holds: 0 unless the file is longer than one part.
func NumParts(size, partSize int64) int {
	if partSize <= 0 || size <= partSize {
		return 0
	}
	return int((size + partSize - 1) / partSize)
}

// HasParts reports whether the entry records part checksums.
func (e Entry) HasParts() bool { return e.Parts != "" }

// NumParts returns how many parts the entry records.
func (e Entry) NumParts() int { return len(e.Parts) / sha256.Size / 2 }

// Part returns the byte range of part i of the file, and its sha256 in
// lower-case hex. i must be in [0, NumParts()).
func (e Entry) Part(i int) (off, n int64, sum string) {
	off = int64(i) * e.PartSize
	n = min(e.PartSize, e.Size-off)
	return off, n, e.Parts[i*2*sha256.Size : (i+1)*2*sha256.Size]
}

// checkParts reports what is wrong with the entry's part checksums, or "".
func (e Entry) checkParts() string {
	switch {
	case e.Parts == "" && e.PartSize == 0:
		return ""
	case e.PartSize < MinPartSize || e.PartSize > MaxPartSize:
		return fmt.Sprintf("part size %d, not in [%d, %d]", e.PartSize, MinPartSize, MaxPartSize)
	case e.Encoding != EncodingNone:
		return fmt.Sprintf("part checksums of a file stored as %q", e.Encoding)
	}
	want := NumParts(e.Size, e.PartSize)
	if want == 0 {
		return fmt.Sprintf("part checksums of a file of %d bytes, not longer than a part of %d", e.Size, e.PartSize)
	}
	if len(e.Parts) != want*2*sha256.Size {
		return fmt.Sprintf("%d characters of part checksums, not %d for %d parts", len(e.Parts), want*2*sha256.Size, want)
	}
	if _, err := hex.DecodeString(e.Parts); err != nil || strings.ToLower(e.Parts) != e.Parts {
		return "part checksums not in lower-case hex"
	}
	return ""
}

// PartHasher computes, from the bytes written to it, the part checksums
// of an entry with part size PartSize.
type PartHasher struct {
	size int64
	h    hash.Hash
	in   int64 // bytes of the current part written
	sums []byte
	n    int64
}

// NewPartHasher returns a PartHasher for parts of size bytes, which must be
// in [MinPartSize, MaxPartSize].
func NewPartHasher(size int64) *PartHasher {
	return &PartHasher{size: size, h: sha256.New()}
}

// Write adds p to the parts; it never fails.
func (p *PartHasher) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		k := min(int64(len(b)), p.size-p.in)
		p.h.Write(b[:k])
		p.in += k
		b = b[k:]
		if p.in == p.size {
			p.sums = p.h.Sum(p.sums)
			p.h.Reset()
			p.in = 0
		}
	}
	p.n += int64(n)
	return n, nil
}

// Parts returns the entry's PartSize and Parts for what was written: none
// when it was not longer than one part.
func (p *PartHasher) Parts() (int64, string) {
	if NumParts(p.n, p.size) == 0 {
		return 0, ""
	}
	sums := slices.Clone(p.sums)
	if p.in > 0 {
		sums = p.h.Sum(sums)
	}
	return p.size, hex.EncodeToString(sums)
}
