package commit

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// checkFence refuses a commit whose token is below the one its lease has in
// cur, or a commit without a token where cur takes fenced writers only.
func checkFence(cur *pointer.Pointer, token uint64, lease string) error {
	switch {
	case cur.Admits(token, lease):
		return nil
	case token == 0:
		return &FencedError{}
	}
	return &FencedError{Lease: lease, Mine: token, Committed: cur.FenceOf(lease)}
}

// RegisterFence records token as the highest token of the lease with this
// identity in the pointer, with a compare-and-swap that changes nothing
// else. Call it right after acquiring a lease and before staging: from then
// on a commit carrying a lower token of that lease is refused, so a former
// holder that was paused past its TTL cannot commit after the new holder
// started. A token already registered costs one pointer GET; a new one a
// GET and a PUT.
//
// It returns a *FencedError (ErrFenced) if the lease already has a higher
// token, and nil without writing if the dataset has no commits yet: there
// is no pointer to register in, and the first commit is a create-if-absent
// that carries the token itself.
func (d *Dataset) RegisterFence(ctx context.Context, lease string, token uint64) error {
	if token == 0 {
		return fmt.Errorf("commit: register fence of lease %q: token 0 is not a fencing token", lease)
	}
	err := d.rewritePointer(ctx, "register fence", func(p *pointer.Pointer) (bool, error) {
		if have := p.FenceOf(lease); have >= token {
			if have > token {
				return false, &FencedError{Lease: lease, Mine: token, Committed: have}
			}
			return false, nil
		}
		if err := p.CheckFence(lease); err != nil {
			return false, err
		}
		p.RaiseFence(lease, token)
		return true, nil
	})
	if errors.Is(err, errNoPointer) {
		return nil
	}
	return err
}

// SetFencedOnly sets or clears the pointer's "fenced writers only" setting,
// with a compare-and-swap that changes nothing else. While it is set, a
// commit that carries no fencing token is refused with ErrFenced. It
// returns ErrNoCommits on a dataset without a pointer.
func (d *Dataset) SetFencedOnly(ctx context.Context, on bool) error {
	err := d.rewritePointer(ctx, "set fenced_only", func(p *pointer.Pointer) (bool, error) {
		if p.FencedOnly == on {
			return false, nil
		}
		p.FencedOnly = on
		return true, nil
	})
	if errors.Is(err, errNoPointer) {
		return ErrNoCommits
	}
	return err
}

// ForgetFence removes the fence of the lease with this identity from the
// pointer ("" is the unnamed lease), with a compare-and-swap that changes
// nothing else. It is the operator's way to make room when the pointer
// keeps pointer.MaxFences leases, or to drop the identity of a lease no
// longer used. It is the operator's call because it re-admits that lease's
// lower tokens: a former holder paused past its TTL could commit again, so
// forget only a lease that no writer holds or will wake up holding. It
// returns ErrNoCommits on a dataset without a pointer, and ErrNotFound if
// the pointer keeps no fence for the identity.
func (d *Dataset) ForgetFence(ctx context.Context, lease string) error {
	sent := false
	err := d.rewritePointer(ctx, "forget fence", func(p *pointer.Pointer) (bool, error) {
		if p.FenceOf(lease) == 0 {
			if sent {
				return false, nil // an earlier write of ours landed
			}
			return false, fmt.Errorf("%w: the pointer keeps no fence for lease %q", ErrNotFound, lease)
		}
		sent = true
		if lease == "" {
			p.Fence = 0
			return true, nil
		}
		p.Fences = maps.Clone(p.Fences)
		delete(p.Fences, lease)
		if len(p.Fences) == 0 {
			p.Fences = nil
		}
		return true, nil
	})
	if errors.Is(err, errNoPointer) {
		return ErrNoCommits
	}
	return err
}

// errNoPointer tells rewritePointer's callers that there was no pointer to
// rewrite.
var errNoPointer = errors.New("no pointer")

// rewritePointer applies change to the current pointer and writes it back
// with a compare-and-swap, keeping seq, generation and the commit time:
// it is not a commit. change reports whether it changed anything; if not,
// nothing is written. A lost race or an ambiguous write is settled by
// reading the pointer back and applying change again, a bounded number of
// times. A missing pointer returns errNoPointer.
func (d *Dataset) rewritePointer(ctx context.Context, what string, change func(*pointer.Pointer) (bool, error)) error {
	var werr error
	for attempt := 0; attempt <= maxCASRetries; attempt++ {
		var p *pointer.Pointer
		var attrs store.Attrs
		err := retryRead(ctx, d.retry, func() (err error) {
			p, attrs, err = pointer.Read(ctx, d.s)
			return err
		})
		switch {
		case errors.Is(err, store.ErrNotExist) && werr == nil:
			return errNoPointer
		case err != nil && werr != nil:
			return fmt.Errorf("commit: %s: writing %s: %v; reading it back: %w", what, pointer.Key, werr, err)
		case err != nil:
			return fmt.Errorf("commit: %s: %w", what, err)
		}
		next := *p
		changed, err := change(&next)
		if err != nil || !changed {
			return err
		}
		next.GCCommittedAt = p.CommittedAtServer(attrs.LastModified)
		if err := pointer.Fits(&next); err != nil {
			return fmt.Errorf("commit: %s: refused before sending the pointer: %w", what, err)
		}
		if _, werr = pointer.Write(ctx, d.s, &next, attrs.ETag); werr == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("commit: %s: %w", what, werr)
		}
		// Lost the race, or the write may have landed: the next round reads
		// the pointer back, and change finds nothing left to do if it did.
		if errors.Is(werr, store.ErrConflict) {
			if err := ctxtime.Sleep(ctx, d.retry.Backoff(attempt)); err != nil {
				return fmt.Errorf("commit: %s: %w", what, werr)
			}
		}
	}
	return fmt.Errorf("commit: %s: the pointer kept changing: %w", what, werr)
}
