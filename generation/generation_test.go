package generation_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/generation"
)

func TestCheckPath(t *testing.T) {
	for _, c := range []struct {
		path string
		ok   bool
	}{
		{"a.txt", true},
		{"dir/sub/file.csv", true},
		{"with space/ünï", true},
		{"..foo/bar..", true},
		{"", false},
		{"/abs", false},
		{"../x", false},
		{"a/../b", false},
		{"a/./b", false},
		{"a//b", false},
		{"a/", false},
		{`a\b`, false},
		{"C:/x", false},
		{"a\x00b", false},
		{"_manifest", false},
		{strings.Repeat("x", 1025), false},
	} {
		t.Run(strconv.Quote(c.path), func(t *testing.T) {
			err := generation.CheckPath(c.path)
			if c.ok {
				assert.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "bad path")
			}
		})
	}
}

func TestIDs(t *testing.T) {
	a, err := generation.New()
	require.NoError(t, err)
	time.Sleep(2 * time.Millisecond)
	b, err := generation.New()
	require.NoError(t, err)
	require.NoError(t, generation.Valid(a))
	assert.Less(t, a, b, "UUIDv7 ids sort by creation time")
	assert.Equal(t, a, generation.FromKey(generation.DataKey(a, "x/y")))
	assert.Equal(t, "", generation.FromKey("_pointer"))
	assert.Equal(t, "", generation.FromKey("_gen/not-a-uuid/x"))
	assert.Error(t, generation.Valid(strings.ToUpper(a)), "only the canonical form is valid")
	assert.Error(t, generation.Valid("01234567-89ab-4def-8123-456789abcdef"), "a v4 UUID is not a generation id")
}

func manifest(t *testing.T, n int) *generation.Manifest {
	t.Helper()
	gen, err := generation.New()
	require.NoError(t, err)
	m := &generation.Manifest{Format: generation.Format, Generation: gen, Seq: 1, StagingStart: time.Now().UTC()}
	for i := range n {
		p := "dir/file-" + strconv.Itoa(n-i) // unsorted on purpose
		m.Entries = append(m.Entries, generation.Entry{Path: p, Key: generation.DataKey(gen, p), Size: int64(i), SHA256: strings.Repeat("ab", 32)})
	}
	return m
}

func TestManifestRoundTrip(t *testing.T) {
	for _, n := range []int{0, 3, 5000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			m := manifest(t, n)
			stored, err := generation.Encode(m)
			require.NoError(t, err)
			if n == 5000 {
				assert.Equal(t, []byte{0x28, 0xb5, 0x2f, 0xfd}, stored[:4], "large manifests are zstd-compressed")
			}
			got, err := generation.Decode(stored)
			require.NoError(t, err)
			assert.Equal(t, m.Generation, got.Generation)
			require.Len(t, got.Entries, n)
			for i := 1; i < n; i++ {
				assert.Less(t, got.Entries[i-1].Path, got.Entries[i].Path)
			}
			if n > 0 {
				e, ok := got.Find("dir/file-1")
				assert.True(t, ok)
				assert.Equal(t, "dir/file-1", e.Path)
			}
			_, ok := got.Find("absent")
			assert.False(t, ok)
		})
	}
}

func TestEncodeRefusesBadManifest(t *testing.T) {
	m := manifest(t, 1)
	m.Entries[0].Path = "../escape"
	_, err := generation.Encode(m)
	require.ErrorIs(t, err, generation.ErrCorrupt)
	assert.Contains(t, err.Error(), "../escape")
}

// A manifest written before modes and times were recorded (format 1) still
// reads, and its entries say they record neither.
func TestManifestFormat1StillReads(t *testing.T) {
	stored, err := os.ReadFile(filepath.Join("testdata", "manifest-v1.json"))
	require.NoError(t, err)
	m, err := generation.Decode(stored)
	require.NoError(t, err)
	assert.Equal(t, generation.FormatV1, m.Format)
	require.Len(t, m.Entries, 2)
	_, ok := m.Entries[0].Perm()
	assert.False(t, ok, "a format 1 entry records no mode")
	assert.True(t, m.Entries[0].MTime.IsZero())
}

func TestManifestModesAndTimes(t *testing.T) {
	m := manifest(t, 2)
	stored, err := generation.Encode(m)
	require.NoError(t, err)
	assert.Equal(t, generation.FormatV1, m.Format, "without modes or times the manifest stays readable by format 1 readers")
	assert.Contains(t, string(stored), `"format":1`)

	mtime := time.Date(2026, 11, 24, 9, 30, 0, 123456789, time.UTC)
	m.Entries[0].Mode, m.Entries[0].MTime = generation.FormatMode(0o755), mtime
	m.Entries[1].Mode = generation.FormatMode(0o600)
	stored, err = generation.Encode(m)
	require.NoError(t, err)
	assert.Equal(t, generation.Format, m.Format)
	got, err := generation.Decode(stored)
	require.NoError(t, err)
	perm, ok := got.Entries[0].Perm()
	require.True(t, ok)
	assert.Equal(t, fs.FileMode(0o755), perm)
	assert.True(t, mtime.Equal(got.Entries[0].MTime), "the modification time keeps its nanoseconds")
	perm, ok = got.Entries[1].Perm()
	require.True(t, ok)
	assert.Equal(t, fs.FileMode(0o600), perm)

	for _, bad := range []string{"755", "0758", "04755", "1755", "rwx"} {
		m := manifest(t, 1)
		m.Entries[0].Mode = bad
		_, err := generation.Encode(m)
		require.ErrorIs(t, err, generation.ErrCorrupt, "mode %q", bad)
		assert.Contains(t, err.Error(), "bad mode")
	}
	// A format 1 document cannot carry the new fields.
	v1 := strings.Replace(string(stored), `"format":2`, `"format":1`, 1)
	_, err = generation.Decode([]byte(v1))
	require.ErrorIs(t, err, generation.ErrCorrupt)
	assert.Contains(t, err.Error(), "format 1 records no mode")
}

// TestEncodeWritesOnlyWhatDecodes: Encode never returns a manifest that
// Decode would refuse, so a commit cannot make its generation unreadable.
// A long, repetitive message compresses far better than the ratio Decode
// allows, so Decode stops reading it early; Encode must refuse it instead.
func TestEncodeWritesOnlyWhatDecodes(t *testing.T) {
	m := manifest(t, 3)
	m.Message = strings.Repeat("a", 8<<20)
	stored, err := generation.Encode(m)
	if err == nil {
		_, derr := generation.Decode(stored)
		require.NoError(t, derr, "Encode wrote a manifest that Decode refuses")
		return
	}
	require.ErrorIs(t, err, generation.ErrCorrupt)
	assert.Contains(t, err.Error(), m.Generation)
	assert.Contains(t, err.Error(), "too large")

	// The same manifest with an ordinary message encodes and decodes.
	m.Message = "nightly"
	stored, err = generation.Encode(m)
	require.NoError(t, err)
	_, err = generation.Decode(stored)
	require.NoError(t, err)
}

// TestLargeManifestRoundTrip: a manifest larger than the decoder's window
// (8 MiB of JSON) still decodes.
func TestLargeManifestRoundTrip(t *testing.T) {
	m := manifest(t, 100_000)
	for i := range m.Entries {
		sum := sha256.Sum256([]byte(m.Entries[i].Path)) // as incompressible as real checksums
		m.Entries[i].SHA256 = hex.EncodeToString(sum[:])
	}
	stored, err := generation.Encode(m)
	require.NoError(t, err)
	got, err := generation.Decode(stored)
	require.NoError(t, err)
	require.Len(t, got.Entries, 100_000)
}

// TestManifestCarried: a manifest that carried other writers is written
// as format 3, its writers sorted, and read back; a manifest that lists
// none is never format 3; a format 3 manifest without them, one that
// carries itself, and one that lists a writer twice are corrupt.
func TestManifestCarried(t *testing.T) {
	m := manifest(t, 2)
	a, err := generation.New()
	require.NoError(t, err)
	b, err := generation.New()
	require.NoError(t, err)
	m.Carried = []generation.Carried{{Generation: b, Writer: "w2"}, {Generation: a, Writer: "w1"}}
	stored, err := generation.Encode(m)
	require.NoError(t, err)
	got, err := generation.Decode(stored)
	require.NoError(t, err)
	assert.Equal(t, generation.FormatCarried, got.Format)
	assert.Equal(t, []generation.Carried{{Generation: a, Writer: "w1"}, {Generation: b, Writer: "w2"}}, got.Carried)
	assert.True(t, got.CarriedBy(a))
	assert.True(t, got.CarriedBy(b))
	assert.False(t, got.CarriedBy(m.Generation))

	plain := manifest(t, 2)
	stored, err = generation.Encode(plain)
	require.NoError(t, err)
	assert.NotContains(t, string(stored), "carried")
	got, err = generation.Decode(stored)
	require.NoError(t, err)
	assert.NotEqual(t, generation.FormatCarried, got.Format)

	for name, spoil := range map[string]func(m *generation.Manifest){
		"format 3 without carried": func(m *generation.Manifest) { m.Format, m.Carried = generation.FormatCarried, nil },
		"carried in format 2":      func(m *generation.Manifest) { m.Format = generation.Format },
		"carries itself": func(m *generation.Manifest) {
			m.Carried = append(m.Carried, generation.Carried{Generation: m.Generation})
		},
		"twice":    func(m *generation.Manifest) { m.Carried = append(m.Carried, m.Carried[0]) },
		"a bad id": func(m *generation.Manifest) { m.Carried[0].Generation = "x" },
	} {
		t.Run(name, func(t *testing.T) {
			m := manifest(t, 1)
			m.Format, m.Carried = generation.FormatCarried, []generation.Carried{{Generation: a}}
			spoil(m)
			require.ErrorIs(t, m.Validate(), generation.ErrCorrupt)
		})
	}
}

// TestManifestRebased: a manifest whose commit rebased is written as
// format 4, with or without carried writers, and read back; one that did
// not rebase is never format 4; a count without format 4, format 4
// without a count, and a negative count are corrupt.
func TestManifestRebased(t *testing.T) {
	a, err := generation.New()
	require.NoError(t, err)
	for _, carried := range [][]generation.Carried{nil, {{Generation: a, Writer: "w1"}}} {
		m := manifest(t, 2)
		m.Rebased, m.Carried = 3, carried
		stored, err := generation.Encode(m)
		require.NoError(t, err)
		got, err := generation.Decode(stored)
		require.NoError(t, err)
		assert.Equal(t, generation.FormatRebased, got.Format)
		assert.Equal(t, 3, got.Rebased)
		assert.Equal(t, carried, got.Carried)
	}
	plain := manifest(t, 2)
	plain.Carried = []generation.Carried{{Generation: a}}
	stored, err := generation.Encode(plain)
	require.NoError(t, err)
	assert.NotContains(t, string(stored), "rebased")

	for name, spoil := range map[string]func(m *generation.Manifest){
		"count in format 3": func(m *generation.Manifest) {
			m.Format, m.Carried = generation.FormatCarried, []generation.Carried{{Generation: a}}
		},
		"count in format 2":      func(m *generation.Manifest) { m.Format = generation.Format },
		"format 4 without count": func(m *generation.Manifest) { m.Rebased = 0 },
		"negative count":         func(m *generation.Manifest) { m.Rebased = -1 },
		"format 5 without parts": func(m *generation.Manifest) { m.Format = generation.FormatParts },
	} {
		t.Run(name, func(t *testing.T) {
			m := manifest(t, 1)
			m.Format, m.Rebased = generation.FormatRebased, 1
			require.NoError(t, m.Validate())
			spoil(m)
			require.ErrorIs(t, m.Validate(), generation.ErrCorrupt)
		})
	}
}
