package fs

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// magic ends every object file.
const magic = "cptrobj1"

// footerLen is the trailer length (uint32) plus the magic.
const footerLen = 4 + len(magic)

// maxTrailer bounds the JSON trailer that readTrailer accepts.
const maxTrailer = 1 << 20

// trailer holds an object's attributes; it follows the body in the file.
type trailer struct {
	ETag            string            `json:"etag"`
	Size            int64             `json:"size"`
	ContentType     string            `json:"content_type,omitempty"`
	ContentEncoding string            `json:"content_encoding,omitempty"`
	Metadata        map[string]string `json:"metadata,omitempty"`
}

// writeTrailer appends the trailer and footer to w.
func writeTrailer(w io.Writer, t trailer) error {
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(b)))
	b = append(b, magic...)
	_, err = w.Write(b)
	return err
}

// readTrailer reads the trailer of the object file f, whose size is size.
func readTrailer(f *os.File, size int64) (trailer, error) {
	var t trailer
	corrupt := func(why string) (trailer, error) {
		return t, fmt.Errorf("fs: corrupt object file %s: %s", f.Name(), why)
	}
	if size < int64(footerLen) {
		return corrupt("too short")
	}
	foot := make([]byte, footerLen)
	if _, err := f.ReadAt(foot, size-int64(footerLen)); err != nil {
		return t, err
	}
	if string(foot[4:]) != magic {
		return corrupt("bad magic")
	}
	n := int64(binary.BigEndian.Uint32(foot))
	if n > maxTrailer || n > size-int64(footerLen) {
		return corrupt("bad trailer length")
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, size-int64(footerLen)-n); err != nil {
		return t, err
	}
	if err := json.Unmarshal(buf, &t); err != nil {
		return corrupt(err.Error())
	}
	if t.Size != size-int64(footerLen)-n {
		return corrupt(fmt.Sprintf("body is %d bytes, trailer says %d", size-int64(footerLen)-n, t.Size))
	}
	return t, nil
}
