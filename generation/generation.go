// Package generation names generations and encodes their manifests.
//
// A generation is one immutable version of a dataset. Its data objects live
// under _gen/<id>/ and are each written once; its manifest, written last,
// lists every file of the generation with its size and sha256. The id is a
// UUIDv7, so ids are unique and sort by creation time.
//
// Manifests are untrusted input when read back: Decode caps their size,
// rejects unknown formats and validates every path and key, so that a
// corrupt or hostile manifest can never name a file outside its dataset.
package generation

import (
	"fmt"
	"path"
	"strings"

	"github.com/google/uuid"
)

// Dir is the key prefix under which all generations live.
const Dir = "_gen/"

// ManifestName is the file name of a generation's manifest.
const ManifestName = "_manifest"

// New returns a fresh generation id (a UUIDv7).
func New() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("generation: new id: %w", err)
	}
	return id.String(), nil
}

// Valid reports whether id is a well-formed generation id (a UUIDv7 in
// canonical lower-case form).
func Valid(id string) error {
	u, err := uuid.Parse(id)
	if err != nil || u.String() != id || u.Version() != 7 {
		return fmt.Errorf("generation: bad id %q", id)
	}
	return nil
}

// Prefix returns the key prefix of a generation's objects: _gen/<id>/.
func Prefix(id string) string { return Dir + id + "/" }

// DataKey returns the key of a data file of a generation.
func DataKey(id, path string) string { return Prefix(id) + path }

// ManifestKey returns the key of a generation's manifest.
func ManifestKey(id string) string { return Prefix(id) + ManifestName }

// FromKey returns the generation id a key belongs to, or "" if the key is
// not under Dir.
func FromKey(key string) string {
	rest, ok := strings.CutPrefix(key, Dir)
	if !ok {
		return ""
	}
	id, _, ok := strings.Cut(rest, "/")
	if !ok || Valid(id) != nil {
		return ""
	}
	return id
}

// CheckPath validates a dataset-relative file path: slash-separated, not
// empty, not absolute, with no empty, "." or ".." segment, no backslash or
// NUL, no drive letter, and not the reserved manifest name. Every path that
// passes is safe to join below a destination directory.
func CheckPath(p string) error {
	bad := func(why string) error { return fmt.Errorf("generation: bad path %q: %s", p, why) }
	switch {
	case p == "":
		return bad("empty")
	case len(p) > 1024:
		return bad("longer than 1024 bytes")
	case strings.HasPrefix(p, "/"):
		return bad("absolute")
	case strings.ContainsAny(p, "\\\x00"):
		return bad("contains a backslash or NUL")
	case len(p) >= 2 && p[1] == ':':
		return bad("has a drive letter")
	case p == ManifestName:
		return bad("reserved name")
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case "":
			return bad("empty segment")
		case ".", "..":
			return bad("relative segment")
		}
	}
	return nil
}

// Clash returns a file of entries that the path of another entry runs
// through as if it were a directory ("a" beside "a/b"), and that other
// path; both are "" when there is none. No file system can hold both, so a
// generation with a clash could be read but never downloaded.
func Clash(entries []Entry) (file, below string) {
	files := make(map[string]bool, len(entries))
	for _, e := range entries {
		files[e.Path] = true
	}
	for _, e := range entries {
		for d := path.Dir(e.Path); d != "."; d = path.Dir(d) {
			if files[d] {
				return d, e.Path
			}
		}
	}
	return "", ""
}
