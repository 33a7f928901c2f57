package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/commitptr/commitptr/generation"
)

// A journal records, on the local disk, what a put has staged: one JSON
// line per file, after a header naming the dataset and the source. When
// a put is interrupted or fails before its commit, the staged objects stay
// in the store and the journal stays on disk; the next put of the same
// source to the same dataset, with the same object settings, offers them
// to its Tx (commit.Tx.Resume), which references each one whose file
// still matches instead of uploading it again. A put that commits, or
// whose staged objects were deleted, removes its journal.
//
// Journals live under the user's cache directory (publish/resume below
// $XDG_CACHE_HOME or ~/.cache on Linux), one file per dataset, source,
// --into prefix and object settings, named by their hash. A put holds its
// journal locked; a second put of the same source to the same dataset at
// once runs without one.
type journal struct {
	path string

	mu   sync.Mutex
	f    *os.File
	n    int // entries this put recorded
	errs error
	// keys maps each path the journal names, recorded by this put or an
	// earlier one, to its object's key.
	keys map[string]string
}

// journalHeader is a journal's first line.
type journalHeader struct {
	Format  int    `json:"format"`
	Dataset string `json:"dataset"` // redacted
	Source  string `json:"source"`
	Into    string `json:"into,omitempty"`
}

const journalFormat = 1

// journalDir is where journals live.
func journalDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "publish", "resume"), nil
}

// journalName names the journal of a put of src to the dataset at url:
// the hash of the dataset's URL, the absolute source path, the --into
// prefix, and settings (what the objects written depend on, such as the
// encryption; a secret in it is hashed, never stored).
func journalName(url, src, into string, settings []string) string {
	h := sha256.New()
	for _, s := range append([]string{url, src, into}, settings...) {
		fmt.Fprintf(h, "%d:%s\n", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))[:32] + ".jsonl"
}

// errJournalBusy says that another put holds the journal.
var errJournalBusy = errors.New("another put of the same source to the same dataset holds its journal")

// openJournal opens, creating it if need be, and locks the journal at
// path, and returns the entries it holds: for each path, the one recorded
// last. A journal of another header, or one that cannot be read, is
// started again. New entries are appended.
func openJournal(path string, h journalHeader) (*journal, []generation.Entry, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	entries, keep := parseJournal(data, h)
	if err := f.Truncate(int64(keep)); err != nil {
		f.Close()
		return nil, nil, err
	}
	if _, err := f.Seek(int64(keep), io.SeekStart); err != nil {
		f.Close()
		return nil, nil, err
	}
	j := &journal{path: path, f: f, keys: map[string]string{}}
	for _, e := range entries {
		j.keys[e.Path] = e.Key
	}
	if keep == 0 {
		if err := j.writeLine(h); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	return j, entries, nil
}

// parseJournal returns the entries of a journal's content whose header is
// h, the last one for each path, and how many bytes of it to keep: up to
// the end of its last whole line, or 0 to start it again.
func parseJournal(data []byte, want journalHeader) ([]generation.Entry, int) {
	keep := bytes.LastIndexByte(data, '\n') + 1 // a line cut short is dropped
	sc := bufio.NewScanner(bytes.NewReader(data[:keep]))
	sc.Buffer(nil, 1<<20)
	if !sc.Scan() {
		return nil, 0
	}
	var h journalHeader
	if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h != want {
		return nil, 0
	}
	last := map[string]int{}
	var entries []generation.Entry
	for sc.Scan() {
		var e generation.Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Path == "" || e.Key == "" {
			return nil, 0
		}
		if i, ok := last[e.Path]; ok {
			entries[i] = e
			continue
		}
		last[e.Path] = len(entries)
		entries = append(entries, e)
	}
	if sc.Err() != nil {
		return nil, 0
	}
	return entries, keep
}

// writeLine appends v as one line.
func (j *journal) writeLine(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = j.f.Write(append(b, '\n'))
	return err
}

// record appends e. A journal that cannot be written only costs the next
// put's resume; the first error is kept for finish. A nil journal records
// nothing.
func (j *journal) record(e generation.Entry) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.errs != nil || j.f == nil {
		return
	}
	if err := j.writeLine(e); err != nil {
		j.errs = err
		return
	}
	j.n++
	j.keys[e.Path] = e.Key
}

// held returns how many files the journal names, recorded by this put or
// an earlier one, and the generation directories their objects are in.
func (j *journal) held() (int, []string) {
	if j == nil {
		return 0, nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	dirs := map[string]bool{}
	for _, k := range j.keys {
		dirs[generation.Prefix(generation.FromKey(k))] = true
	}
	return len(j.keys), slices.Sorted(maps.Keys(dirs))
}

// recorded returns how many entries this put recorded.
func (j *journal) recorded() int {
	if j == nil {
		return 0
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.n
}

// finish closes the journal, keeping it for the next put (keep), or
// removing it: what it recorded was committed, or deleted. It returns the
// first error of a write or of the removal. Only the first call counts;
// a nil journal does nothing.
func (j *journal) finish(keep bool) error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	var err error
	if !keep {
		if err = os.Remove(j.path); errors.Is(err, os.ErrNotExist) {
			err = nil
		}
	}
	err = errors.Join(j.errs, err, j.f.Close())
	j.f = nil
	return err
}
