package lease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/commitptr/commitptr/store"
)

// Epoch lock layout and bounds.
const (
	// MaxEpoch is the largest epoch: epochs are 10 decimal digits.
	MaxEpoch = 9_999_999_999
	// hintName is the last segment of the latest-epoch hint object. It is
	// not 10 digits, so it is never mistaken for an epoch.
	hintName = "latest"
	// hintEvery: the hint is rewritten when finding the latest epoch had to
	// list this many epoch keys after it.
	hintEvery = 16
	// MinCleanupAge is the least olderThan that CleanupEpochs accepts. A
	// deleted epoch key can be created again, so epochs are removed only
	// long after they ended; see CleanupEpochs.
	MinCleanupAge = time.Minute
	// maxListAge bounds the time between proving which epoch is the latest
	// and sending the create of the next one. It is well below
	// MinCleanupAge, so an epoch missing from a listing is rarely created,
	// aged and cleaned up before our create. Nothing bounds how long the
	// create is in flight, though: the check for a newer epoch after it
	// lands is what keeps a late create from holding (see attemptEpoch).
	maxListAge = MinCleanupAge / 4
)

// EpochKey returns the key of epoch of the epoch lock name:
// Dir + name + "/" + the epoch as 10 zero-padded digits.
func EpochKey(name string, epoch uint64) string {
	return fmt.Sprintf("%s%s/%010d", Dir, name, epoch)
}

func epochPrefix(name string) string { return Dir + name + "/" }

func hintKey(name string) string { return epochPrefix(name) + hintName }

// parseEpoch returns the epoch of a key under epochPrefix(name), or 0 if
// the key is not an epoch.
func parseEpoch(prefix, key string) uint64 {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok || len(rest) != 10 {
		return 0
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// Epoch is a held epoch lock: the lease on one epoch object. Its token is
// the epoch. Renew, KeepAlive, Done, Held and Release work as for a
// single-key lease, on the epoch's key.
type Epoch struct {
	*Lease
	epoch uint64
}

// Epoch returns the epoch held, which is also the fencing token.
func (e *Epoch) Epoch() uint64 { return e.epoch }

// Key returns the key of the held epoch object.
func (e *Epoch) Key() string { return e.key }

// hint is the body of the latest-epoch hint object.
type hint struct {
	Epoch uint64 `json:"epoch"`
}

// latestEpoch finds the latest epoch of name, with its listing's size. It
// starts from hint (or, if hint is 0, from the hint object) and lists only
// the keys from there on, so its cost does not grow with the history. The
// hint is only a starting point: a listing from any hint still sees every
// newer epoch, and a hint naming no existing epoch falls back to a full
// listing. It returns 0 if the lock has no epochs.
func latestEpoch(ctx context.Context, s store.Store, name string, from uint64) (latest uint64, listed int, err error) {
	if from == 0 {
		from = readHint(ctx, s, name)
	}
	prefix := epochPrefix(name)
	for {
		after := ""
		if from > 1 {
			after = EpochKey(name, from-1) // include the hinted epoch itself
		}
		listed = 0
		for obj, err := range store.List(ctx, s, prefix, "", after) {
			if err != nil {
				return 0, 0, fmt.Errorf("epoch lock %q: find latest epoch: %w", name, err)
			}
			if e := parseEpoch(prefix, obj.Key); e > 0 {
				latest = max(latest, e)
				listed++
			}
		}
		if latest > 0 || from <= 1 {
			return latest, listed, nil
		}
		from = 0 // the hint named no epoch (removed by hand?): list all
	}
}

// newerEpoch returns an epoch of name above epoch, or 0 if there is none
// (1 LIST of the keys after epoch's: normally only the hint).
func newerEpoch(ctx context.Context, s store.Store, name string, epoch uint64) (uint64, error) {
	prefix := epochPrefix(name)
	for obj, err := range store.List(ctx, s, prefix, "", EpochKey(name, epoch)) {
		if err != nil {
			return 0, err
		}
		if e := parseEpoch(prefix, obj.Key); e > epoch {
			return e, nil
		}
	}
	return 0, nil
}

// readHint returns the hinted latest epoch, or 0. A missing, unreadable or
// corrupt hint only costs a longer listing, so errors are ignored.
func readHint(ctx context.Context, s store.Store, name string) uint64 {
	rc, _, err := s.Get(ctx, hintKey(name))
	if err != nil {
		return 0
	}
	defer rc.Close()
	dec := json.NewDecoder(io.LimitReader(rc, maxBody))
	dec.DisallowUnknownFields()
	var h hint
	if dec.Decode(&h) != nil || h.Epoch > MaxEpoch {
		return 0
	}
	return h.Epoch
}

// writeHint records epoch as the latest (best effort, unconditional: a hint
// that goes back only costs a longer listing later).
func writeHint(ctx context.Context, s store.Store, name string, epoch uint64) {
	b, _ := json.Marshal(hint{Epoch: epoch})
	_, _ = s.Put(ctx, hintKey(name), bytes.NewReader(b), store.PutOptions{Size: int64(len(b)), ContentType: "application/json"})
}

// attemptEpoch tries once to acquire the epoch lock. from is the epoch to
// list from (0: read the hint object).
//
// A create of epoch N+1 that lands is checked by listing the keys after it:
// if a newer epoch exists, the create was in flight while others created
// N+1, ended it, went past it and cleaned it up, and it landed on the
// emptied key. It is released at once and never returned. If no newer
// epoch exists when the check lists, the key N+1 was never deleted before
// this create (CleanupEpochs deletes an epoch only below a newer one and
// never the newest, so the newest epoch ever created always exists): this
// create is N+1's only life, and any later creator of N+2 must judge it by
// the store's clock. docs/PROTOCOL.md has the argument in full.
func (a *acquirer) attemptEpoch(ctx context.Context, from uint64) (*Epoch, uint64, error) {
	prefix := epochPrefix(a.name)
	race := false
	var lost *observation // the last step's create lost to this epoch
	for step := 0; step < maxSteps; step++ {
		lost = nil
		listedAt := a.o.Clock.Now()
		latest, listed, err := latestEpoch(ctx, a.s, a.name, from)
		if err != nil {
			return nil, from, err
		}
		from = latest
		if latest > 0 {
			obs, err := readLease(ctx, a.s, EpochKey(a.name, latest))
			if errors.Is(err, store.ErrNotExist) {
				continue // it was the latest a moment ago; look again
			}
			if err != nil {
				return nil, from, fmt.Errorf("epoch lock %q: read epoch %d: %w", a.name, latest, err)
			}
			if obs.rec.Token != latest {
				return nil, from, fmt.Errorf("%w %q: holds token %d", ErrCorrupt, EpochKey(a.name, latest), obs.rec.Token)
			}
			if !obs.expired() {
				return nil, from, obs.held(a.name, race)
			}
		}
		if latest >= MaxEpoch {
			return nil, from, fmt.Errorf("epoch lock %q: epochs exhausted", a.name)
		}
		if a.o.Clock.Now().Sub(listedAt) > maxListAge {
			continue // too slow: the listing may be stale; prove it again
		}
		// Epoch latest is proven expired or released (or there is none):
		// create the next one if nobody else has.
		next := latest + 1
		a.key = EpochKey(a.name, next)
		l, obs, exists, werr, err := a.write(ctx, next, store.PutOptions{IfNoneMatch: true})
		if err != nil {
			return nil, from, err
		}
		if l != nil {
			// The create may have been in flight for any time, and landed
			// on a key that others had created, ended and cleaned up
			// meanwhile. Then a higher epoch exists: give this one back.
			newer, err := newerEpoch(ctx, a.s, a.name, next)
			if err != nil {
				if rerr := l.Release(ctx); rerr != nil {
					err = fmt.Errorf("%w; and could not release it, so it expires after its TTL: %v", err, rerr)
				}
				return nil, from, fmt.Errorf("epoch lock %q: created epoch %d but could not check for a newer one: %w", a.name, next, err)
			}
			if newer > 0 {
				_ = l.Release(ctx) // best effort: an epoch below a newer one is never judged
				race = true
				from = newer
				continue
			}
			if listed >= hintEvery {
				writeHint(ctx, a.s, a.name, next)
			}
			return &Epoch{Lease: l, epoch: next}, next, nil
		}
		switch {
		case !exists && !errors.Is(werr, store.ErrPrecondition) && !errors.Is(werr, store.ErrConflict):
			return nil, from, fmt.Errorf("epoch lock %q: create epoch %d: %w", a.name, next, werr)
		case exists:
			race = true // someone else created it first
			from = next
			if parseEpoch(prefix, a.key) != obs.rec.Token {
				return nil, from, fmt.Errorf("%w %q: holds token %d", ErrCorrupt, a.key, obs.rec.Token)
			}
			if !obs.expired() {
				return nil, from, obs.held(a.name, true)
			}
			lost = &obs
		}
	}
	if lost != nil {
		// Others keep creating epochs (and releasing them by the time we
		// look): the lock is in use, as after any lost race.
		return nil, from, lost.held(a.name, true)
	}
	return nil, from, fmt.Errorf("epoch lock %q: acquire: too much contention after %d tries", a.name, maxSteps)
}

// TryAcquireEpoch acquires the epoch lock name if it is free, without
// waiting: it finds the latest epoch N, reads it, and only if N is proven
// expired or released (by the store's clock, as for TryAcquire) creates
// epoch N+1 with a create-if-absent PUT. If N is held it returns a
// *HeldError; if another client created N+1 first, the *HeldError also
// matches ErrRace. The epoch is the fencing token.
//
// Finding N costs 1 GET of the hint object and 1 LIST from the hinted
// epoch on; the listing holds only the epochs created since the hint was
// last written (it is rewritten every 16 epochs), never the whole history.
// A create that lands is followed by 1 LIST of the keys after the new epoch
// (normally only the hint), and given back if a newer epoch exists, as it
// does when the create was in flight while others moved past it. So an
// acquisition costs 1 GET + 1 LIST + 1 GET + 1 PUT + 1 LIST, or 1 GET +
// 1 LIST + 1 PUT + 1 LIST for the first epoch. The single-key lease is
// cheaper; the epoch lock keeps a history of holders.
func TryAcquireEpoch(ctx context.Context, s store.Store, name string, opts Options) (*Epoch, error) {
	a, err := newAcquirer(s, name, "", opts)
	if err != nil {
		return nil, err
	}
	e, _, err := a.attemptEpoch(ctx, 0)
	return e, err
}

// AcquireEpoch acquires the epoch lock name, waiting while it is held
// until ctx is done, with the same backoff as Acquire. Later polls list
// from the latest epoch seen and skip the hint: 1 LIST + 1 GET (+ 1 PUT +
// 1 LIST).
func AcquireEpoch(ctx context.Context, s store.Store, name string, opts Options) (*Epoch, error) {
	a, err := newAcquirer(s, name, "", opts)
	if err != nil {
		return nil, err
	}
	var from uint64
	return poll(ctx, a.o, func(bool) (*Epoch, error) {
		e, f, err := a.attemptEpoch(ctx, from)
		from = f
		return e, err
	})
}

// StatusEpoch reads the latest epoch of the epoch lock name; Info.Token is
// the epoch. If the lock has no epochs, the error matches
// store.ErrNotExist.
func StatusEpoch(ctx context.Context, s store.Store, name string) (Info, error) {
	if err := CheckName(name); err != nil {
		return Info{}, err
	}
	latest, _, err := latestEpoch(ctx, s, name, 0)
	if err != nil {
		return Info{}, err
	}
	if latest == 0 {
		return Info{}, fmt.Errorf("epoch lock %q: status: %w", name, store.Wrap("get", epochPrefix(name), store.ErrNotExist, nil))
	}
	obs, err := readLease(ctx, s, EpochKey(name, latest))
	if err != nil {
		return Info{}, fmt.Errorf("epoch lock %q: status: %w", name, err)
	}
	return obs.info(name), nil
}

// CleanupEpochs deletes the old epochs of the epoch lock name and returns
// how many it deleted. It lists every epoch, reads the server time with a
// HEAD of the latest, and deletes each epoch below the latest whose last
// write is at least olderThan old by the store's clock. The latest epoch is
// always kept, and so is the hint.
//
// An epoch below the latest has ended: its successor was created only
// after it was proven expired or released. Still, a deleted epoch key can
// be created again, by a client that proved its predecessor expired and
// whose create stayed in flight for longer than olderThan. That client
// finds the newer epoch when it lists after its create, and gives the
// recreated one back; it never holds it. olderThan must still be long (an
// hour is a good choice) and at least MinCleanupAge, so that this stays
// rare: acquisition refuses to create an epoch from a listing older than
// MinCleanupAge/4.
func CleanupEpochs(ctx context.Context, s store.Store, name string, olderThan time.Duration) (int, error) {
	if err := CheckName(name); err != nil {
		return 0, err
	}
	if olderThan < MinCleanupAge {
		return 0, fmt.Errorf("%w: olderThan %v is below %v", ErrInvalid, olderThan, MinCleanupAge)
	}
	prefix := epochPrefix(name)
	type entry struct {
		key      string
		epoch    uint64
		modified time.Time
	}
	var all []entry
	var latest uint64
	for obj, err := range store.List(ctx, s, prefix, "", "") {
		if err != nil {
			return 0, fmt.Errorf("epoch lock %q: cleanup: %w", name, err)
		}
		if e := parseEpoch(prefix, obj.Key); e > 0 {
			all = append(all, entry{obj.Key, e, obj.LastModified})
			latest = max(latest, e)
		}
	}
	if len(all) <= 1 {
		return 0, nil
	}
	attrs, err := s.Head(ctx, EpochKey(name, latest))
	if err == nil {
		err = store.CheckServerTime(attrs.ServerTime, store.OpHead, EpochKey(name, latest), "the epochs' ages")
	}
	if err != nil {
		return 0, fmt.Errorf("epoch lock %q: cleanup: %w", name, err)
	}
	var victims []string
	for _, e := range all {
		if e.epoch < latest && !e.modified.IsZero() && attrs.ServerTime.Sub(e.modified) >= olderThan {
			victims = append(victims, e.key)
		}
	}
	if len(victims) == 0 {
		return 0, nil
	}
	if err := s.DeleteMany(ctx, victims); err != nil {
		return 0, fmt.Errorf("epoch lock %q: cleanup: %w", name, err)
	}
	return len(victims), nil
}
