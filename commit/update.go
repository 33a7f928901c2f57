package commit

import (
	"context"
	"errors"
	"fmt"

	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/object"
	"github.com/commitptr/commitptr/pointer"
)

// Retry is object.Retry, a bounded, jittered exponential backoff policy:
// that of Update, of fence registration, and of the read-backs that settle
// a commit's outcome.
type Retry = object.Retry

// DefaultRetry is 10 attempts, backing off from 20 ms up to 2 s.
var DefaultRetry = object.DefaultRetry

// Update runs a read-modify-write of the whole dataset: it begins a Tx on
// the current generation with every file kept (KeepAll), runs fn, and
// commits. When another writer wins, or the collector's horizon makes the
// generation stale, it backs off and runs fn again on the new current
// generation, up to the dataset's retry bound.
//
// fn may run more than once and must be safe to re-run: it should derive
// its changes from tx.BaseSnapshot only. If fn returns an error, the Tx is
// discarded and Update returns that error. fn's Tx does not rebase: a
// conflict on any path means fn runs again (EnableRebase returns
// ErrUpdateNoRebase).
func (d *Dataset) Update(ctx context.Context, opts CommitOptions, fn func(ctx context.Context, tx *Tx) error) (*pointer.Pointer, error) {
	var last error
	for attempt := 0; attempt < max(d.retry.Attempts, 1); attempt++ {
		if attempt > 0 {
			if err := ctxtime.Sleep(ctx, d.retry.Backoff(attempt-1)); err != nil {
				return nil, err
			}
		}
		tx, err := d.Begin(ctx)
		if err != nil {
			return nil, err
		}
		if err := tx.KeepAll(ctx); err != nil {
			tx.discardQuietly(ctx)
			return nil, err
		}
		tx.mu.Lock()
		tx.noRebase = true
		tx.mu.Unlock()
		if err := fn(ctx, tx); err != nil {
			tx.discardQuietly(ctx)
			return nil, err
		}
		p, err := tx.Commit(ctx, opts)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, ErrConflict) && !errors.Is(err, ErrStale) {
			return nil, err
		}
		d.log.Debug("update lost, retrying", "attempt", attempt+1, "error", err)
		last = err
	}
	return nil, fmt.Errorf("commit: update gave up after %d attempts: %w", d.retry.Attempts, last)
}
