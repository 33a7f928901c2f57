package commit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// Retry is a bounded, jittered exponential backoff policy.
type Retry struct {
	// Attempts is the most tries, the first included.
	Attempts int
	// Base is the first backoff; each retry doubles it, up to Max. The
	// actual sleep is uniformly random in [0, backoff) ("full jitter"),
	// which spreads contending writers apart.
	Base, Max time.Duration
}

// DefaultRetry is 10 attempts, backing off from 20 ms up to 2 s.
var DefaultRetry = Retry{Attempts: 10, Base: 20 * time.Millisecond, Max: 2 * time.Second}

func (r Retry) backoff(attempt int) time.Duration {
	d := r.Base << min(attempt, 30)
	if d <= 0 || d > r.Max {
		d = r.Max
	}
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

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
			if err := ctxtime.Sleep(ctx, d.retry.backoff(attempt-1)); err != nil {
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

// MaxObjectSize caps the body UpdateObject reads.
const MaxObjectSize = 64 << 20

// UpdateObject's metadata: lineageMeta holds the write ids of the last
// lineageDepth versions of the object, newest (its own) first,
// comma-separated; originMeta the id of the write that created the object.
const (
	lineageMeta  = "commitptr-lineage"
	originMeta   = "commitptr-origin"
	lineageDepth = 40
)

func lineage(a store.Attrs) []string {
	v := a.Metadata[lineageMeta]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// UpdateObject runs a read-modify-write of one shared object: it reads the
// body and ETag (exists is false when the object is absent), calls fn, and
// writes the result with If-Match, or If-None-Match when the object was
// absent. On a lost race it backs off with jitter and runs fn again, up to
// retry.Attempts. fn must be safe to re-run.
//
// Each write carries a fresh write id and, in its metadata, the lineage of
// the last 40 versions' ids and the id of the write that created the
// object. A failed write is settled by reading the
// object back: if the version there has any id this call sent in its
// lineage, fn's result was applied (this also catches a write that lands
// late, after the call already retried). If the object is unchanged, the
// write has not landed yet but still may; if its lineage reaches back to
// the version the write was conditioned on without passing through ours,
// the write can never land. Anything else, including a failed read-back,
// returns ErrCommitUnknown: the write may have landed.
//
// A write that is neither proven landed nor proven dead stays open. While
// one is open, every failure (the context ending, fn failing on a re-run,
// the attempts running out) returns ErrCommitUnknown, wrapping the cause:
// the write may still land.
func UpdateObject(ctx context.Context, s store.Store, key string, retry Retry, fn func(old []byte, exists bool) ([]byte, error)) (store.Attrs, error) {
	var last error
	// sent holds the write id of every PUT this call has sent; any of them
	// may land, even after the call has moved on.
	sent := map[string]bool{}
	ours := func(a store.Attrs) bool {
		if sent[a.Metadata[originMeta]] {
			return true
		}
		for _, id := range lineage(a) {
			if sent[id] {
				return true
			}
		}
		return false
	}
	// open holds, by write id, the version each write not yet proven
	// landed or dead was conditioned on.
	open := map[string]store.Attrs{}
	// settle drops the writes that the version now, not ours, proves dead:
	// it replaced the version they were conditioned on.
	settle := func(now store.Attrs) {
		for id, base := range open {
			if now.ETag != base.ETag && descendsWithoutUs(now, lineage(base), base.ETag == "") {
				delete(open, id)
			}
		}
	}
	// fail returns err, as ErrCommitUnknown while a write is open.
	fail := func(err error) (store.Attrs, error) {
		if len(open) > 0 {
			return store.Attrs{}, fmt.Errorf("%w: update %q: a write this call sent is not settled and may still land; then: %w", ErrCommitUnknown, key, err)
		}
		return store.Attrs{}, err
	}
	for attempt := 0; attempt < max(retry.Attempts, 1); attempt++ {
		if attempt > 0 {
			if err := ctxtime.Sleep(ctx, retry.backoff(attempt-1)); err != nil {
				return fail(err)
			}
		}
		old, cur, err := readObject(ctx, s, key)
		if err != nil {
			return fail(err)
		}
		if cur.ETag != "" {
			if ours(cur) {
				return cur, nil // an earlier attempt landed after all
			}
			settle(cur)
		}
		body, err := fn(old, cur.ETag != "")
		if err != nil {
			return fail(err)
		}
		id := uuid.NewString()
		sent[id] = true
		open[id] = cur
		lin := append([]string{id}, lineage(cur)...)
		origin := cur.Metadata[originMeta]
		if cur.ETag == "" {
			origin = id
		}
		attrs, err := s.Put(ctx, key, bytes.NewReader(body), store.PutOptions{
			IfMatch: cur.ETag, IfNoneMatch: cur.ETag == "", Size: int64(len(body)),
			Metadata: map[string]string{
				lineageMeta: strings.Join(lin[:min(len(lin), lineageDepth)], ","),
				originMeta:  origin,
			},
		})
		if err == nil {
			return attrs, nil
		}
		last = err
		// Whatever the error, even a 412 (an SDK retry may have met our
		// own write), the write may have landed: read back.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
		var now store.Attrs
		herr := retryRead(rctx, retry, func() (err error) {
			now, err = s.Head(rctx, key)
			return err
		})
		cancel()
		absent := errors.Is(herr, store.ErrNotExist)
		if !absent && herr == nil {
			if ours(now) {
				return now, nil // landed, possibly with other writes built on it
			}
			settle(now)
		}
		_, pending := open[id]
		switch {
		case herr != nil && !absent:
			return store.Attrs{}, fmt.Errorf("%w: update %q: %v (read back: %v)", ErrCommitUnknown, key, err, herr)
		case !pending:
			// A clean loss: the versions since the one we read are all
			// someone else's.
		case absent && cur.ETag == "", !absent && now.ETag == cur.ETag:
			// Unchanged: our write has not landed, but it still may; it
			// stays open.
		default:
			return store.Attrs{}, fmt.Errorf("%w: update %q: %v (read back: %v)", ErrCommitUnknown, key, err, herr)
		}
	}
	return fail(fmt.Errorf("commit: update %q gave up after %d attempts: %w", key, retry.Attempts, last))
}

// descendsWithoutUs reports whether the version now provably follows the
// version read (whose lineage is base; absent when the object did not
// exist) through writes that are all someone else's, so that our write,
// conditioned on the version read, can never land. The caller has checked
// that none of our ids is in now's lineage or origin.
func descendsWithoutUs(now store.Attrs, base []string, absent bool) bool {
	if absent {
		// Our create would have been the origin.
		return now.Metadata[originMeta] != ""
	}
	if len(base) == 0 {
		return false // the version read carried no id: no proof
	}
	return slices.Contains(lineage(now), base[0])
}

// readObject returns the body and attributes of key; the attributes
// ETag is empty if the object is absent.
func readObject(ctx context.Context, s store.Store, key string) ([]byte, store.Attrs, error) {
	rc, attrs, err := s.Get(ctx, key)
	if errors.Is(err, store.ErrNotExist) {
		return nil, store.Attrs{}, nil
	}
	if err != nil {
		return nil, store.Attrs{}, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, MaxObjectSize+1))
	if err != nil {
		return nil, store.Attrs{}, fmt.Errorf("commit: read %q: %w", key, err)
	}
	if len(b) > MaxObjectSize {
		return nil, store.Attrs{}, fmt.Errorf("commit: %q is larger than %d bytes", key, MaxObjectSize)
	}
	return b, attrs, nil
}
