package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/commitptr/commitptr/store"
)

// Lease is a held lease: a single-key lease from Acquire or TryAcquire, or
// the lease on one epoch inside an *Epoch. Its methods are safe for
// concurrent use.
//
// A Lease believes it holds the lease until its own deadline (see Deadline),
// which each successful Renew pushes forward. Done closes once it stops
// believing so: the deadline passed, a renewal found the lease taken over,
// or it was released. A closed Lease stays closed; acquire again for a new
// one.
type Lease struct {
	s      store.Store
	name   string
	key    string
	owner  string
	token  uint64
	ttl    time.Duration
	margin time.Duration
	clock  Clock
	done   chan struct{}

	// op serialises the lease's writes (Renew, Release).
	op sync.Mutex

	mu         sync.Mutex
	etag       string               // ETag of our latest confirmed write
	writeID    string               // write id of that write
	pending    map[string]time.Time // unconfirmed write ids → when sent
	deadline   time.Time            // on clock
	serverTime time.Time
	err        error // why done is closed; nil while held
	lostToPeer bool  // err was a proven takeover: there is nothing to release
	released   bool
	keeping    bool
	stopKeep   context.CancelFunc
}

// grant makes the Lease for a write that was sent at sent and is known to
// have landed with etag. It fails if the acquisition completed after the
// deadline it would have had, or if the store sent no Date: nobody could
// ever judge such a lease expired.
func grant(s store.Store, name, key string, o Options, token uint64, wid, etag string, sent, serverTime time.Time) (*Lease, error) {
	l := &Lease{
		s: s, name: name, key: key, owner: o.Owner, token: token,
		ttl: o.TTL, margin: o.Margin, clock: o.Clock,
		done:       make(chan struct{}),
		etag:       etag,
		writeID:    wid,
		deadline:   sent.Add(o.TTL - o.Margin),
		serverTime: serverTime,
	}
	if err := store.CheckServerTime(serverTime, store.OpPut, key, ageJudged); err != nil {
		return nil, giveBack(l, fmt.Errorf("lease %q: %w", name, err))
	}
	if !o.Clock.Now().Before(l.deadline) {
		// We hold it in the store, but too late to act on it. Give it back.
		return nil, giveBack(l, fmt.Errorf("%w: lease %q: acquiring took longer than TTL − margin (%v)", ErrLost, name, o.TTL-o.Margin))
	}
	go l.watch()
	return l, nil
}

// giveBack releases l, which could not be granted for err, and returns err,
// saying so if the release failed: the lease then expires after its TTL.
func giveBack(l *Lease, err error) error {
	if rerr := l.Release(context.Background()); rerr != nil {
		return fmt.Errorf("%w; and could not release it, so it expires after its TTL: %v", err, rerr)
	}
	return err
}

// Name returns the lease's name.
func (l *Lease) Name() string { return l.name }

// Owner returns the owner name written into the lease object.
func (l *Lease) Owner() string { return l.owner }

// Token returns the fencing token: 1 for the first holder of a name and
// strictly larger for every later holder (for an epoch lock, the epoch).
// Pass it as commit.CommitOptions.Fence so that a holder that lost the
// lease cannot commit after a newer one did.
func (l *Lease) Token() uint64 { return l.token }

// TTL returns the lease's TTL.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Done returns a channel that is closed when the lease is lost, its own
// deadline passes, or it is released.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held, and afterwards why it ended: an
// error matching ErrLost (taken over, deadline passed, or released).
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Deadline returns the holder's own deadline on the lease's Clock: the time
// its last successful acquire or renew was sent, + TTL − Margin. Nobody can
// judge the lease expired before then.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Held reports whether the lease is held: not lost or released, and the
// Clock is before the deadline. Check it right before acting on the lease;
// better, pass Token as a fence to the resource.
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err == nil && l.clock.Now().Before(l.deadline)
}

// ServerTime returns the store's clock (the response's Date) at the last
// successful acquire or renew.
func (l *Lease) ServerTime() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.serverTime
}

// finishLocked ends the lease with err, closing Done. l.mu is held.
func (l *Lease) finishLocked(err error) {
	if l.err != nil {
		return
	}
	l.err = err
	close(l.done)
	if l.stopKeep != nil {
		l.stopKeep()
	}
}

// live returns nil if the lease is held, ending it first if its deadline
// has passed.
func (l *Lease) live() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil && !l.clock.Now().Before(l.deadline) {
		l.finishLocked(l.expiredErr())
	}
	return l.err
}

func (l *Lease) expiredErr() error {
	return fmt.Errorf("%w: lease %q (token %d): own deadline passed without a renewal", ErrLost, l.name, l.token)
}

// watch closes Done when the deadline passes.
func (l *Lease) watch() {
	for {
		l.mu.Lock()
		if l.err != nil {
			l.mu.Unlock()
			return
		}
		wait := l.deadline.Sub(l.clock.Now())
		if wait <= 0 {
			l.finishLocked(l.expiredErr())
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		select {
		case <-l.clock.After(wait):
		case <-l.done:
			return
		}
	}
}

// confirm records that our write wid, sent at sent, landed with etag. A
// write only extends the deadline if it is confirmed before the current
// deadline: until then nobody can have judged the lease expired, and
// afterwards everyone judges by the new Last-Modified, which is later than
// sent. A response without a Date extends nothing: the store's clock is
// what everyone judges the lease by.
func (l *Lease) confirm(wid, etag string, sent, serverTime time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.etag, l.writeID = etag, wid
	clear(l.pending) // older unconfirmed writes carried an older If-Match
	if l.err != nil {
		return l.err
	}
	if !l.clock.Now().Before(l.deadline) {
		l.finishLocked(l.expiredErr())
		return l.err
	}
	if err := store.CheckServerTime(serverTime, store.OpPut, l.key, ageJudged); err != nil {
		return fmt.Errorf("lease %q: %w", l.name, err) // held until the old deadline
	}
	if d := sent.Add(l.ttl - l.margin); d.After(l.deadline) {
		l.deadline = d
	}
	l.serverTime = serverTime
	return nil
}

// The outcomes of reading the lease back after an uncertain write.
type outcome int

const (
	unknown    outcome = iota // could not read it
	applied                   // this write landed
	mineBefore                // an earlier unconfirmed write of ours landed
	notApplied                // the object is as we last wrote it
	taken                     // someone else wrote it (or it is gone)
)

// readBack reads the lease object after an uncertain write of wid, and
// says what happened.
func (l *Lease) readBack(ctx context.Context, wid string) (outcome, observation, error) {
	obs, err := readLease(ctx, l.s, l.key)
	switch {
	case errors.Is(err, store.ErrNotExist):
		return taken, obs, fmt.Errorf("%w: lease %q (token %d): the lease object is gone", ErrLost, l.name, l.token)
	case errors.Is(err, ErrCorrupt):
		return taken, obs, fmt.Errorf("%w: lease %q (token %d): %v", ErrLost, l.name, l.token, err)
	case err != nil:
		return unknown, obs, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, pending := l.pending[obs.rec.WriteID]
	switch {
	case obs.rec.WriteID == wid:
		return applied, obs, nil
	case pending && obs.rec.Token == l.token:
		return mineBefore, obs, nil
	case obs.rec.WriteID == l.writeID && obs.etag == l.etag:
		return notApplied, obs, nil
	}
	return taken, obs, fmt.Errorf("%w: lease %q (token %d): taken over by %s (token %d)", ErrLost, l.name, l.token, obs.rec.Owner, obs.rec.Token)
}

// write sends one conditional write of the lease object with our token.
func (l *Lease) write(ctx context.Context, released bool) (wid string, sent time.Time, attrs store.Attrs, err error) {
	l.mu.Lock()
	etag := l.etag
	wid, sent = newWriteID(), l.clock.Now()
	if l.pending == nil {
		l.pending = map[string]time.Time{}
	}
	l.pending[wid] = sent
	l.mu.Unlock()
	rec := record{Owner: l.owner, Token: l.token, TTLms: l.ttl.Milliseconds(), Released: released, WriteID: wid}
	body := rec.encode()
	attrs, err = l.s.Put(store.Urgent(ctx), l.key, bytes.NewReader(body), store.PutOptions{
		IfMatch: etag, Size: int64(len(body)), ContentType: "application/json",
	})
	return wid, sent, attrs, err
}

// renewRetryMin is the first pause before a renewal that did not land is
// sent again; the pause doubles up to TTL/10.
const renewRetryMin = 10 * time.Millisecond

// Renew extends the lease by one TTL from now: a conditional write on the
// lease object's ETag with the same token (one PUT). The new deadline
// counts from the moment the write was sent.
//
// If the lease was taken over, Renew returns an error matching ErrLost and
// Done closes. Before concluding that, an uncertain write (timeout, 5xx,
// 409, or a 412 that an SDK retry got against our own write) is resolved by
// reading the object back and looking for our write id. A write that did
// not land for a reason a retry may cure (a 409 ConditionalRequestConflict,
// a 5xx, a timeout, a broken connection) is sent again after a short
// backoff, for as long as the pause ends before the holder's deadline. Any
// other error leaves the lease held until its deadline; renew again soon.
func (l *Lease) Renew(ctx context.Context) error {
	l.op.Lock()
	defer l.op.Unlock()
	pause := renewRetryMin
	for adopted := 0; ; {
		if err := l.live(); err != nil {
			return err
		}
		wid, sent, attrs, err := l.write(ctx, false)
		if err == nil {
			return l.confirm(wid, attrs.ETag, sent, attrs.ServerTime)
		}
		out, obs, rerr := l.readBack(ctx, wid)
		switch out {
		case applied:
			return l.confirm(wid, obs.etag, sent, obs.serverTime)
		case mineBefore:
			// An earlier renewal that we could not confirm did land; adopt
			// it and renew on top of it.
			if cerr := l.confirm(obs.rec.WriteID, obs.etag, l.sentOf(obs.rec.WriteID), obs.serverTime); cerr != nil {
				return cerr
			}
			if adopted++; adopted < 3 {
				continue
			}
			return fmt.Errorf("lease %q: renew: %w", l.name, err)
		case taken:
			l.mu.Lock()
			l.lostToPeer = true
			l.finishLocked(rerr)
			l.mu.Unlock()
			return rerr
		case unknown:
			err = fmt.Errorf("%w; read back: %v", err, rerr)
		}
		// Not applied (or not known to be): send it again if that may help
		// and there is time.
		if !retryable(err) || !l.wait(ctx, pause) {
			return fmt.Errorf("lease %q: renew: %w", l.name, err)
		}
		pause = min(2*pause, max(l.ttl/10, renewRetryMin))
	}
}

// retryable reports whether a write that did not land may land when sent
// again: after a 409 ConditionalRequestConflict, a 5xx, a timeout or a
// broken connection. Refusals that a retry meets again are not: a failed
// precondition, a missing key or bucket, denied access, a bad key, and a
// done context.
func retryable(err error) bool {
	for _, refusal := range []error{
		store.ErrPrecondition, store.ErrNotExist, store.ErrNoBucket, store.ErrAccess,
		store.ErrInvalidKey, store.ErrNotEnforced, context.Canceled, context.DeadlineExceeded,
	} {
		if errors.Is(err, refusal) {
			return false
		}
	}
	return true
}

// wait pauses for d before a write is sent again. It returns false at once
// if the pause would reach the holder's deadline, and false if ctx ends
// first. It returns early, with true, if the lease ends meanwhile.
func (l *Lease) wait(ctx context.Context, d time.Duration) bool {
	if !l.clock.Now().Add(d).Before(l.Deadline()) {
		return false
	}
	select {
	case <-l.clock.After(d):
		return true
	case <-l.done:
		return true
	case <-ctx.Done():
		return false
	}
}

// sentOf returns when the pending write wid was sent.
func (l *Lease) sentOf(wid string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending[wid]
}

// KeepAlive starts a goroutine that renews the lease every TTL/3 until it
// is released or lost, its deadline passes, or ctx is done. A renewal that
// fails without losing the lease is retried sooner. Calling KeepAlive again
// while one runs does nothing. Stopping by ctx does not release the lease.
func (l *Lease) KeepAlive(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keeping || l.err != nil {
		return
	}
	l.keeping = true
	ctx, l.stopKeep = context.WithCancel(ctx)
	go l.keep(ctx)
}

func (l *Lease) keep(ctx context.Context) {
	defer func() {
		l.mu.Lock()
		l.keeping = false
		l.stopKeep()
		l.mu.Unlock()
	}()
	interval := l.ttl / 3
	wait := interval
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.done:
			return
		case <-l.clock.After(wait):
		}
		// A renewal that hangs must not outlive the lease.
		rctx, cancel := context.WithTimeout(ctx, l.ttl)
		err := l.Renew(rctx)
		cancel()
		switch {
		case err == nil:
			wait = interval
		case errors.Is(err, ErrLost):
			return
		default:
			wait = max(interval/4, time.Millisecond)
		}
	}
}

// Release gives the lease up: a conditional write of released: true on our
// ETag, with the same token (one PUT), so the next holder can take it at
// once with a larger token. It never deletes the object, which keeps tokens
// monotonic.
//
// Done closes and renewals stop before the write. Release runs on a fresh
// context bounded by ReleaseTimeout, keeping ctx's values but not its
// cancellation. It returns nil when the lease is provably not ours any
// more: released by this write, already released, or taken over by someone
// else. Otherwise (the store could not be reached) it returns the error,
// and the lease expires after its TTL. Release may be called more than once.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.released = true
	l.finishLocked(fmt.Errorf("%w: lease %q (token %d): released", ErrLost, l.name, l.token))
	lost := l.lostToPeer
	l.mu.Unlock()
	if lost {
		return nil
	}
	l.op.Lock()
	defer l.op.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var wid string
		var attrs store.Attrs
		wid, _, attrs, err = l.write(ctx, true)
		if err == nil {
			l.setETag(wid, attrs.ETag)
			return nil
		}
		out, obs, rerr := l.readBack(ctx, wid)
		switch out {
		case applied, taken:
			return nil
		case mineBefore:
			l.setETag(obs.rec.WriteID, obs.etag)
		case notApplied:
			// e.g. a 409 from a concurrent request: try again.
		default:
			return fmt.Errorf("lease %q: release: %w; read back: %v", l.name, err, rerr)
		}
	}
	return fmt.Errorf("lease %q: release: %w", l.name, err)
}

func (l *Lease) setETag(wid, etag string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.etag, l.writeID = etag, wid
	clear(l.pending)
}
