package commit

import (
	"fmt"
	"strings"
	"time"

	"github.com/commitptr/commitptr/generation"
)

// Resume offers PutFile the entries an earlier, unfinished Tx staged (a
// put that was interrupted before it committed): a file that does not
// match the base generation, but whose path, size and sha256 match one of
// these entries, references that entry's object instead of uploading it
// again. Like a reuse of the base, the object is proven present with a
// plausible size before the commit, and the file is uploaded again if it
// is not (see VerifyReferences).
//
// The objects are orphans until this Tx commits, so the collector may
// delete them. The proof also reads each object's Last-Modified, a time
// of the store's clock, and moves the Tx's staging start back to it:
// then the collector's horizon guards it as it guards the Tx's own
// objects (the commit is refused with ErrStale once the horizon reaches
// it). An object that the base pointer's horizon has passed already, or
// whose time the store does not report, is uploaded again instead; so is
// one whose generation wrote its manifest: it may have been committed (a
// put whose pointer write had an unknown outcome), and the collector
// deletes a committed generation's objects without moving the horizon.
//
// Each entry's key must be a data key of a generation other than this
// Tx's, and its path a valid one; entries come from Entries of that Tx.
// A later entry for a path replaces an earlier one.
func (tx *Tx) Resume(entries []generation.Entry) error {
	own := generation.Prefix(tx.gen)
	for _, e := range entries {
		if err := generation.CheckPath(e.Path); err != nil {
			return fmt.Errorf("commit: resume %q: %w", e.Path, err)
		}
		g := generation.FromKey(e.Key)
		if g == "" || strings.HasPrefix(e.Key, own) || e.Key == generation.ManifestKey(g) {
			return fmt.Errorf("commit: resume %q: key %q is not a data key of another generation", e.Path, e.Key)
		}
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if err := tx.checkOpen(); err != nil {
		return err
	}
	if tx.refs.resume == nil {
		tx.refs.resume = map[string]generation.Entry{}
	}
	for _, e := range entries {
		tx.refs.resume[e.Path] = e
	}
	return nil
}

// resumable returns the entry Resume offered for path, if any.
func (tx *Tx) resumable(path string) (generation.Entry, bool) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	e, ok := tx.refs.resume[path]
	return e, ok
}

// Resumed returns how many files reference an object that Resume offered
// instead of being uploaded. A file uploaded again because that object
// was unusable is not counted.
func (tx *Tx) Resumed() int {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.resumed
}

// Resumes reports whether the file at path references an object that
// Resume offered (see Resumed).
func (tx *Tx) Resumes(path string) bool {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	r, ok := tx.refs.local[path]
	return ok && r.resumed
}

// Entry returns the entry staged or referenced at path, if any.
func (tx *Tx) Entry(path string) (generation.Entry, bool) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	e, ok := tx.entries[path]
	return e, ok
}

// resumedStart returns the staging start that covers a resumed object
// stored at modified, or why the object cannot be resumed: its time is
// unknown, or the horizon of the base pointer has reached it already (the
// collector takes an object modified at its horizon for an orphan's).
func resumedStart(modified, horizon time.Time) (time.Time, string) {
	if modified.IsZero() {
		return time.Time{}, "has no modification time"
	}
	start := modified.UTC()
	if !horizon.IsZero() && !horizon.Before(start) {
		return time.Time{}, fmt.Sprintf("was staged at %s, before the collector's horizon %s", start.Format(time.RFC3339), horizon.UTC().Format(time.RFC3339))
	}
	return start, ""
}
