package commit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// PinDir is the key prefix of reader pins.
const PinDir = "_pin/"

// Pin keeps a generation from being collected while it is unexpired. Its
// key is _pin/<gen>/<ttl-ms>-<uuid>: the TTL is in the key so that the
// collector can judge every pin from one listing, as Last-Modified + TTL
// against the store's clock.
type Pin struct {
	s     store.Store
	Key   string
	TTL   time.Duration
	owner string
	seq   uint64
}

// pinAge is what a pin cannot do without the store's clock.
const pinAge = "the pin's age"

// PinKey returns the key of a pin.
func PinKey(gen string, ttl time.Duration, id string) string {
	return PinDir + gen + "/" + strconv.FormatInt(ttl.Milliseconds(), 10) + "-" + id
}

// ParsePinKey returns the generation and TTL a pin key names.
func ParsePinKey(key string) (gen string, ttl time.Duration, err error) {
	rest, ok := strings.CutPrefix(key, PinDir)
	gen, name, ok2 := strings.Cut(rest, "/")
	ms, _, ok3 := strings.Cut(name, "-")
	n, perr := strconv.ParseInt(ms, 10, 64)
	if !ok || !ok2 || !ok3 || perr != nil || n < 0 || generation.Valid(gen) != nil {
		return "", 0, fmt.Errorf("commit: bad pin key %q", key)
	}
	return gen, time.Duration(n) * time.Millisecond, nil
}

// Pin writes a pin for the snapshot's generation, valid for ttl from now in
// the store's clock. Renew it before it expires; Release it when done.
//
// Pin then reads the pointer: if the collector's floor has passed the
// snapshot's seq, the generation may already be on its way out, so the pin
// is removed again and Pin returns ErrCollected. A collector re-reads the
// pins after publishing its floor, so a pin that passed this check is
// honoured. Pin right after opening a snapshot that must live long.
//
// A pin's TTL runs in the store's clock: if the response to its write has
// no Date, the pin is removed again and the error matches
// store.ErrNoServerTime.
func (s *Snapshot) Pin(ctx context.Context, ttl time.Duration, owner string) (*Pin, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("commit: pin ttl must be positive, got %s", ttl)
	}
	p := &Pin{s: s.d.s, Key: PinKey(s.Generation(), ttl, uuid.NewString()), TTL: ttl, owner: owner, seq: s.Seq()}
	a, err := p.write(ctx)
	if err != nil {
		return nil, fmt.Errorf("commit: pin generation %s: %w", s.Generation(), err)
	}
	err = store.CheckServerTime(a.ServerTime, store.OpPut, p.Key, pinAge)
	var cur *pointer.Pointer
	if err == nil {
		cur, _, err = pointer.Read(ctx, s.d.s)
	}
	if err == nil && s.Seq() < cur.GCFloor {
		err = fmt.Errorf("%w: seq %d is below the collector's floor %d; reopen the dataset", ErrCollected, s.Seq(), cur.GCFloor)
	}
	if err != nil {
		p.Release(context.WithoutCancel(ctx)) //nolint:errcheck // best effort; it expires anyway
		return nil, fmt.Errorf("commit: pin generation %s: %w", s.Generation(), err)
	}
	return p, nil
}

// write stores the pin's body. A fresh renew id makes every write's body,
// and so its ETag, differ.
func (p *Pin) write(ctx context.Context) (store.Attrs, error) {
	body, _ := json.Marshal(map[string]any{
		"generation": strings.Split(strings.TrimPrefix(p.Key, PinDir), "/")[0],
		"seq":        p.seq, "owner": p.owner, "ttl_ms": p.TTL.Milliseconds(), "renew_id": uuid.NewString(),
	})
	return p.s.Put(ctx, p.Key, strings.NewReader(string(body)), store.PutOptions{Size: int64(len(body)), ContentType: "application/json"})
}

// Renew extends the pin by its TTL from now. It refuses, with ErrCollected,
// a pin that has already expired by the store's clock or is gone: the
// collector may have acted on it. The same holds when the renewal itself
// lands only after the TTL ran out (a slow request): a collector may have
// listed the pin as expired in between, so Renew removes it again and
// reports ErrCollected; and when the renewal's response has no Date, so
// that nobody can tell. A HEAD without a Date is refused with an error
// matching store.ErrNoServerTime.
func (p *Pin) Renew(ctx context.Context) error {
	a, err := p.s.Head(ctx, p.Key)
	if errors.Is(err, store.ErrNotExist) {
		return fmt.Errorf("%w: pin %q is gone", ErrCollected, p.Key)
	}
	if err == nil {
		err = store.CheckServerTime(a.ServerTime, store.OpHead, p.Key, pinAge)
	}
	if err != nil {
		return fmt.Errorf("commit: renew pin: %w", err)
	}
	if age := a.ServerTime.Sub(a.LastModified); age >= p.TTL {
		return fmt.Errorf("%w: pin %q expired %s ago", ErrCollected, p.Key, (age - p.TTL).Round(time.Second))
	}
	w, err := p.write(ctx)
	if err != nil {
		return fmt.Errorf("commit: renew pin: %w", err)
	}
	// A renewal that may have landed late is treated as one that did.
	late := w.ServerTime.Sub(a.LastModified)
	unknown := store.CheckServerTime(w.ServerTime, store.OpPut, p.Key, "whether the renewal landed within the pin's TTL")
	if unknown != nil || late >= p.TTL {
		p.Release(context.WithoutCancel(ctx)) //nolint:errcheck // best effort; it expires anyway
		if unknown != nil {
			return fmt.Errorf("%w: pin %q: %w", ErrCollected, p.Key, unknown)
		}
		return fmt.Errorf("%w: the renewal of pin %q landed %s after it was written, past its %s TTL", ErrCollected, p.Key, late.Round(time.Millisecond), p.TTL)
	}
	return nil
}

// Release deletes the pin.
func (p *Pin) Release(ctx context.Context) error {
	return p.s.Delete(ctx, p.Key, store.DeleteOptions{})
}
