package commit

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/store"
)

// PinDir is the key prefix of reader pins.
const PinDir = "_pin/"

// Pin keeps a generation from being collected while it is unexpired. Its
// key is _pin/<gen>/<ttl-ms>-<uuid>: the TTL is in the key so that the
// collector can judge every pin from one listing, as Last-Modified + TTL
// against the store's clock.
type Pin struct {
	s   store.Store
	Key string
	TTL time.Duration
}

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
func (s *Snapshot) Pin(ctx context.Context, ttl time.Duration, owner string) (*Pin, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("commit: pin ttl must be positive, got %s", ttl)
	}
	p := &Pin{s: s.d.s, Key: PinKey(s.Generation(), ttl, uuid.NewString()), TTL: ttl}
	body, _ := json.Marshal(map[string]any{"generation": s.Generation(), "seq": s.Seq(), "owner": owner, "ttl_ms": ttl.Milliseconds()})
	if _, err := s.d.s.Put(ctx, p.Key, strings.NewReader(string(body)), store.PutOptions{Size: int64(len(body)), ContentType: "application/json"}); err != nil {
		return nil, fmt.Errorf("commit: pin generation %s: %w", s.Generation(), err)
	}
	return p, nil
}

// Renew extends the pin by its TTL from now.
func (p *Pin) Renew(ctx context.Context) error {
	rc, _, err := p.s.Get(ctx, p.Key)
	if err != nil {
		return fmt.Errorf("commit: renew pin: %w", err)
	}
	defer rc.Close()
	if _, err := p.s.Put(ctx, p.Key, rc, store.PutOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("commit: renew pin: %w", err)
	}
	return nil
}

// Release deletes the pin.
func (p *Pin) Release(ctx context.Context) error {
	return p.s.Delete(ctx, p.Key, store.DeleteOptions{})
}
