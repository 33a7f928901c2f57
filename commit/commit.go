package commit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/commitptr/commitptr/commit/internal/group"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// CommitOptions are the informational fields and the fencing token of a
// commit.
type CommitOptions struct {
	Message string
	Meta    map[string]string
	// Fence is the fencing token of the lease the writer holds, or 0.
	// FenceLease is that lease's identity (see LeaseIdentity); empty means
	// the unnamed lease, the single fence of older pointers. The commit is
	// refused if the same lease already committed or registered a higher
	// token, and it raises that lease's entry in the pointer to Fence.
	// Tokens of different leases are never compared. A commit with no
	// token is refused only where the pointer is set to fenced writers only.
	Fence      uint64
	FenceLease string
}

// maxCASRetries bounds how often Commit re-sends the pointer write after
// the pointer changed without a new commit (the collector moved its
// horizon) or the store reported a conflicting write in progress.
const maxCASRetries = 8

// Commit writes the manifest and swaps the pointer to this generation.
// First it proves that the objects the generation references from older
// ones exist (VerifyReferences): a missing one is uploaded again when
// PutFile has its local file, and fails the commit with ErrMissingObject
// otherwise.
//
// On success it returns the pointer as written: the value read back when
// the outcome had to be settled by a read (see landed; its WriteID is empty
// if others built on top and which of several writes landed cannot be
// told). A commit with rebase may instead be carried by another writer's
// (group commit, see Rebase): it then returns that commit's pointer value,
// whose Generation is not this Tx's, and CarriedBy names it. If another
// writer won, the staged objects are deleted (Leftover says what could not
// be) and the error is a *ConflictError. If the
// outcome cannot be proven, the error matches ErrCommitUnknown and nothing
// is deleted. A commit that references a generation below the collector's
// floor under HoldPin, whose pin cannot be proven live after the write
// landed, returns the pointer as written together with an error matching
// ErrCollected. After Commit returns, the Tx cannot be used again.
func (tx *Tx) Commit(ctx context.Context, opts CommitOptions) (*pointer.Pointer, error) {
	p, err := tx.commit(ctx, opts)
	if !errors.Is(err, ErrCommitUnknown) {
		// A discard deleted the intents with the staged objects; after a
		// commit they are no longer needed. After an unknown outcome,
		// they are left to the collector.
		tx.dropIntents(ctx, p)
	}
	return p, err
}

func (tx *Tx) commit(ctx context.Context, opts CommitOptions) (*pointer.Pointer, error) {
	tx.mu.Lock()
	err := tx.checkOpen()
	if err == nil && tx.stageOnly {
		err = ErrStageOnly
	}
	tx.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := tx.awaitBase(ctx); err != nil {
		tx.mu.Lock()
		open := tx.checkOpen() == nil
		tx.done = true
		tx.mu.Unlock()
		if !open {
			return nil, err
		}
		return nil, tx.abort(ctx, err)
	}
	// A commit that may join a group-commit round leaves the files it
	// keeps from its base unproven for now: a commit that carries it
	// takes those paths from its own head. They are proven below, once
	// the Tx writes a manifest of its own on its base.
	kept := tx.keptFromBase()
	tx.mu.Lock()
	tx.keptPending = kept
	tx.mu.Unlock()
	if err := tx.verifyReferences(ctx, kept); err != nil {
		tx.mu.Lock()
		open := tx.checkOpen() == nil
		tx.done = true
		tx.mu.Unlock()
		if !open {
			return nil, err
		}
		if errors.Is(err, ErrMissingObject) {
			err = tx.whyMissing(ctx, err, opts)
		}
		// Nothing names this generation yet.
		return nil, tx.abort(ctx, err)
	}
	tx.mu.Lock()
	if err := tx.checkOpen(); err != nil {
		tx.mu.Unlock()
		return nil, err
	}
	tx.done, tx.committing = true, true
	entries := slices.Collect(maps.Values(tx.entries))
	tx.mu.Unlock()

	m := &generation.Manifest{
		Format:       generation.Format,
		Generation:   tx.gen,
		Seq:          1,
		StagingStart: tx.stagingStart,
		Writer:       tx.d.writer,
		Message:      opts.Message,
		Meta:         opts.Meta,
		Entries:      entries,
	}
	if tx.base != nil {
		m.Parent, m.ParentManifestSHA256, m.Seq = tx.base.Generation, tx.base.ManifestSHA256, tx.base.Seq+1
		m.BaseCommittedAt = tx.baseCommittedAt
	}
	if file, below := generation.Clash(entries); file != "" {
		return nil, tx.abort(ctx, fmt.Errorf("commit: %w: %q is a file, and %q would make it a directory too; no file system can hold both, so nothing was committed", ErrFileDirClash, file, below))
	}
	// A commit that may rebase carries the writers waiting on its base
	// (group commit); rs is what it read, for the rebase too.
	var rs *rebaseState
	var fences []group.Fence // those of the writers next carries
	g, mv, r, err := tx.carryFirst(ctx, entries, opts)
	switch {
	case err != nil:
		return tx.lose(ctx, err)
	case mv != nil && mv.landed != nil:
		tx.markCarried(mv.landed)
		return mv.landed, nil
	case mv != nil:
		// Lost the round without a write of its own: rebase as after a
		// lost compare-and-swap.
		lostTo := &ConflictError{Winner: tx.winner, Seq: m.Seq}
		plan, done, err := tx.rebaseRounds(ctx, r, mv.got, mv.attrs, opts, lostTo)
		if err != nil || done != nil {
			return done, err
		}
		return tx.send(ctx, opts, entries, r, plan)
	case r != nil:
		rs = r
		m.Entries, m.Carried, fences = g.Entries, g.Carried, g.Fences
		tx.mu.Lock()
		tx.grp.sending = len(g.Carried)
		tx.mu.Unlock()
	}
	if err := tx.proveKept(ctx); err != nil {
		if errors.Is(err, ErrMissingObject) {
			err = tx.whyMissing(ctx, err, opts)
		}
		return tx.lose(ctx, err)
	}
	stored, err := generation.Encode(m)
	if err != nil {
		return tx.lose(ctx, err)
	}
	sum := sha256.Sum256(stored)
	tx.mu.Lock()
	tx.staged = append(tx.staged, generation.ManifestKey(tx.gen))
	tx.mu.Unlock()
	if err := tx.putManifest(ctx, generation.ManifestKey(tx.gen), stored); err != nil {
		// The pointer is untouched, so this generation cannot be live
		// (unless another writer carries its intent: lose settles that).
		return tx.lose(ctx, fmt.Errorf("commit: write manifest: %w", err))
	}
	tx.d.remember(tx.gen, hex.EncodeToString(sum[:]), stored)

	next := newPointer(m, hex.EncodeToString(sum[:]), opts)
	// Refuse a pointer that cannot be encoded (too much meta) before
	// sending anything, rather than as an unknown outcome.
	if err := pointer.Fits(next); err != nil {
		return tx.lose(ctx, fmt.Errorf("commit: refused before sending the pointer: %w", err))
	}
	return tx.send(ctx, opts, entries, rs, sendPlan{next: next, fences: fences, head: tx.base, etag: tx.baseETag})
}

// send sends the pointer write of plan, and settles its outcome: it
// returns the pointer value that landed, or the error the commit ended
// with, rebasing on a proven loss when the Tx may. rs is what the Tx read,
// once known; entries are its own.
func (tx *Tx) send(ctx context.Context, opts CommitOptions, entries []generation.Entry, rs *rebaseState, plan sendPlan) (*pointer.Pointer, error) {
	next, fences := plan.next, plan.fences
	var err error
	// base is the pointer next builds on: the Tx's base, or after a
	// rebase the head it rebased on.
	base := plan.head
	cur, etag := plan.head, plan.etag
	var sent []string           // the write ids of the pointer writes sent since the last rebase
	sentOn := map[string]bool{} // the ETags the writes sent were conditioned on
	var attempt int
	// adopt makes a rebase's pointer write the one to send, built on the
	// head it rebased on.
	adopt := func(plan sendPlan) {
		next, fences = plan.next, plan.fences
		base, cur, etag, sent, attempt = plan.head, plan.head, plan.etag, nil, -1
	}
	for ; ; attempt++ {
		if err := tx.guard(ctx, cur, opts.Fence, opts.FenceLease); err != nil {
			if sentOn[etag] {
				// A write of ours conditioned on the pointer as it still
				// is may be on its way (the guard can fail on an unchanged
				// pointer: a pin that expired, or could not be read): it
				// may land, so nothing is discarded.
				return nil, fmt.Errorf("%w: a pointer write of generation %s may still land, and the commit can no longer be retried: %v", ErrCommitUnknown, next.Generation, err)
			}
			return tx.lose(ctx, err)
		}
		if cur != nil {
			next.GCHorizon, next.GCFloor, next.GCToken = cur.GCHorizon, cur.GCFloor, cur.GCToken
			next.Fence, next.Fences, next.FencedOnly = cur.Fence, cur.Fences, cur.FencedOnly
		}
		if opts.Fence != 0 {
			if err := next.CheckFence(opts.FenceLease); err != nil {
				return tx.lose(ctx, fmt.Errorf("commit: refused before sending the pointer: %w", err))
			}
			next.RaiseFence(opts.FenceLease, opts.Fence)
		}
		for _, f := range fences {
			next.RaiseFence(f.Lease, f.Token)
		}
		// With the fences and the collector's fields of cur, the pointer
		// may no longer fit: refuse it before sending, not as an unknown
		// outcome. An earlier write of this commit was settled as not
		// applied and had cur's old ETag as its condition: cur changed to
		// make next grow, so that write cannot land.
		if err := pointer.Fits(next); err != nil {
			return tx.lose(ctx, fmt.Errorf("commit: refused before sending the pointer: %w", err))
		}
		_, werr := pointer.Write(ctx, tx.d.s, next, etag)
		sent, sentOn[etag] = append(sent, next.WriteID), true
		last := *next
		tx.mu.Lock()
		tx.lastSent = &last
		tx.mu.Unlock()
		if werr == nil {
			tx.noteGrouped()
			return next, tx.confirmHold(ctx, next)
		}
		// Whatever the error, the write may have landed (a lost response,
		// or an SDK retry that hit our own write and got 412). Read back.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
		var got *pointer.Pointer
		var attrs store.Attrs
		rerr := retryRead(rctx, tx.d.retry, func() (err error) {
			got, attrs, err = pointer.Read(rctx, tx.d.s)
			return err
		})
		var o outcome
		if rerr == nil {
			o, err = tx.resolve(rctx, got, next, base)
		}
		cancel()
		switch {
		case rerr != nil && errors.Is(rerr, store.ErrNotExist) && cur == nil:
			// Our create did not land and nobody else's did.
			o = notApplied
		case rerr != nil:
			return nil, fmt.Errorf("%w: write pointer: %v; read back: %v", ErrCommitUnknown, werr, rerr)
		case err != nil:
			return nil, fmt.Errorf("%w: write pointer: %v; %v", ErrCommitUnknown, werr, err)
		}
		switch o {
		case mine:
			tx.d.log.Debug("pointer write resolved as ours", "generation", tx.gen, "seq", next.Seq, "error", werr)
			written := landed(got, next, sent)
			tx.noteGrouped()
			return written, tx.confirmHold(ctx, written)
		case carried:
			tx.markCarried(tx.grp.carried)
			return tx.grp.carried, nil
		case lost:
			// Every pointer write of this commit is dead: each was
			// conditioned on a pointer value that never comes back.
			if tx.rebase == nil {
				return nil, tx.abort(ctx, &ConflictError{Winner: tx.winner, Seq: next.Seq})
			}
			if rs == nil {
				if rs, err = tx.prepareRebase(ctx, entries); err != nil {
					return nil, tx.abort(ctx, fmt.Errorf("%w; rebase: %w", &ConflictError{Winner: tx.winner, Seq: next.Seq}, err))
				}
			}
			plan, done, err := tx.rebaseRounds(ctx, rs, got, attrs, opts, &ConflictError{Winner: tx.winner, Seq: next.Seq})
			if err != nil || done != nil {
				return done, err
			}
			adopt(plan)
		case notApplied:
			if attempt == maxCASRetries {
				return nil, fmt.Errorf("%w: pointer write kept failing: %v", ErrCommitUnknown, werr)
			}
			if got != nil && got.WriteID != cur.WriteID && tx.carrying() {
				// The pointer value the carried writers' intents are bound
				// to is gone: so is every write of ours conditioned on it.
				// Carry them again only on what they bind themselves to.
				tx.clearIntent()
				plan, done, err := tx.rebaseRounds(ctx, rs, got, attrs, opts, &ConflictError{Winner: tx.winner, Seq: next.Seq})
				if err != nil || done != nil {
					return done, err
				}
				adopt(plan)
				continue
			}
			if got != nil {
				if got.WriteID != cur.WriteID {
					tx.clearIntent()
				}
				cur, etag = got, attrs.ETag
			}
			if errors.Is(werr, store.ErrConflict) {
				// A done ctx fails the next pointer write, whose outcome
				// is read back and settled as any failed write's.
				_ = ctxtime.Sleep(ctx, tx.d.retry.Backoff(attempt))
			}
		}
	}
}

// noteGrouped notes, for the next commits of the dataset, whether this
// one, which landed, was in a round: it carried others.
func (tx *Tx) noteGrouped() {
	tx.d.grouped.Store(tx.carrying())
}

// sendPlan is the pointer write a rebase prepared: next, built on head
// (whose version token is etag), raising fences for the writers it
// carries.
type sendPlan struct {
	next   *pointer.Pointer
	fences []group.Fence
	head   *pointer.Pointer
	etag   string
}

// rebaseRounds rebases the lost commit on got, in group-commit rounds
// where it may: it returns the pointer write to send, or, when the commit
// ended, the pointer value that carried it or the error it ended with.
func (tx *Tx) rebaseRounds(ctx context.Context, rs *rebaseState, got *pointer.Pointer, attrs store.Attrs, opts CommitOptions, lostTo *ConflictError) (sendPlan, *pointer.Pointer, error) {
	grouping := !tx.rebase.NoGroup && !rs.all && tx.refSeq == 0
	for {
		if n := tx.Rebased(); n > 0 && !grouping {
			// Writers that keep losing to each other spread out, as
			// Update's retries do: all rebasing on one head at once,
			// only one of them can win. (In a group commit, the writers
			// of a round wait for the first one instead.) The head read
			// before the wait is likely gone after it: read it again.
			if ctxtime.Sleep(ctx, tx.d.retry.Backoff(n-1)) == nil {
				if p, a, err := pointer.Read(ctx, tx.d.s); err == nil {
					got, attrs = p, a
				}
			}
		}
		h, own, err := tx.rebaseHead(ctx, rs, got, attrs, lostTo)
		if err != nil {
			return sendPlan{}, nil, tx.abort(ctx, err)
		}
		g := group.Group{Entries: own}
		if tx.groupable(rs, h) {
			if err := tx.guard(ctx, got, opts.Fence, opts.FenceLease); err != nil {
				return sendPlan{}, nil, tx.abort(ctx, err)
			}
			var mv *moved
			g, mv, err = tx.round(ctx, rs, h, own, opts)
			switch {
			case err != nil:
				landed, err := tx.lose(ctx, err)
				return sendPlan{}, landed, err
			case mv != nil && mv.landed != nil:
				tx.markCarried(mv.landed)
				return sendPlan{}, mv.landed, nil
			case mv != nil:
				got, attrs = mv.got, mv.attrs
				if mv.lostSeq != 0 {
					lostTo = &ConflictError{Winner: tx.winner, Seq: mv.lostSeq}
				}
				continue
			}
		}
		return tx.planOn(ctx, h, g, opts, lostTo)
	}
}

// planOn writes the manifest of the commit rebased on h with the group g,
// and returns the pointer write to send; or, when the commit ended, what
// it ended with.
func (tx *Tx) planOn(ctx context.Context, h *head, g group.Group, opts CommitOptions, lostTo *ConflictError) (sendPlan, *pointer.Pointer, error) {
	rm, sum, err := tx.writeRebased(ctx, h, g, opts)
	if err != nil {
		landed, err := tx.lose(ctx, fmt.Errorf("%w; rebase: %w", lostTo, err))
		return sendPlan{}, landed, err
	}
	tx.mu.Lock()
	tx.grp.sending = len(g.Carried)
	tx.mu.Unlock()
	next := newPointer(rm, sum, opts)
	if err := pointer.Fits(next); err != nil {
		landed, err := tx.lose(ctx, fmt.Errorf("commit: refused before sending the pointer: %w", err))
		return sendPlan{}, landed, err
	}
	return sendPlan{next: next, fences: g.Fences, head: h.Ptr, etag: h.attrs.ETag}, nil, nil
}

// carrying reports whether the pointer write being sent carries other
// writers.
func (tx *Tx) carrying() bool {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.grp.sending > 0
}

// newPointer returns the pointer that commits m, whose stored form has the
// sha256 sum; the guards fill in the fences and the collector's fields.
func newPointer(m *generation.Manifest, sum string, opts CommitOptions) *pointer.Pointer {
	return &pointer.Pointer{
		Seq:            m.Seq,
		Generation:     m.Generation,
		Parent:         m.Parent,
		Manifest:       generation.ManifestKey(m.Generation),
		ManifestSHA256: sum,
		CommittedAt:    time.Now().UTC(),
		Writer:         m.Writer,
		Message:        opts.Message,
		Meta:           opts.Meta,
	}
}

// landed returns the pointer value our commit wrote, once the read-back
// got proved the commit ours. An earlier write of this commit may have
// landed and a later resend failed its condition, so next, which carries
// the last write's id, is not necessarily it. If got is still our
// generation at our seq, got is the value (possibly since rewritten by the
// collector or a fence registration, which keep the commit). If others
// already built on top, it is next with the id of the one write sent, or
// with an empty write id when more than one was sent and which landed
// cannot be told.
func landed(got, next *pointer.Pointer, sent []string) *pointer.Pointer {
	if got.Seq == next.Seq && got.Generation == next.Generation {
		return got
	}
	p := *next
	p.WriteID = ""
	if len(sent) == 1 {
		p.WriteID = sent[0]
	}
	return &p
}

type outcome int

const (
	notApplied outcome = iota
	mine
	lost
	carried // another writer's commit carried ours (group commit)
)

// resolve decides the outcome of an uncertain pointer write of want, built
// on base, from the pointer read back afterwards.
func (tx *Tx) resolve(ctx context.Context, got, want, base *pointer.Pointer) (outcome, error) {
	if got.WriteID == want.WriteID {
		return mine, nil // our write landed; possibly an SDK retry then saw 412
	}
	tx.mu.Lock()
	ih := tx.grp.boundTo
	tx.mu.Unlock()
	if got.Seq >= want.Seq && ih != nil && ih.Seq+1 == want.Seq {
		// Our intent for this seq may have been carried by the commit
		// there: its manifest says.
		m, sum, err := tx.d.manifestAt(ctx, got, want.Seq)
		if err != nil {
			return 0, fmt.Errorf("cannot tell who committed seq %d: %w", want.Seq, err)
		}
		switch {
		case m.Generation == want.Generation:
			return mine, nil
		case m.CarriedBy(tx.gen):
			if err := tx.appliedIn(m); err != nil {
				return 0, err
			}
			tx.mu.Lock()
			tx.grp.carried = group.CarriedPointer(got, m, sum)
			tx.mu.Unlock()
			return carried, nil
		}
		tx.winner = m.Generation
		tx.clearIntent()
		return lost, nil
	}
	if got.Seq >= want.Seq {
		gen, err := tx.d.generationAt(ctx, got, want.Seq)
		if err != nil {
			return 0, fmt.Errorf("cannot tell who committed seq %d: %w", want.Seq, err)
		}
		if gen == want.Generation {
			return mine, nil // we committed and others built on top
		}
		tx.winner = gen
		return lost, nil
	}
	if base != nil && got.Seq == base.Seq && got.Generation == base.Generation {
		return notApplied, nil // only the horizon moved, or nothing applied
	}
	return 0, fmt.Errorf("pointer went from seq %d to an unexpected seq %d (generation %s)", want.Seq-1, got.Seq, got.Generation)
}

// generationAt walks the parent chain from the pointer p back to seq and
// returns the generation there.
func (d *Dataset) generationAt(ctx context.Context, p *pointer.Pointer, seq uint64) (string, error) {
	if p.Seq == seq {
		return p.Generation, nil
	}
	gen := p.Parent
	for s := p.Seq - 1; gen != ""; s-- {
		var m *generation.Manifest
		err := retryRead(ctx, d.retry, func() (err error) {
			m, err = d.loadManifest(ctx, gen, "")
			return err
		})
		if err != nil {
			return "", err
		}
		if m.Seq != s {
			return "", fmt.Errorf("%w: generation %s has seq %d, its child expected %d", generation.ErrCorrupt, gen, m.Seq, s)
		}
		if s == seq {
			return gen, nil
		}
		gen = m.Parent
	}
	return "", fmt.Errorf("%w: seq %d is not in the history", ErrNotFound, seq)
}

// whyMissing explains objects that VerifyReferences found missing. When
// the pointer has moved past the base, the commit had lost anyway, and the
// collector may have removed what only the superseded base referenced:
// that is a lost race (or a guard's refusal), which Update retries, not a
// damaged dataset.
func (tx *Tx) whyMissing(ctx context.Context, missing error, opts CommitOptions) error {
	var cur *pointer.Pointer
	err := retryRead(ctx, tx.d.retry, func() (err error) {
		cur, _, err = pointer.Read(ctx, tx.d.s)
		return err
	})
	if err != nil {
		return missing
	}
	if gerr := tx.guard(ctx, cur, opts.Fence, opts.FenceLease); gerr != nil {
		return fmt.Errorf("%w (%w)", gerr, missing)
	}
	if tx.base == nil || cur.Seq <= tx.base.Seq {
		return missing
	}
	seq := tx.base.Seq + 1
	winner, err := tx.d.generationAt(ctx, cur, seq)
	if err != nil {
		return fmt.Errorf("%w: the pointer moved to seq %d while staging (%w)", ErrStale, cur.Seq, missing)
	}
	return fmt.Errorf("%w (%w)", &ConflictError{Winner: winner, Seq: seq}, missing)
}

// guard applies the collector-horizon, fencing and collector-floor checks
// against the newest pointer seen. A reference below the floor passes only
// under a live pin (HoldPin); Commit confirms the pin after the write.
func (tx *Tx) guard(ctx context.Context, cur *pointer.Pointer, fence uint64, lease string) error {
	if cur == nil {
		return nil
	}
	if tx.base == nil && !cur.GCHorizon.IsZero() {
		// A first commit that rebased: its staging start is the local
		// clock's, which no horizon can be judged against.
		return fmt.Errorf("%w: generation %s began as the dataset's first commit, and the collector has published a horizon (%s) since",
			ErrStale, tx.gen, cur.GCHorizon.Format(time.RFC3339))
	}
	if !cur.GCHorizon.IsZero() && !cur.GCHorizon.Before(tx.stagingStart) {
		return fmt.Errorf("%w: generation %s started staging at %s, the collector's horizon is %s",
			ErrStale, tx.gen, tx.stagingStart.Format(time.RFC3339), cur.GCHorizon.Format(time.RFC3339))
	}
	if err := checkFence(cur, fence, lease); err != nil {
		return err
	}
	if tx.refSeq != 0 && tx.refSeq < cur.GCFloor {
		if tx.holds() {
			_, err := tx.refPin.live(ctx)
			if err == nil {
				return nil
			}
			return fmt.Errorf("%w: generation %s references objects of seq %d, below the collector's floor %d, and the pin that holds it is not live: %w",
				ErrStale, tx.gen, tx.refSeq, cur.GCFloor, err)
		}
		return fmt.Errorf("%w: generation %s references objects of seq %d, below the collector's floor %d",
			ErrStale, tx.gen, tx.refSeq, cur.GCFloor)
	}
	return nil
}

// abort discards the staged objects of a Tx that provably did not commit
// and returns err. What it could not delete, Leftover says.
func (tx *Tx) abort(ctx context.Context, err error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
	defer cancel()
	if derr := tx.discard(dctx); derr != nil {
		tx.d.log.Info("discard failed; the orphan sweep will remove the objects", "generation", tx.gen, "error", derr)
	}
	return err
}

func (tx *Tx) discardQuietly(ctx context.Context) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
	defer cancel()
	if err := tx.discard(dctx); err != nil {
		tx.d.log.Warn("discard failed; the orphan sweep will remove the objects", "generation", tx.gen, "error", err)
	}
}

// putManifest writes a manifest at key, create-if-absent. The key is unique
// to its generation, a fresh id, so a precondition failure can only be our own earlier
// attempt (an SDK retry after a lost response): it is settled by reading
// the manifest back. Conflicts and transient failures are retried.
func (tx *Tx) putManifest(ctx context.Context, key string, stored []byte) error {
	var err error
	for attempt := range 4 {
		if attempt > 0 {
			if serr := ctxtime.Sleep(ctx, tx.d.retry.Backoff(attempt-1)); serr != nil {
				return errors.Join(err, serr)
			}
		}
		_, err = tx.d.s.Put(ctx, key, bytes.NewReader(stored), store.PutOptions{
			IfNoneMatch: true, Size: int64(len(stored)), ContentType: "application/json",
		})
		if err == nil || !errors.Is(err, store.ErrPrecondition) {
			if err == nil || ctx.Err() != nil {
				return err
			}
			continue
		}
		rc, _, gerr := tx.d.s.Get(ctx, key)
		if gerr != nil {
			err = errors.Join(err, gerr)
			continue
		}
		got, rerr := io.ReadAll(io.LimitReader(rc, int64(len(stored))+1))
		rc.Close()
		switch {
		case rerr != nil:
			// A cut read proves nothing either way: try the conditional
			// PUT and the read-back again.
			err = errors.Join(err, rerr)
			continue
		case bytes.Equal(got, stored):
			return nil // our own write, landed earlier
		}
		return fmt.Errorf("%w: another manifest is at %q", err, key)
	}
	return err
}

// retryRead is Retry.ReadBack, which also stops at the errors of a
// dataset's reads that a retry cannot cure: a collected object and corrupt
// content.
func retryRead(ctx context.Context, r Retry, read func() error) error {
	return r.ReadBack(ctx, read, func(err error) bool {
		return errors.Is(err, ErrCollected) || errors.Is(err, generation.ErrCorrupt) || errors.Is(err, pointer.ErrCorrupt)
	})
}
