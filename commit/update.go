package commit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

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

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Update runs a read-modify-write of the whole dataset: it begins a Tx on
// the current generation with every file kept (KeepAll), runs fn, and
// commits. When another writer wins, or the collector's horizon makes the
// generation stale, it backs off and runs fn again on the new current
// generation, up to the dataset's retry bound.
//
// fn may run more than once and must be safe to re-run: it should derive
// its changes from tx.BaseSnapshot only. If fn returns an error, the Tx is
// discarded and Update returns that error.
func (d *Dataset) Update(ctx context.Context, opts CommitOptions, fn func(ctx context.Context, tx *Tx) error) (*pointer.Pointer, error) {
	var last error
	for attempt := 0; attempt < max(d.retry.Attempts, 1); attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, d.retry.backoff(attempt-1)); err != nil {
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

// The metadata keys that carry UpdateObject's write id and that of the
// version it replaced.
const (
	writeIDMeta  = "commitptr-write-id"
	parentIDMeta = "commitptr-parent-write-id"
)

// UpdateObject runs a read-modify-write of one shared object: it reads the
// body and ETag (exists is false when the object is absent), calls fn, and
// writes the result with If-Match, or If-None-Match when the object was
// absent. On a lost race it backs off with jitter and runs fn again, up to
// retry.Attempts. fn must be safe to re-run.
//
// A write with an ambiguous outcome is resolved by reading the object back:
// each write carries a fresh write id in its metadata, and the id of the
// version it replaced. If the version there carries, or names as its
// parent, any id this call has sent, fn's result was applied; this also
// catches a write that lands late, after the call already retried. If the
// object is unchanged, the write did not land (yet) and is retried. A refused write (412 or 409) with
// someone else's version there is a loss and is retried. Any other
// failure returns ErrCommitUnknown, because our write may have landed and
// been overwritten since.
func UpdateObject(ctx context.Context, s store.Store, key string, retry Retry, fn func(old []byte, exists bool) ([]byte, error)) (store.Attrs, error) {
	var last error
	// sent holds the write id of every PUT this call has sent. A PUT that
	// failed may still land later, so any version that carries one of
	// these ids, or names one as its parent, proves that fn's result was
	// applied, and fn must not run again.
	sent := map[string]bool{}
	ours := func(a store.Attrs) bool {
		return sent[a.Metadata[writeIDMeta]] || sent[a.Metadata[parentIDMeta]]
	}
	for attempt := 0; attempt < max(retry.Attempts, 1); attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, retry.backoff(attempt-1)); err != nil {
				return store.Attrs{}, err
			}
		}
		old, cur, err := readObject(ctx, s, key)
		if err != nil {
			return store.Attrs{}, err
		}
		if cur.ETag != "" && ours(cur) {
			return cur, nil // an earlier attempt landed after all
		}
		body, err := fn(old, cur.ETag != "")
		if err != nil {
			return store.Attrs{}, err
		}
		id := uuid.NewString()
		sent[id] = true
		attrs, err := s.Put(ctx, key, bytes.NewReader(body), store.PutOptions{
			IfMatch: cur.ETag, IfNoneMatch: cur.ETag == "", Size: int64(len(body)),
			Metadata: map[string]string{writeIDMeta: id, parentIDMeta: cur.Metadata[writeIDMeta]},
		})
		if err == nil {
			return attrs, nil
		}
		last = err
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
		now, herr := s.Head(rctx, key)
		cancel()
		switch {
		case herr != nil && !errors.Is(herr, store.ErrNotExist):
			// Without a read-back there is no telling, not even after a
			// 412: an SDK retry may have hit our own applied write.
			return store.Attrs{}, fmt.Errorf("%w: update %q: %v (read back: %v)", ErrCommitUnknown, key, err, herr)
		case herr == nil && ours(now):
			return now, nil // landed, possibly with another write built on it
		case herr == nil && now.ETag == cur.ETag:
			// unchanged: our write did not land (yet; see sent)
		case herr != nil && cur.ETag == "":
			// still absent: our create did not land (yet; see sent)
		case herr == nil && (errors.Is(err, store.ErrPrecondition) || errors.Is(err, store.ErrConflict)):
			// A clean loss: the store refused our write, and someone
			// else's version is there.
		default:
			return store.Attrs{}, fmt.Errorf("%w: update %q: %v (read back: %v)", ErrCommitUnknown, key, err, herr)
		}
	}
	return store.Attrs{}, fmt.Errorf("commit: update %q gave up after %d attempts: %w", key, retry.Attempts, last)
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
