package commit

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/commitptr/commitptr/generation"
)

// ErrStageOnly is what Commit returns on a Tx of Dataset.Stage.
var ErrStageOnly = errors.New("commit: a staging-only transaction cannot commit; another transaction adopts its entries")

// Stage starts a Tx that only stages: Put, PutFile and PutBytes write
// under a fresh generation, Entries returns what they staged, and Discard
// deletes it. It reads no pointer and never commits (Commit returns
// ErrStageOnly), so its objects are published only by a Tx that adopts its
// entries (Adopt). A task of a job stages its files with it.
func (d *Dataset) Stage() (*Tx, error) {
	tx, err := d.newTx()
	if err != nil {
		return nil, err
	}
	close(tx.ready) // it has no base
	tx.noRebase, tx.stageOnly = true, true
	return tx, nil
}

// Adopt puts entries that staging-only transactions wrote (see Stage) into
// this generation by reference, replacing what was staged at the same
// paths, and moves the Tx's staging start back to start when start is
// earlier.
//
// start must precede, in the store's clock, every object the entries
// reference: a job's staging start, the Last-Modified of its record, which
// its tasks read before they stage. Then the collector's horizon guards
// these objects exactly as it guards the Tx's own (the commit is refused
// with ErrStale once the horizon reaches start), so they are not proven
// present again before the manifest: the collector deletes an orphan only
// after publishing a horizon past its newest object. Each entry's key must
// be a data key under a generation other than this Tx's, and its path a
// valid one.
func (tx *Tx) Adopt(start time.Time, entries []generation.Entry) error {
	own := generation.Prefix(tx.gen)
	for _, e := range entries {
		if err := generation.CheckPath(e.Path); err != nil {
			return fmt.Errorf("commit: adopt %q: %w", e.Path, err)
		}
		g := generation.FromKey(e.Key)
		if g == "" || strings.HasPrefix(e.Key, own) || e.Key == generation.ManifestKey(g) {
			return fmt.Errorf("commit: adopt %q: key %q is not a data key of another generation", e.Path, e.Key)
		}
	}
	if start.IsZero() {
		return fmt.Errorf("commit: adopt: no staging start")
	}
	<-tx.ready
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if err := tx.checkOpen(); err != nil {
		return err
	}
	if tx.stageOnly {
		return ErrStageOnly
	}
	if start.Before(tx.stagingStart) {
		tx.stagingStart = start.UTC()
	}
	if tx.refs.verified == nil {
		tx.refs.verified = map[string]bool{}
	}
	for _, e := range entries {
		tx.entries[e.Path] = e
		tx.touch(e.Path)
		tx.refs.verified[e.Key] = true
	}
	return nil
}
