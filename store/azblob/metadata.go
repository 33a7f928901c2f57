package azblob

import (
	"fmt"
	"strconv"
	"strings"
)

// Azure metadata names must be C# identifiers, so that "commitptr-origin"
// cannot be stored as it is. encodeName escapes every byte other than a
// lower case letter, and a digit in the first place, as "_" and two hex
// digits ("-" is "_2d", "_" is "_5f"); decodeName reverses it. Names that
// are identifiers of letters and digits already are stored unchanged.
func encodeName(k string) (string, error) {
	if k == "" {
		return "", fmt.Errorf("empty metadata name")
	}
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'A' && c <= 'Z':
			return "", fmt.Errorf("metadata name %q is not lower case", k)
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	return b.String(), nil
}

// decodeName reverses encodeName; a name that is not such an encoding (set
// by another tool) comes back lower cased and otherwise as stored.
func decodeName(k string) string {
	k = strings.ToLower(k)
	if !strings.Contains(k, "_") {
		return k
	}
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		if k[i] == '_' && i+2 < len(k) {
			if v, err := strconv.ParseUint(k[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(k[i])
	}
	return b.String()
}

func encodeMetadata(m map[string]string) (map[string]*string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]*string, len(m))
	for k, v := range m {
		name, err := encodeName(k)
		if err != nil {
			return nil, err
		}
		out[name] = &v
	}
	return out, nil
}

func decodeMetadata(m map[string]*string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if v != nil {
			out[decodeName(k)] = *v
		}
	}
	return out
}
