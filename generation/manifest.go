package generation

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/commitptr/commitptr/internal/strictjson"
)

// Format is the manifest format version of entries with Mode and MTime.
// Format 2 adds them to format 1; Encode writes FormatV1 when no entry
// records them, so that such manifests stay readable by readers that know
// only format 1.
const Format = 2

// FormatCarried is the format of a manifest that carried other writers'
// changes (group commit): format 2 with Carried. Encode writes it only
// when Carried is not empty, so readers that know only formats 1 and 2
// refuse exactly the generations they could not describe.
const FormatCarried = 3

// FormatRebased is the format of a manifest whose commit rebased: format 3
// with Rebased, and Carried if it carried writers. Encode writes it only
// when Rebased is not zero.
const FormatRebased = 4

// FormatParts is the format of a manifest with part checksums (see
// Entry.Parts): format 4, with Carried and Rebased only where they are
// set. Encode writes it only when an entry has parts.
const FormatParts = 5

// FormatV1 is the first manifest format: entries without Mode and MTime.
// Decode still reads it.
const FormatV1 = 1

// Size limits for manifests read back from a store.
const (
	// MaxStored is the largest stored (possibly compressed) manifest accepted.
	MaxStored = 256 << 20
	// MaxDecoded is the largest manifest accepted after decompression
	// (about two million files).
	MaxDecoded = 512 << 20
	// MaxRatio caps decompression at this many times the stored size (plus
	// 1 MiB), so that a small, hostile manifest cannot make a reader
	// allocate MaxDecoded. Real manifests compress about 4:1.
	MaxRatio = 64
	// CompressAbove is the encoded size above which Encode compresses.
	CompressAbove = 64 << 10
)

// ErrCorrupt is matched by every error about a malformed manifest.
var ErrCorrupt = errors.New("generation: corrupt manifest")

// Encodings of data objects.
const (
	EncodingNone = ""
	EncodingZstd = "zstd"
)

// Manifest lists the files of one generation.
type Manifest struct {
	Format     int    `json:"format"`
	Generation string `json:"generation"`
	// Parent is the generation this one was built on; empty for the first.
	Parent string `json:"parent,omitempty"`
	// ParentManifestSHA256 is the sha256 of the parent's stored manifest,
	// so the history can be verified link by link.
	ParentManifestSHA256 string `json:"parent_manifest_sha256,omitempty"`
	// Seq is the pointer sequence number this generation is meant to become.
	Seq uint64 `json:"seq"`
	// StagingStart is a server time taken before the first object of the
	// generation was written. A collector horizon at or past it means some
	// of the generation's objects may have been collected.
	StagingStart time.Time `json:"staging_start"`
	// BaseCommittedAt is the Last-Modified of the pointer naming Parent, as
	// read before staging: in the store's clock, when Parent was committed
	// (or later, if the collector rewrote the pointer since). The collector
	// judges Parent's parent's supersession age by it.
	BaseCommittedAt time.Time         `json:"base_committed_at,omitzero"`
	Writer          string            `json:"writer,omitempty"`
	Message         string            `json:"message,omitempty"`
	Meta            map[string]string `json:"meta,omitempty"`
	// Carried names the other writers whose changes this generation
	// applies besides its own (group commit), sorted by generation. Each
	// is the generation id of a Tx whose data objects it references.
	// Format 3.
	Carried []Carried `json:"carried,omitempty"`
	// Rebased is how many times the commit rebased before it landed: it
	// met other writers. Format 4.
	Rebased int     `json:"rebased,omitempty"`
	Entries []Entry `json:"entries"`
}

// Carried is one writer whose changes a group commit applied.
type Carried struct {
	// Generation is the id of the writer's Tx, under which its data
	// objects are staged.
	Generation string `json:"generation"`
	Writer     string `json:"writer,omitempty"`
}

// CarriedBy reports whether the manifest carried the Tx with generation
// id gen.
func (m *Manifest) CarriedBy(gen string) bool {
	_, ok := slices.BinarySearchFunc(m.Carried, gen, func(c Carried, g string) int { return strings.Compare(c.Generation, g) })
	return ok
}

// Entry is one file of a generation.
type Entry struct {
	Path string `json:"path"`
	// Key is the object holding the file; it may belong to an older
	// generation when an incremental publish reused an unchanged file.
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Encoding is how the object is stored: "" (as is) or "zstd". Size and
	// SHA256 always describe the decoded file.
	Encoding string `json:"encoding,omitempty"`
	// Mode is the file's permission bits as four octal digits, such as
	// "0755", at most "0777" (no setuid, setgid or sticky bits); "" when
	// not recorded. Format 2.
	Mode string `json:"mode,omitempty"`
	// MTime is the file's modification time; zero when not recorded.
	// Format 2.
	MTime time.Time `json:"mtime,omitzero"`
	// PartSize and Parts are the file's part checksums: the sha256 of
	// each PartSize bytes, in order, as one string of lower-case hex.
	// Only a file stored as is and longer than PartSize has them; see
	// parts.go. Format 5.
	PartSize int64  `json:"part_size,omitempty"`
	Parts    string `json:"parts,omitempty"`
}

// FormatMode returns the Mode string for the permission bits of m.
func FormatMode(m fs.FileMode) string { return fmt.Sprintf("%04o", uint32(m.Perm())) }

// Perm returns the recorded permission bits, and false when the entry has
// none.
func (e Entry) Perm() (fs.FileMode, bool) {
	if e.Mode == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(e.Mode, 8, 32)
	if err != nil || n > 0o777 {
		return 0, false
	}
	return fs.FileMode(n), true
}

// checkMode reports whether s is a valid Mode: "" or four octal digits, at
// most 0777.
func checkMode(s string) bool {
	if s == "" {
		return true
	}
	if len(s) != 4 || s[0] != '0' {
		return false
	}
	for _, c := range s[1:] {
		if c < '0' || c > '7' {
			return false
		}
	}
	return true
}

// hasV2Fields reports whether an entry records what format 1 cannot hold.
func (e Entry) hasV2Fields() bool { return e.Mode != "" || !e.MTime.IsZero() }

// Find returns the entry for path, if any. Entries must be sorted.
func (m *Manifest) Find(path string) (Entry, bool) {
	i, ok := slices.BinarySearchFunc(m.Entries, path, func(e Entry, p string) int { return strings.Compare(e.Path, p) })
	if !ok {
		return Entry{}, false
	}
	return m.Entries[i], true
}

// Keys returns every object key the manifest references, including itself.
func (m *Manifest) Keys() []string {
	keys := make([]string, 0, len(m.Entries)+1)
	for _, e := range m.Entries {
		keys = append(keys, e.Key)
	}
	return append(keys, ManifestKey(m.Generation))
}

// TotalSize returns the sum of the entries' sizes.
func (m *Manifest) TotalSize() int64 {
	var n int64
	for _, e := range m.Entries {
		n += e.Size
	}
	return n
}

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// Encode sorts the entries and the carried writers, sets the format to
// the oldest that holds them (FormatV1 unless an entry records a mode or a
// modification time, FormatCarried when it carried writers,
// FormatRebased when it rebased, FormatParts when an entry has part
// checksums), validates
// the manifest and returns its stored form: JSON,
// zstd-compressed when larger than CompressAbove.
func Encode(m *Manifest) ([]byte, error) {
	slices.SortFunc(m.Entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	slices.SortFunc(m.Carried, func(a, b Carried) int { return strings.Compare(a.Generation, b.Generation) })
	m.Format = FormatV1
	switch {
	case slices.ContainsFunc(m.Entries, Entry.HasParts):
		m.Format = FormatParts
	case m.Rebased != 0:
		m.Format = FormatRebased
	case len(m.Carried) > 0:
		m.Format = FormatCarried
	case slices.ContainsFunc(m.Entries, Entry.hasV2Fields):
		m.Format = Format
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("generation: encode manifest: %w", err)
	}
	if len(b) <= CompressAbove {
		return b, nil
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	stored := enc.EncodeAll(b, nil)
	// Refuse what Decode would refuse: a manifest written but unreadable
	// would make its generation unreadable once committed.
	if len(stored) > MaxStored || int64(len(b)) > decodedLimit(len(stored)) {
		return nil, fmt.Errorf("%w: generation %q: too large: %d bytes of JSON stored as %d, more than a reader accepts (%d stored, %d decoded, at most %d times the stored size)",
			ErrCorrupt, m.Generation, len(b), len(stored), MaxStored, MaxDecoded, MaxRatio)
	}
	return stored, nil
}

// MinEntrySize is the fewest bytes the entry of a file at path takes in a
// manifest's JSON, whatever the file's size, checksum and object key. A
// caller listing files can stop once the sum passes MaxDecoded: no reader
// would accept that manifest.
func MinEntrySize(path string) int {
	b, err := json.Marshal(Entry{Path: path, Key: DataKey(minEntryGen, path), SHA256: minEntrySum})
	if err != nil {
		return len(path)
	}
	return len(b) + len(",")
}

var (
	minEntryGen = "00000000-0000-7000-8000-000000000000"
	minEntrySum = strings.Repeat("0", 64)
)

// decodedLimit is the most bytes Decode accepts from a compressed manifest
// of n stored bytes.
func decodedLimit(n int) int64 {
	return min(int64(MaxDecoded), int64(n)*MaxRatio+1<<20)
}

// Decode parses and validates a stored manifest.
func Decode(stored []byte) (*Manifest, error) {
	if len(stored) > MaxStored {
		return nil, fmt.Errorf("%w: %d bytes, more than the %d allowed", ErrCorrupt, len(stored), MaxStored)
	}
	b := stored
	if bytes.HasPrefix(stored, zstdMagic) {
		limit := decodedLimit(len(stored))
		dec, err := zstd.NewReader(bytes.NewReader(stored), zstd.WithDecoderMaxMemory(uint64(limit)),
			zstd.WithDecoderMaxWindow(8<<20), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		defer dec.Close()
		b, err = io.ReadAll(io.LimitReader(dec, limit+1))
		if err != nil {
			return nil, fmt.Errorf("%w: decompress: %v", ErrCorrupt, err)
		}
		if int64(len(b)) > limit {
			return nil, fmt.Errorf("%w: decompresses to more than %d bytes (%d stored)", ErrCorrupt, limit, len(stored))
		}
	}
	var m Manifest
	if err := strictjson.Decode(b, []int{FormatV1, Format, FormatCarried, FormatRebased, FormatParts}, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks every field: ids, paths, keys, sizes, checksums and
// encodings, and that the paths are sorted and unique.
func (m *Manifest) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: generation %q: %s", ErrCorrupt, m.Generation, fmt.Sprintf(format, args...))
	}
	switch {
	case m.Format < FormatV1 || m.Format > FormatParts:
		return bad("format %d", m.Format)
	case m.Format < FormatCarried && len(m.Carried) > 0:
		return bad("format %d carries no other writers", m.Format)
	case m.Format == FormatCarried && len(m.Carried) == 0:
		return bad("format %d without carried writers", m.Format)
	case m.Rebased < 0, m.Format < FormatRebased && m.Rebased != 0, m.Format == FormatRebased && m.Rebased == 0:
		return bad("format %d with %d rebases", m.Format, m.Rebased)
	case m.Format == FormatParts && !slices.ContainsFunc(m.Entries, Entry.HasParts):
		return bad("format %d without part checksums", m.Format)
	}
	for i, c := range m.Carried {
		if err := Valid(c.Generation); err != nil {
			return bad("carried: %v", err)
		}
		if c.Generation == m.Generation {
			return bad("carries itself")
		}
		if i > 0 && m.Carried[i-1].Generation >= c.Generation {
			return bad("carried writers not sorted or repeated at %s", c.Generation)
		}
	}
	if err := Valid(m.Generation); err != nil {
		return bad("%v", err)
	}
	if m.Parent != "" {
		if err := Valid(m.Parent); err != nil {
			return bad("parent: %v", err)
		}
		if !isSHA256(m.ParentManifestSHA256) {
			return bad("parent manifest sha256 %q", m.ParentManifestSHA256)
		}
	}
	if m.Seq == 0 {
		return bad("seq 0")
	}
	for i, e := range m.Entries {
		if err := CheckPath(e.Path); err != nil {
			return fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if i > 0 && m.Entries[i-1].Path >= e.Path {
			return bad("paths not sorted or repeated at %q", e.Path)
		}
		gen := FromKey(e.Key)
		if gen == "" || !strings.HasPrefix(e.Key, Prefix(gen)) || e.Key == ManifestKey(gen) || CheckPath(strings.TrimPrefix(e.Key, Prefix(gen))) != nil {
			return bad("entry %q: bad key %q", e.Path, e.Key)
		}
		if e.Size < 0 {
			return bad("entry %q: negative size", e.Path)
		}
		if !isSHA256(e.SHA256) {
			return bad("entry %q: bad sha256 %q", e.Path, e.SHA256)
		}
		if e.Encoding != EncodingNone && e.Encoding != EncodingZstd {
			return bad("entry %q: unknown encoding %q", e.Path, e.Encoding)
		}
		if !checkMode(e.Mode) {
			return bad("entry %q: bad mode %q", e.Path, e.Mode)
		}
		if m.Format == FormatV1 && e.hasV2Fields() {
			return bad("entry %q: format %d records no mode or modification time", e.Path, m.Format)
		}
		if why := e.checkParts(); why != "" {
			return bad("entry %q: %s", e.Path, why)
		}
		if m.Format < FormatParts && e.HasParts() {
			return bad("entry %q: format %d records no part checksums", e.Path, m.Format)
		}
	}
	return nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}
