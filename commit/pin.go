package commit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
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
// against the store's clock. Its body (pinBody) names the generation's seq
// and manifest, so that the generation can be opened and verified while
// the pin lives even after the collector removed a link of the chain.
type Pin struct {
	s     store.Store
	Key   string
	TTL   time.Duration
	owner string
	gen   string
	seq   uint64
	sha   string
}

// pinAge is what a pin cannot do without the store's clock.
const pinAge = "the pin's age"

// pinBody is the JSON body of a pin. Pins written before manifest and
// manifest_sha256 were added lack them and still read: their manifest is
// then checked for its generation and seq only.
type pinBody struct {
	Generation     string `json:"generation"`
	Seq            uint64 `json:"seq"`
	Manifest       string `json:"manifest,omitempty"`
	ManifestSHA256 string `json:"manifest_sha256,omitempty"`
	Owner          string `json:"owner,omitempty"`
	TTLMillis      int64  `json:"ttl_ms"`
	RenewID        string `json:"renew_id"`
}

// maxPinBody bounds the pin body a reader accepts.
const maxPinBody = 64 << 10

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
// snapshot's seq, the generation may already be on its way out, unless
// another pin of it was still live after this one was written (every
// collector since has seen that one). Without such a pin, the new pin is
// removed again and Pin returns ErrCollected. A collector re-reads the
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
	p := &Pin{s: s.d.s, Key: PinKey(s.Generation(), ttl, uuid.NewString()), TTL: ttl, owner: owner,
		gen: s.Generation(), seq: s.Seq(), sha: s.sha}
	a, err := p.write(ctx)
	if err != nil {
		return nil, fmt.Errorf("commit: pin generation %s: %w", s.Generation(), err)
	}
	err = store.CheckServerTime(a.ServerTime, store.OpPut, p.Key, pinAge)
	var cur *pointer.Pointer
	var attrs store.Attrs
	if err == nil {
		cur, attrs, err = pointer.Read(ctx, s.d.s)
	}
	if err == nil && s.Seq() < cur.GCFloor {
		var held bool
		if held, err = s.d.heldElsewhere(ctx, p.gen, p.Key, attrs.ServerTime); err == nil && !held {
			err = fmt.Errorf("%w: seq %d is below the collector's floor %d and no other live pin holds it; reopen the dataset", ErrCollected, s.Seq(), cur.GCFloor)
		}
	}
	if err != nil {
		p.Release(context.WithoutCancel(ctx)) //nolint:errcheck // best effort; it expires anyway
		return nil, fmt.Errorf("commit: pin generation %s: %w", s.Generation(), err)
	}
	return p, nil
}

// heldElsewhere reports whether a pin of gen other than the key mine was
// live at now, a store time read after mine was written, or a tag other
// than mine names gen. Such a pin was live from when it was written until
// now (an expired pin cannot be renewed), and such a tag has named gen
// since it was written, so every collector that could have removed gen saw
// it. It costs one LIST of _pin/<gen>/, and when no pin holds gen, one LIST
// of _tag/ and one GET per tag.
func (d *Dataset) heldElsewhere(ctx context.Context, gen, mine string, now time.Time) (bool, error) {
	if now.IsZero() {
		return false, fmt.Errorf("commit: the store did not report its time; pins cannot be judged")
	}
	for o, err := range store.List(ctx, d.s, PinDir+gen+"/", "", "") {
		if err != nil {
			return false, fmt.Errorf("commit: list pins of generation %s: %w", gen, err)
		}
		if pgen, ttl, err := ParsePinKey(o.Key); err == nil && o.Key != mine && pgen == gen && now.Sub(o.LastModified) < ttl {
			return true, nil
		}
	}
	tags, err := d.Tags(ctx)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(tags, func(t *Tag) bool { return t.Generation == gen && TagKey(t.Name) != mine }), nil
}

// write stores the pin's body. A fresh renew id makes every write's body,
// and so its ETag, differ.
func (p *Pin) write(ctx context.Context) (store.Attrs, error) {
	body, _ := json.Marshal(pinBody{
		Generation: p.gen, Seq: p.seq, Manifest: generation.ManifestKey(p.gen), ManifestSHA256: p.sha,
		Owner: p.owner, TTLMillis: p.TTL.Milliseconds(), RenewID: uuid.NewString(),
	})
	return p.s.Put(ctx, p.Key, bytes.NewReader(body), store.PutOptions{Size: int64(len(body)), ContentType: "application/json"})
}

// live returns the pin's attributes if it exists and has not expired by
// the store's clock, and an error matching ErrCollected otherwise.
func (p *Pin) live(ctx context.Context) (store.Attrs, error) {
	a, err := p.s.Head(ctx, p.Key)
	if errors.Is(err, store.ErrNotExist) {
		return a, fmt.Errorf("%w: pin %q is gone", ErrCollected, p.Key)
	}
	if err == nil {
		err = store.CheckServerTime(a.ServerTime, store.OpHead, p.Key, pinAge)
	}
	if err != nil {
		return a, fmt.Errorf("commit: read pin %q: %w", p.Key, err)
	}
	if age := a.ServerTime.Sub(a.LastModified); age >= p.TTL {
		return a, fmt.Errorf("%w: pin %q expired %s ago", ErrCollected, p.Key, (age - p.TTL).Round(time.Second))
	}
	return a, nil
}

// Renew extends the pin by its TTL from now. It refuses, with ErrCollected,
// a pin that has already expired by the store's clock or is gone: the
// collector may have acted on it. The same holds when the renewal itself
// lands only after the TTL ran out (a slow request): a collector may have
// listed the pin as expired in between, so Renew removes it again and
// reports ErrCollected; and when the renewal's response has no Date, so
// that nobody can tell. A HEAD without a Date is refused with an error
// matching store.ErrNoServerTime. Its requests go ahead of the store's
// queue (store.Urgent): a renewal is bound by the pin's TTL.
func (p *Pin) Renew(ctx context.Context) error {
	ctx = store.Urgent(ctx)
	a, err := p.live(ctx)
	if err != nil {
		return fmt.Errorf("commit: renew pin: %w", err)
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

// HoldPin names p, a pin of the generation KeepFrom carries files from, as
// what keeps that generation's objects for this commit. The commit is then
// accepted even if the collector's floor has passed that generation (a
// pinned generation below the floor is kept): the pin must be live before
// the pointer write, and Commit proves after the write that it still was,
// so every collector that could have removed those objects before the
// commit saw the pin. Keep the pin until Commit returns.
func (tx *Tx) HoldPin(p *Pin) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.refPin = p
}

// holds reports whether the Tx's pin covers its lowest referenced seq.
func (tx *Tx) holds() bool { return tx.refPin != nil && tx.refPin.seq == tx.refSeq }

// confirmHold runs after a pointer write that landed. If the commit
// referenced a generation below the floor under a pin, the pin must have
// been live until the write: otherwise a collector may have removed
// objects the new generation references.
func (tx *Tx) confirmHold(ctx context.Context, next *pointer.Pointer) error {
	if tx.refSeq == 0 || tx.refSeq >= next.GCFloor || !tx.holds() {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
	defer cancel()
	if _, err := tx.refPin.live(rctx); err != nil {
		return fmt.Errorf("commit: committed seq %d (generation %s), but it references seq %d below the collector's floor %d and its pin could not be proven live after the commit, so objects may have been collected; verify it: %w",
			next.Seq, next.Generation, tx.refSeq, next.GCFloor, err)
	}
	return nil
}

// openPinned finds ref, a seq number or a generation id, among the
// pinned and tagged generations, for OpenAt when the chain from the
// pointer is broken. It costs one LIST of _pin/<gen>/ for a generation id,
// or of _pin/ (one page per 1,000 pins) for a seq, then one GET of a pin
// body per pinned generation tried, and the manifest GET; when no pin
// names ref, one LIST of _tag/ and one GET per tag. The manifest is
// checked against the sha256 the pin or tag recorded. A ref that no pin or
// tag names matches ErrNotFound.
func (d *Dataset) openPinned(ctx context.Context, cur *pointer.Pointer, ref string) (*Snapshot, error) {
	prefix := PinDir
	if generation.Valid(ref) == nil {
		prefix += ref + "/"
	}
	tried := map[string]bool{}
	for o, err := range store.List(ctx, d.s, prefix, "", "") {
		if err != nil {
			return nil, fmt.Errorf("commit: list pins: %w", err)
		}
		gen, _, perr := ParsePinKey(o.Key)
		if perr != nil || tried[gen] {
			continue
		}
		b, err := readPinBody(ctx, d.s, o.Key)
		if errors.Is(err, store.ErrNotExist) {
			continue // released since the listing; another pin may hold gen
		}
		if err != nil {
			return nil, err
		}
		tried[gen] = true
		if b.Generation != gen || (gen != ref && strconv.FormatUint(b.Seq, 10) != ref) {
			continue
		}
		m, err := d.loadManifest(ctx, gen, b.ManifestSHA256)
		if err == nil && m.Seq != b.Seq {
			err = fmt.Errorf("%w: manifest of generation %s has seq %d, its pin %q says %d", generation.ErrCorrupt, gen, m.Seq, o.Key, b.Seq)
		}
		if err != nil {
			return nil, fmt.Errorf("commit: pinned generation %s: %w", gen, err)
		}
		return &Snapshot{d: d, Pointer: cur, Manifest: m, sha: b.ManifestSHA256}, nil
	}
	tags, err := d.Tags(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range tags {
		if t.Generation == ref || strconv.FormatUint(t.Seq, 10) == ref {
			return d.openTag(ctx, cur, t.Name)
		}
	}
	return nil, fmt.Errorf("%w: no pin or tag names %s", ErrNotFound, ref)
}

// readPinBody reads and decodes the body of the pin at key.
func readPinBody(ctx context.Context, s store.Store, key string) (*pinBody, error) {
	rc, _, err := s.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("commit: read pin %q: %w", key, err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(io.LimitReader(rc, maxPinBody+1))
	if err != nil {
		return nil, fmt.Errorf("commit: read pin %q: %w", key, err)
	}
	var b pinBody
	if len(raw) > maxPinBody {
		return nil, fmt.Errorf("%w: pin %q is larger than %d bytes", generation.ErrCorrupt, key, maxPinBody)
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("%w: pin %q: %v", generation.ErrCorrupt, key, err)
	}
	return &b, nil
}
