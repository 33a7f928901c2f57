package portable

import (
	"fmt"
	"strconv"
	"strings"
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

// RangeSize reads the whole object's size from the Content-Range of a 206
// answer ("bytes 0-9/1234"); it returns -1 when the header does not say
// (missing, or an unknown length "/*").
func RangeSize(contentRange string) int64 {
	_, total, ok := strings.Cut(contentRange, "/")
	if !ok {
		return -1
	}
	size, err := strconv.ParseInt(strings.TrimSpace(total), 10, 64)
	if err != nil || size < 0 {
		return -1
	}
	return size
}
