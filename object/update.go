package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/store"
)

// MaxSize caps the body Update reads.
const MaxSize = 64 << 20

// ErrUnknown: a write that Update sent may have landed, or may still land,
// and no version read back proved it either way.
var ErrUnknown = errors.New("object: outcome unknown")

// resolveTimeout bounds the read-back that settles a failed write. It runs
// even after the caller's context is cancelled: walking away without
// knowing the outcome would leave it unknown.
const resolveTimeout = 30 * time.Second

// Update's metadata: lineageMeta holds the write ids of the last
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

// Update runs a read-modify-write of one shared object: it reads the
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
// returns ErrUnknown: the write may have landed.
//
// A write that is neither proven landed nor proven dead stays open. While
// one is open, every failure (the context ending, fn failing on a re-run,
// the attempts running out) returns ErrUnknown, wrapping the cause:
// the write may still land.
func Update(ctx context.Context, s store.Store, key string, retry Retry, fn func(old []byte, exists bool) ([]byte, error)) (store.Attrs, error) {
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
	// fail returns err, as ErrUnknown while a write is open.
	fail := func(err error) (store.Attrs, error) {
		if len(open) > 0 {
			return store.Attrs{}, fmt.Errorf("%w: update %q: a write this call sent is not settled and may still land; then: %w", ErrUnknown, key, err)
		}
		return store.Attrs{}, err
	}
	for attempt := 0; attempt < max(retry.Attempts, 1); attempt++ {
		if attempt > 0 {
			if err := ctxtime.Sleep(ctx, retry.Backoff(attempt-1)); err != nil {
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
		herr := retry.ReadBack(rctx, func() (err error) {
			now, err = s.Head(rctx, key)
			return err
		}, nil)
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
			return store.Attrs{}, fmt.Errorf("%w: update %q: %v (read back: %v)", ErrUnknown, key, err, herr)
		case !pending:
			// A clean loss: the versions since the one we read are all
			// someone else's.
		case absent && cur.ETag == "", !absent && now.ETag == cur.ETag:
			// Unchanged: our write has not landed, but it still may; it
			// stays open.
		default:
			return store.Attrs{}, fmt.Errorf("%w: update %q: %v (read back: %v)", ErrUnknown, key, err, herr)
		}
	}
	return fail(fmt.Errorf("object: update %q gave up after %d attempts: %w", key, retry.Attempts, last))
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
	b, err := io.ReadAll(io.LimitReader(rc, MaxSize+1))
	if err != nil {
		return nil, store.Attrs{}, fmt.Errorf("object: read %q: %w", key, err)
	}
	if len(b) > MaxSize {
		return nil, store.Attrs{}, fmt.Errorf("object: %q is larger than %d bytes", key, MaxSize)
	}
	return b, attrs, nil
}
