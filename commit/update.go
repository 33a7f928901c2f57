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
// each write carries a fresh write id in its metadata. If the object is
// unchanged, the write did not land and is retried; if it carries our id,
// it landed, and likewise if the version there names ours as its parent
// (another writer built on our write). A refused write (412 or 409) with
// someone else's version there is a loss and is retried. Any other
// failure returns ErrCommitUnknown, because our write may have landed and
// been overwritten since.
func UpdateObject(ctx context.Context, s store.Store, key string, retry Retry, fn func(old []byte, exists bool) ([]byte, error)) (store.Attrs, error) {
	var last error
	for attempt := 0; attempt < max(retry.Attempts, 1); attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, retry.backoff(attempt-1)); err != nil {
				return store.Attrs{}, err
			}
		}
		old, etag, oldID, err := readObject(ctx, s, key)
		if err != nil {
			return store.Attrs{}, err
		}
		body, err := fn(old, etag != "")
		if err != nil {
			return store.Attrs{}, err
		}
		id := uuid.NewString()
		attrs, err := s.Put(ctx, key, bytes.NewReader(body), store.PutOptions{
			IfMatch: etag, IfNoneMatch: etag == "", Size: int64(len(body)),
			Metadata: map[string]string{writeIDMeta: id, parentIDMeta: oldID},
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
		case herr == nil && now.Metadata[writeIDMeta] == id:
			return now, nil // our write landed; the error was about the response
		case herr == nil && now.Metadata[parentIDMeta] == id:
			return now, nil // our write landed and another was built on it
		case herr == nil && now.ETag == etag:
			// unchanged: our write did not land
		case herr != nil && etag == "":
			// still absent: our create did not land
		case herr == nil && (errors.Is(err, store.ErrPrecondition) || errors.Is(err, store.ErrConflict)):
			// A clean loss: the store refused our write, and someone
			// else's version is there.
		default:
			return store.Attrs{}, fmt.Errorf("%w: update %q: %v (read back: %v)", ErrCommitUnknown, key, err, herr)
		}
	}
	return store.Attrs{}, fmt.Errorf("commit: update %q gave up after %d attempts: %w", key, retry.Attempts, last)
}

// readObject returns the body, ETag and write id of key, or an empty ETag
// if it is absent.
func readObject(ctx context.Context, s store.Store, key string) (body []byte, etag, writeID string, err error) {
	rc, attrs, err := s.Get(ctx, key)
	if errors.Is(err, store.ErrNotExist) {
		return nil, "", "", nil
	}
	if err != nil {
		return nil, "", "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, MaxObjectSize+1))
	if err != nil {
		return nil, "", "", fmt.Errorf("commit: read %q: %w", key, err)
	}
	if len(b) > MaxObjectSize {
		return nil, "", "", fmt.Errorf("commit: %q is larger than %d bytes", key, MaxObjectSize)
	}
	return b, attrs.ETag, attrs.Metadata[writeIDMeta], nil
}
