package generation_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/generation"
)

// partsOf is the rule, spelled out: the sha256 of each size bytes of data.
func partsOf(data []byte, size int) string {
	if len(data) <= size {
		return ""
	}
	var b strings.Builder
	for off := 0; off < len(data); off += size {
		s := sha256.Sum256(data[off:min(off+size, len(data))])
		b.WriteString(hex.EncodeToString(s[:]))
	}
	return b.String()
}

// TestPartHasherComputesEachPartsChecksum: over random lengths, part sizes
// and write sizes, the hasher's parts are the sha256 of each part, none for
// a file not longer than one part, and the entry's Part gives each part's
// range and sum back.
func TestPartHasherComputesEachPartsChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		size := generation.MinPartSize * (1 + rng.IntN(4))
		n := rng.IntN(5*size + 2)
		if rng.IntN(2) == 0 {
			// A part boundary and a byte either side; 0, empty.
			n = max(0, size*rng.IntN(4)+rng.IntN(3)-1)
		}
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		h := generation.NewPartHasher(int64(size))
		for rest := data; len(rest) > 0; {
			k := min(len(rest), 1+rng.IntN(2*size))
			w, err := h.Write(rest[:k])
			require.NoError(t, err)
			require.Equal(t, k, w)
			rest = rest[k:]
		}
		ps, parts := h.Parts()
		require.Equal(t, partsOf(data, size), parts, "%d bytes in parts of %d", n, size)
		if parts == "" {
			assert.Zero(t, ps)
			assert.Zero(t, generation.NumParts(int64(n), int64(size)))
			continue
		}
		e := generation.Entry{Size: int64(n), PartSize: ps, Parts: parts}
		require.Equal(t, generation.NumParts(int64(n), ps), e.NumParts())
		var joined []byte
		for i := range e.NumParts() {
			off, k, sum := e.Part(i)
			s := sha256.Sum256(data[off : off+k])
			require.Equal(t, hex.EncodeToString(s[:]), sum)
			joined = append(joined, data[off:off+k]...)
		}
		require.True(t, bytes.Equal(data, joined), "the parts cover the file once, in order")
	}
}

// TestManifestWithPartsIsFormat5: a manifest is written as format 5 only
// when an entry has parts, and reads back with them.
func TestManifestWithPartsIsFormat5(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), generation.MinPartSize/4)
	h := generation.NewPartHasher(generation.MinPartSize)
	_, _ = h.Write(data)
	carried, err := generation.New()
	require.NoError(t, err)
	m := manifest(t, 2)
	m.Rebased, m.Carried = 2, []generation.Carried{{Generation: carried, Writer: "w"}}
	m.Entries[0].Size = int64(len(data))
	m.Entries[0].PartSize, m.Entries[0].Parts = h.Parts()
	want := m.Entries[0]
	stored, err := generation.Encode(m)
	require.NoError(t, err)
	got, err := generation.Decode(stored)
	require.NoError(t, err)
	assert.Equal(t, generation.FormatParts, got.Format)
	assert.Equal(t, 2, got.Rebased)
	assert.Equal(t, m.Carried, got.Carried)
	e, ok := got.Find(want.Path)
	require.True(t, ok)
	assert.Equal(t, want, e)
	assert.Equal(t, 3, e.NumParts())

	plain := manifest(t, 2)
	stored, err = generation.Encode(plain)
	require.NoError(t, err)
	assert.NotContains(t, string(stored), "parts")
	assert.Less(t, plain.Format, generation.FormatParts)
}

// TestManifestRefusesBadParts: part checksums that do not fit their entry
// make the manifest corrupt.
func TestManifestRefusesBadParts(t *testing.T) {
	const ps = generation.MinPartSize
	sum := strings.Repeat("ab", 32)
	for name, spoil := range map[string]func(e *generation.Entry){
		"a part size below the least":   func(e *generation.Entry) { e.PartSize = ps - 1; e.Size = 3*e.PartSize - 1 },
		"a part size above the most":    func(e *generation.Entry) { e.PartSize = generation.MaxPartSize + 1; e.Size = 2*e.PartSize + 1 },
		"no part size":                  func(e *generation.Entry) { e.PartSize = 0 },
		"no parts":                      func(e *generation.Entry) { e.Parts = "" },
		"one part too few":              func(e *generation.Entry) { e.Parts = e.Parts[64:] },
		"one part too many":             func(e *generation.Entry) { e.Parts += sum },
		"half a checksum":               func(e *generation.Entry) { e.Parts = e.Parts[32:] },
		"upper case":                    func(e *generation.Entry) { e.Parts = strings.ToUpper(e.Parts) },
		"not hex":                       func(e *generation.Entry) { e.Parts = strings.Repeat("zz", 96) },
		"a file of one part":            func(e *generation.Entry) { e.Size = ps; e.Parts = sum },
		"compressed":                    func(e *generation.Entry) { e.Encoding = generation.EncodingZstd },
		"a size the parts do not reach": func(e *generation.Entry) { e.Size = 3*ps + 1 },
	} {
		t.Run(name, func(t *testing.T) {
			m := manifest(t, 1)
			m.Format = generation.FormatParts
			e := &m.Entries[0]
			e.Size, e.PartSize, e.Parts = 3*ps, ps, strings.Repeat(sum, 3)
			require.NoError(t, m.Validate())
			spoil(e)
			require.ErrorIs(t, m.Validate(), generation.ErrCorrupt)
		})
	}
	t.Run("a part size without parts in format 4", func(t *testing.T) {
		m := manifest(t, 1)
		m.Format, m.Rebased = generation.FormatRebased, 1
		m.Entries[0].Size, m.Entries[0].PartSize = 3*ps, ps
		require.ErrorIs(t, m.Validate(), generation.ErrCorrupt)
	})
	t.Run("parts in format 4", func(t *testing.T) {
		m := manifest(t, 1)
		m.Format, m.Rebased = generation.FormatRebased, 1
		e := &m.Entries[0]
		e.Size, e.PartSize, e.Parts = 3*ps, ps, strings.Repeat(sum, 3)
		require.ErrorIs(t, m.Validate(), generation.ErrCorrupt)
	})
}
