package portable

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/commitptr/commitptr/store"
)

// CheckRange refuses a GetRange that no service may be sent: an offset
// below zero or a length below one.
func CheckRange(off, n int64) error {
	if off < 0 || n < 1 {
		return fmt.Errorf("bad range: offset %d, length %d (want offset >= 0, length >= 1)", off, n)
	}
	return nil
}

// RangeHeader is the HTTP Range of n bytes from off: its last byte is
// off+n-1.
func RangeHeader(off, n int64) string {
	return "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+n-1, 10)
}

// RangeOf checks the Content-Range of an answer to a GetRange of n bytes
// from off ("bytes 5-9/1234"), and returns the whole object's size, -1
// when the service does not know it ("/*"). An answer without one (a
// service that ignored the Range and sent the whole object), or of bytes
// that do not start at off or end past the range, is refused: its bytes
// are not the range's. One that says the object ends at or before off is
// store.ErrInvalidRange (Azurite answers so, with an empty body).
func RangeOf(contentRange string, off, n int64) (int64, error) {
	bad := func() (int64, error) {
		return -1, fmt.Errorf("the service answered a ranged GET of %d bytes from %d with Content-Range %q", n, off, contentRange)
	}
	spec, ok := strings.CutPrefix(strings.TrimSpace(contentRange), "bytes ")
	if !ok {
		return bad()
	}
	span, total, ok := strings.Cut(spec, "/")
	if !ok {
		return bad()
	}
	size := int64(-1)
	if total != "*" {
		var err error
		if size, err = strconv.ParseInt(total, 10, 64); err != nil || size < 0 {
			return bad()
		}
	}
	if size >= 0 && off >= size {
		return -1, Classify(store.ErrInvalidRange, fmt.Errorf("offset %d of an object of %d bytes", off, size))
	}
	first, last, ok := strings.Cut(span, "-")
	start, err1 := strconv.ParseInt(first, 10, 64)
	end, err2 := strconv.ParseInt(last, 10, 64)
	if !ok || err1 != nil || err2 != nil || start != off || end < start || end-off >= n {
		return bad()
	}
	if size >= 0 && size <= end {
		return bad()
	}
	return size, nil
}
