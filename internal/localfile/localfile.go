// Package localfile tells whether a local file changed between two looks
// at it: its size, its modification time, or its status change time
// (ctime, which every write and every change of its attributes moves,
// even one that sets the modification time back).
//
// The times are as fine as the file system keeps them: two writes within
// one tick of its clock (a few milliseconds on some) may leave them equal.
package localfile

import (
	"fmt"
	"io/fs"
	"time"
)

// Changed says how the file changed from before to after, two looks at
// the same open file (os.File.Stat), or returns "" if nothing it can see
// changed.
func Changed(before, after fs.FileInfo) string {
	switch {
	case before.Size() != after.Size():
		return fmt.Sprintf("its size went from %d to %d bytes", before.Size(), after.Size())
	case !before.ModTime().Equal(after.ModTime()):
		return fmt.Sprintf("its modification time went from %s to %s", stamp(before.ModTime()), stamp(after.ModTime()))
	}
	b, okb := changeTime(before)
	a, oka := changeTime(after)
	if okb && oka && !b.Equal(a) {
		return fmt.Sprintf("its status change time went from %s to %s", stamp(b), stamp(a))
	}
	return ""
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
