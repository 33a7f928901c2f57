package localfile

import (
	"io/fs"
	"syscall"
	"time"
)

// changeTime returns the status change time (ctime) of fi.
func changeTime(fi fs.FileInfo) (time.Time, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(st.Ctimespec.Sec, st.Ctimespec.Nsec), true
}
