package fs

import (
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/commitptr/commitptr/store"
)

// errBadKey is the cause of every invalid-key error.
var errBadKey = fmt.Errorf("fs: %w", store.ErrInvalidKey)

const (
	maxKeyLen  = 1024 // the S3 limit, in bytes
	maxNameLen = 255  // NAME_MAX on Linux
	objSuffix  = "#"  // object files end with it; encoded segments never contain it
	tmpPrefix  = "#tmp-"
)

// checkKey reports why key is not a valid object key, or nil.
func checkKey(key string) error {
	bad := func(why string) error { return fmt.Errorf("%w: %s", errBadKey, why) }
	switch {
	case key == "":
		return bad("empty key")
	case len(key) > maxKeyLen:
		return bad(fmt.Sprintf("longer than %d bytes", maxKeyLen))
	case !utf8.ValidString(key):
		return bad("not valid UTF-8")
	case strings.HasPrefix(key, "/"):
		return bad("leading slash")
	case strings.ContainsRune(key, 0):
		return bad("contains NUL")
	case strings.ContainsRune(key, '\\'):
		return bad("contains a backslash")
	}
	for seg := range strings.SplitSeq(key, "/") {
		if err := checkSegment(seg); err != nil {
			return err
		}
	}
	return nil
}

// checkSegment reports why seg cannot be one segment of a key, or nil.
func checkSegment(seg string) error {
	switch {
	case seg == "":
		return fmt.Errorf("%w: empty segment", errBadKey)
	case seg == "." || seg == "..":
		return fmt.Errorf("%w: %q segment", errBadKey, seg)
	case len(encode(seg))+len(objSuffix) > maxNameLen:
		return fmt.Errorf("%w: segment longer than %d bytes when encoded", errBadKey, maxNameLen-len(objSuffix))
	case strings.ContainsRune(seg, 0) || strings.ContainsRune(seg, '\\'):
		return fmt.Errorf("%w: NUL or backslash", errBadKey)
	}
	return nil
}

// encode percent-encodes "%" and "#" so that no encoded segment contains "#".
func encode(seg string) string {
	if !strings.ContainsAny(seg, "%#") {
		return seg
	}
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		switch c := seg[i]; c {
		case '%':
			b.WriteString("%25")
		case '#':
			b.WriteString("%23")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// decode reverses encode. It reports false for a name that encode cannot
// produce (a foreign file), which listings skip.
func decode(name string) (string, bool) {
	if !strings.Contains(name, "%") {
		return name, name != "" && !strings.Contains(name, objSuffix)
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		switch {
		case strings.HasPrefix(name[i:], "%25"):
			b.WriteByte('%')
		case strings.HasPrefix(name[i:], "%23"):
			b.WriteByte('#')
		default:
			return "", false
		}
		i += 2
	}
	seg := b.String()
	return seg, encode(seg) == name && checkSegment(seg) == nil
}

// paths returns the directory that holds a valid key's object file, and the
// file's path.
func (s *Store) paths(key string) (dir, file string) {
	segs := strings.Split(key, "/")
	parts := make([]string, 0, len(segs))
	parts = append(parts, s.root)
	for _, seg := range segs[:len(segs)-1] {
		parts = append(parts, encode(seg))
	}
	dir = filepath.Join(parts...)
	return dir, filepath.Join(dir, encode(segs[len(segs)-1])+objSuffix)
}

// dirPath returns the directory for a key prefix that ends with "/" (or is
// empty), and false if no key can lie below it.
func (s *Store) dirPath(prefix string) (string, bool) {
	if prefix == "" {
		return s.root, true
	}
	parts := []string{s.root}
	for seg := range strings.SplitSeq(strings.TrimSuffix(prefix, "/"), "/") {
		if checkSegment(seg) != nil {
			return "", false
		}
		parts = append(parts, encode(seg))
	}
	return filepath.Join(parts...), true
}
