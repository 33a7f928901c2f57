package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/commitptr/commitptr/store"
)

// observation is a lease object as read from the store.
type observation struct {
	rec          record
	etag         string
	lastModified time.Time
	serverTime   time.Time
}

func (o observation) ttl() time.Duration { return time.Duration(o.rec.TTLms) * time.Millisecond }

// until is the server time from which the lease counts as expired.
func (o observation) until() time.Time { return o.lastModified.Add(o.ttl() + clockResolution) }

// expired reports whether the lease may be taken over: it was released, or
// by the store's clock TTL + 1 s passed since its last write.
func (o observation) expired() bool { return o.rec.Released || !o.serverTime.Before(o.until()) }

func (o observation) held(name string, race bool) *HeldError {
	return &HeldError{Name: name, Owner: o.rec.Owner, Token: o.rec.Token, Until: o.until(), ServerTime: o.serverTime, Race: race}
}

// ageJudged is what a lease cannot do without the store's clock.
const ageJudged = "the lease's age"

// readLease GETs and decodes a lease object. It refuses a response without
// a Date: whether the lease expired is judged by the store's clock only.
// A lease's reads and writes go ahead of a network store's queue of
// requests (store.Urgent): a renewal is bound by the lease's TTL.
func readLease(ctx context.Context, s store.Store, key string) (observation, error) {
	rc, attrs, err := s.Get(store.Urgent(ctx), key)
	if err != nil {
		return observation{}, err
	}
	defer rc.Close()
	rec, err := decodeRecord(key, rc)
	if err != nil {
		return observation{}, err
	}
	if err := store.CheckServerTime(attrs.ServerTime, store.OpGet, key, ageJudged); err != nil {
		return observation{}, err
	}
	if attrs.LastModified.IsZero() || attrs.ETag == "" {
		return observation{}, fmt.Errorf("read lease %q: the store reported no ETag or Last-Modified", key)
	}
	return observation{rec: rec, etag: attrs.ETag, lastModified: attrs.LastModified, serverTime: attrs.ServerTime}, nil
}

// acquirer runs acquisition attempts on one lease key.
type acquirer struct {
	s    store.Store
	name string
	key  string
	o    Options
}

func newAcquirer(s store.Store, name, key string, opts Options) (*acquirer, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &acquirer{s: s, name: name, key: key, o: o}, nil
}

// maxSteps bounds the writes of one acquisition attempt: each retry follows
// a change someone else made, or a write that provably did not land.
const maxSteps = 4

// write sends a conditional write of a lease record with token. On success,
// or when reading back proves the write landed, it returns the Lease. If it
// did not land, it returns what the read back saw (ok false if the object
// does not exist) and the write's error.
func (a *acquirer) write(ctx context.Context, token uint64, opts store.PutOptions) (l *Lease, obs observation, exists bool, werr error, err error) {
	wid, sent := newWriteID(), a.o.Clock.Now()
	body := record{Owner: a.o.Owner, Token: token, TTLms: a.o.TTL.Milliseconds(), WriteID: wid}.encode()
	opts.Size, opts.ContentType = int64(len(body)), "application/json"
	attrs, werr := a.s.Put(store.Urgent(ctx), a.key, bytes.NewReader(body), opts)
	if werr == nil {
		l, err = grant(a.s, a.name, a.key, a.o, token, wid, attrs.ETag, sent, attrs.ServerTime)
		return l, obs, true, nil, err
	}
	// Whatever the error, the write may have landed: a lost response, or
	// an SDK retry that hit our own write and got 412. Read back.
	obs, rerr := readLease(ctx, a.s, a.key)
	switch {
	case errors.Is(rerr, store.ErrNotExist):
		return nil, obs, false, werr, nil
	case rerr != nil:
		return nil, obs, false, werr, fmt.Errorf("lease %q: acquire: %w; read back: %w", a.name, werr, rerr)
	case obs.rec.WriteID == wid:
		l, err = grant(a.s, a.name, a.key, a.o, token, wid, obs.etag, sent, obs.serverTime)
		return l, obs, true, nil, err
	}
	return nil, obs, true, werr, nil
}

// attempt tries once to acquire the lease. The first request is a
// create-if-absent PUT, or with readFirst a GET. It returns a *HeldError
// when someone else holds the lease.
func (a *acquirer) attempt(ctx context.Context, readFirst bool) (*Lease, error) {
	var (
		obs    observation
		have   bool // obs is current
		race   bool
		create = !readFirst
		last   error
		lost   bool // the last write lost to someone else's
	)
	for step := 0; step < maxSteps; {
		if create {
			step++
			l, o, exists, werr, err := a.write(ctx, 1, store.PutOptions{IfNoneMatch: true})
			if l != nil || err != nil {
				return l, err
			}
			last = werr
			obs, have, create = o, exists, !exists
			if !exists && !errors.Is(werr, store.ErrPrecondition) && !errors.Is(werr, store.ErrConflict) {
				// The create failed without landing, and not because of a
				// condition (e.g. access denied, bad network): report it.
				return nil, fmt.Errorf("lease %q: acquire: %w", a.name, werr)
			}
			continue
		}
		if !have {
			o, err := readLease(ctx, a.s, a.key)
			if errors.Is(err, store.ErrNotExist) {
				create = true
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("lease %q: acquire: %w", a.name, err)
			}
			obs = o // every path from here returns or sets have
		}
		if !obs.expired() {
			return nil, obs.held(a.name, race)
		}
		// Expired or released: take it over with the next token, on the
		// ETag we judged. A 412 means someone else changed it first.
		judged := obs.etag
		if obs.rec.Token == math.MaxUint64 {
			// The next token would wrap to 0 and break the fencing order.
			return nil, fmt.Errorf("lease %q: acquire: %w: token %d cannot grow", a.name, ErrCorrupt, obs.rec.Token)
		}
		step++
		l, o, exists, werr, err := a.write(ctx, obs.rec.Token+1, store.PutOptions{IfMatch: judged})
		if l != nil || err != nil {
			return l, err
		}
		last = werr
		obs, have, create = o, exists, !exists
		lost = exists && o.etag != judged
		switch {
		case !exists:
			// Gone (deleted by hand): create it anew.
		case o.etag != judged:
			race = true // someone else wrote first; judge what they wrote
		case errors.Is(werr, store.ErrConflict), errors.Is(werr, store.ErrPrecondition):
			// Unchanged, and the write provably did not land: try again.
		default:
			return nil, fmt.Errorf("lease %q: take over: %w", a.name, werr)
		}
	}
	if lost {
		// Others keep taking the lease (and, by the time we look, giving
		// it back): it is in use, which is what a HeldError says. The
		// caller may try again later, as after any lost race.
		return nil, obs.held(a.name, true)
	}
	return nil, fmt.Errorf("lease %q: acquire: too much contention after %d writes: %w", a.name, maxSteps, last)
}

// TryAcquire acquires the lease name if it is free, without waiting.
//
// It first sends a create-if-absent PUT with token 1, which is all an
// unused name costs. If the lease exists, it reads it (one GET) and judges
// expiry by the store's clock: the lease is free if it was released or if
// the response's Date is at least TTL + 1 s after its Last-Modified. A free
// lease is taken over with a PUT If-Match on the ETag just read, with the
// next token. If the lease is held, TryAcquire returns a *HeldError (after
// 1 PUT + 1 GET); if another client took the free lease over first, the
// *HeldError also matches ErrRace. So does losing every takeover of a
// busy lease that others keep taking and releasing: TryAcquire gives up
// after 4 writes and says who wrote last.
//
// A write whose outcome is uncertain (timeout, 5xx, 409, or a 412 after an
// SDK retry) is resolved by reading the lease back: if it carries our write
// id, we hold the lease.
func TryAcquire(ctx context.Context, s store.Store, name string, opts Options) (*Lease, error) {
	a, err := newAcquirer(s, name, Key(name), opts)
	if err != nil {
		return nil, err
	}
	return a.attempt(ctx, false)
}

// Acquire acquires the lease name, waiting while it is held until ctx is
// done. It polls with jittered exponential backoff between Options.PollMin
// and PollMax, and sleeps no longer than the holder's remaining time (in
// server time) plus a little, but never less than PollMin, which caps the
// poll rate on the one hot key.
//
// The first try is TryAcquire's. Every later poll reads first and costs at
// most 1 GET + 1 PUT. Errors other than "held" and store conflicts end the
// wait. When ctx ends, the error matches ctx's error and the last
// *HeldError.
func Acquire(ctx context.Context, s store.Store, name string, opts Options) (*Lease, error) {
	a, err := newAcquirer(s, name, Key(name), opts)
	if err != nil {
		return nil, err
	}
	return poll(ctx, a.o, func(readFirst bool) (*Lease, error) { return a.attempt(ctx, readFirst) })
}

// poll runs try until it succeeds, fails with an error that waiting does
// not cure, or ctx ends.
func poll[T any](ctx context.Context, o Options, try func(readFirst bool) (T, error)) (T, error) {
	backoff := o.PollMin
	var lastHeld error // the last "held" answer, to report on timeout
	for readFirst := false; ; readFirst = true {
		v, err := try(readFirst)
		if err == nil {
			return v, nil
		}
		var he *HeldError
		if !errors.As(err, &he) && !errors.Is(err, store.ErrConflict) {
			if ctx.Err() != nil && lastHeld != nil {
				// The wait ran out in the middle of a poll: say who held
				// the lease, not only which request was cut short.
				return v, fmt.Errorf("%w (while waiting: %w)", ctx.Err(), lastHeld)
			}
			return v, err
		}
		lastHeld = err
		// Full jitter in [backoff/2, backoff], no longer than the holder
		// has left, no shorter than PollMin.
		d := backoff/2 + rand.N(backoff/2+1)
		if he != nil && !he.Race {
			if left := he.Until.Sub(he.ServerTime); left >= 0 && left < d {
				d = left + rand.N(o.PollMin/4+1)
			}
		}
		d = max(d, o.PollMin)
		backoff = min(2*backoff, o.PollMax)
		select {
		case <-ctx.Done():
			var zero T
			return zero, fmt.Errorf("%w (while waiting: %w)", ctx.Err(), err)
		case <-o.Clock.After(d):
		}
	}
}

// Info describes a lease object, as Status reads it.
type Info struct {
	Name  string
	Owner string
	// Token is the fencing token of the current or last holder (for an
	// epoch lock, the latest epoch).
	Token    uint64
	Released bool
	// Expired: released, or TTL + 1 s passed since LastModified by the
	// store's clock; anyone may take the lease.
	Expired bool
	// LastModified, ServerTime and Until are server times: the last write,
	// the read, and when the lease expires unless renewed.
	LastModified, ServerTime, Until time.Time
	TTL                             time.Duration
}

func (o observation) info(name string) Info {
	return Info{
		Name: name, Owner: o.rec.Owner, Token: o.rec.Token, Released: o.rec.Released,
		Expired: o.expired(), LastModified: o.lastModified, ServerTime: o.serverTime,
		Until: o.until(), TTL: o.ttl(),
	}
}

// Status reads the single-key lease name (one GET). If it was never
// acquired, the error matches store.ErrNotExist; a corrupt lease object
// gives an error matching ErrCorrupt.
func Status(ctx context.Context, s store.Store, name string) (Info, error) {
	if err := CheckName(name); err != nil {
		return Info{}, err
	}
	obs, err := readLease(ctx, s, Key(name))
	if err != nil {
		return Info{}, fmt.Errorf("lease %q: status: %w", name, err)
	}
	return obs.info(name), nil
}

// ReleaseToken releases the single-key lease name on behalf of the holder
// of token, typically a process that died: a conditional write of
// released: true on the ETag just read, so that it cannot undo a renewal
// or a takeover that happened meanwhile. It returns nil if the lease is
// released with token afterwards (now or before). If the lease is now held
// with another token, the error matches ErrLost and nothing is written.
//
// A live holder of token learns of the release at its next renewal (which
// fails with ErrLost) or at its deadline, and could act until then; the
// fence (its token is now below the next holder's) still protects the
// pointer. Use it for holders known to be gone.
func ReleaseToken(ctx context.Context, s store.Store, name string, token uint64) error {
	if err := CheckName(name); err != nil {
		return err
	}
	key := Key(name)
	for attempt := 0; attempt < maxSteps; attempt++ {
		obs, err := readLease(ctx, s, key)
		if err != nil {
			return fmt.Errorf("lease %q: release token %d: %w", name, token, err)
		}
		switch {
		case obs.rec.Token != token:
			return fmt.Errorf("%w: lease %q is at token %d (owner %s), not %d; nothing released", ErrLost, name, obs.rec.Token, obs.rec.Owner, token)
		case obs.rec.Released:
			return nil
		}
		rec := obs.rec
		rec.Released, rec.WriteID = true, newWriteID()
		body := rec.encode()
		_, werr := s.Put(ctx, key, bytes.NewReader(body), store.PutOptions{IfMatch: obs.etag, Size: int64(len(body)), ContentType: "application/json"})
		if werr == nil {
			return nil
		}
		if !errors.Is(werr, store.ErrPrecondition) && !errors.Is(werr, store.ErrConflict) {
			// Uncertain: read back.
			back, rerr := readLease(ctx, s, key)
			if rerr != nil {
				return fmt.Errorf("lease %q: release token %d: %w; read back: %w", name, token, werr, rerr)
			}
			if back.rec.WriteID == rec.WriteID {
				return nil
			}
		}
		// Renewed, taken over or released in between (or our own write
		// after an SDK retry): look again.
	}
	return fmt.Errorf("lease %q: release token %d: the lease kept changing", name, token)
}
