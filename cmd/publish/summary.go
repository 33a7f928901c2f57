package main

import (
	"fmt"
	"io"
	"time"
)

// summary is the final line of a transfer command (put, get, sync,
// verify), like rclone's closing stats: how many files and bytes moved,
// how many were reused or left as they were, and how long it took. --json
// carries the same numbers under "summary".
type summary struct {
	// Files is the number of files the command dealt with in all.
	Files int `json:"files"`
	// Transferred and TransferredBytes count what crossed the network:
	// files uploaded by put, downloaded by get and sync, read by verify.
	Transferred      int   `json:"transferred_files"`
	TransferredBytes int64 `json:"transferred_bytes"`
	// Reused counts files put referenced from the base generation instead
	// of uploading them, and files sync found already right on disk.
	Reused      int   `json:"reused_files"`
	ReusedBytes int64 `json:"reused_bytes"`
	// Resumed counts files put referenced from what an interrupted put
	// staged.
	Resumed      int   `json:"resumed_files,omitempty"`
	ResumedBytes int64 `json:"resumed_bytes,omitempty"`
	// Deleted counts files sync removed from DEST.
	Deleted        int     `json:"deleted_files,omitempty"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// BytesPerSecond is TransferredBytes over the elapsed time.
	BytesPerSecond float64 `json:"bytes_per_second"`

	verb   string // "uploaded", "downloaded", "read"
	kept   string // what Reused means in the line: "reused", "unchanged"
	gone   string // what Deleted means in the line: "deleted", "removed"
	prefix string // the command's name
	// dryRun says what would be done ("1 would be uploaded"), and no rate.
	dryRun bool
}

func newSummary(cmd, verb, kept string) *summary {
	return &summary{verb: verb, kept: kept, gone: "deleted", prefix: cmd}
}

// finish sets the times from start.
func (s *summary) finish(start time.Time) {
	el := time.Since(start)
	s.ElapsedSeconds = el.Seconds()
	if el > 0 {
		s.BytesPerSecond = float64(s.TransferredBytes) / el.Seconds()
	}
}

// write prints the line, e.g. "put: 31 files: 3 uploaded (12.0 MiB), 28
// reused (1.1 GiB); 2.1s, 5.7 MiB/s", or for a dry run "put: 31 files: 3
// would be uploaded (12.0 MiB), 28 would be reused (1.1 GiB), 1 would be
// removed; 40ms, nothing written".
func (s *summary) write(w io.Writer) {
	done := func(word string) string {
		if s.dryRun {
			return "would be " + word
		}
		return word
	}
	line := fmt.Sprintf("%s: %s: %d %s (%s)", s.prefix, plural(s.Files, "file"), s.Transferred, done(s.verb), humanBytes(s.TransferredBytes))
	if s.kept != "" {
		line += fmt.Sprintf(", %d %s (%s)", s.Reused, done(s.kept), humanBytes(s.ReusedBytes))
	}
	if s.Resumed > 0 {
		line += fmt.Sprintf(", %d resumed (%s)", s.Resumed, humanBytes(s.ResumedBytes))
	}
	if s.Deleted > 0 {
		line += fmt.Sprintf(", %d %s", s.Deleted, done(s.gone))
	}
	el := time.Duration(s.ElapsedSeconds * float64(time.Second))
	if s.dryRun {
		line += fmt.Sprintf("; %s, nothing written", roundElapsed(el))
	} else {
		line += fmt.Sprintf("; %s, %s/s", roundElapsed(el), humanBytes(int64(s.BytesPerSecond)))
	}
	fmt.Fprintln(w, line)
}

// roundElapsed keeps two significant places: 840ms, 2.1s, 1m3s.
func roundElapsed(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	default:
		return d.Round(time.Millisecond)
	}
}

// plural counts a thing: "1 file", "3 files". Every count printed for
// people goes through it.
func plural[N int | int64](n N, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
