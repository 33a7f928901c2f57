package commit

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// PinHolder keeps the generations a long-lived reader shows (a mount, a
// gateway) pinned: one pin per generation, held while any caller holds
// the generation, and renewed by Renew, which the reader calls every third
// of the TTL. A pin that cannot be renewed, or was never written, is written
// again at the next renewal; Snapshot.Pin refuses that once the
// collector's floor has passed the generation. Until a pin is written
// (the store refuses it, or is away), the generation is read as any
// reader without a pin reads it: while the collector retains it.
type PinHolder struct {
	ttl   time.Duration
	owner string
	log   *slog.Logger

	mu   sync.Mutex
	held map[string]*heldGen
}

// heldGen is one generation held: its snapshot, how many holds it has,
// and its pin (nil while none is written).
type heldGen struct {
	snap  *Snapshot
	holds int
	pin   *Pin
}

// NewPinHolder returns a holder that writes pins of ttl naming owner,
// and logs to log what it cannot pin, renew or release.
func NewPinHolder(ttl time.Duration, owner string, log *slog.Logger) *PinHolder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PinHolder{ttl: ttl, owner: owner, log: log, held: map[string]*heldGen{}}
}

// Hold adds a hold on snap's generation, and pins it unless it is pinned
// already. Each Hold needs a Drop.
func (h *PinHolder) Hold(ctx context.Context, snap *Snapshot) {
	gen := snap.Generation()
	h.mu.Lock()
	g, ok := h.held[gen]
	if ok {
		g.holds++
		h.mu.Unlock()
		return
	}
	g = &heldGen{snap: snap, holds: 1}
	h.held[gen] = g
	h.mu.Unlock()
	h.pin(ctx, g)
}

// Drop removes a hold on gen, and releases its pin when it was the last.
func (h *PinHolder) Drop(ctx context.Context, gen string) {
	h.mu.Lock()
	g, ok := h.held[gen]
	if !ok {
		h.mu.Unlock()
		return
	}
	g.holds--
	if g.holds > 0 {
		h.mu.Unlock()
		return
	}
	delete(h.held, gen)
	p := g.pin
	g.pin = nil
	h.mu.Unlock()
	h.release(ctx, p)
}

// Pinned reports whether gen is held with a pin written.
func (h *PinHolder) Pinned(gen string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.held[gen]
	return ok && g.pin != nil
}

// Renew renews the pin of every generation held, and pins again each one
// whose pin could not be renewed or was never written. A pin that cannot
// be renewed is let go only once its successor is written: the renewal
// may have failed on the way (a 500, a timeout) while the pin still
// holds the generation.
func (h *PinHolder) Renew(ctx context.Context) {
	h.mu.Lock()
	gens := make([]*heldGen, 0, len(h.held))
	for _, g := range h.held {
		gens = append(gens, g)
	}
	h.mu.Unlock()
	for _, g := range gens {
		h.mu.Lock()
		p := g.pin
		h.mu.Unlock()
		if p == nil {
			h.pin(ctx, g)
			continue
		}
		err := p.Renew(ctx)
		if errors.Is(err, context.Canceled) {
			continue
		}
		if err == nil {
			// Dropped while its renewal was under way, the pin may have
			// been written again after its release.
			if !h.holds(g, p) {
				h.release(ctx, p)
			}
			continue
		}
		h.log.Warn("cannot renew a pin; pinning the generation again", "pin", p.Key, "err", err)
		h.replace(ctx, g, p)
	}
}

// holds reports whether g is held with the pin p.
func (h *PinHolder) holds(g *heldGen, p *Pin) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[g.snap.Generation()] == g && g.pin == p
}

// Close releases every pin and forgets every hold.
func (h *PinHolder) Close(ctx context.Context) error {
	h.mu.Lock()
	var pins []*Pin
	for gen, g := range h.held {
		if g.pin != nil {
			pins = append(pins, g.pin)
			g.pin = nil
		}
		delete(h.held, gen)
	}
	h.mu.Unlock()
	var errs []error
	for _, p := range pins {
		errs = append(errs, p.Release(ctx))
	}
	return errors.Join(errs...)
}

// pin writes a pin for g unless it has one.
func (h *PinHolder) pin(ctx context.Context, g *heldGen) {
	h.mu.Lock()
	has := g.pin != nil
	h.mu.Unlock()
	if !has {
		h.replace(ctx, g, nil)
	}
}

// replace writes a new pin for g. If g is still held with the pin old
// (nil: none), the new pin takes its place and old is released; otherwise
// the new pin is. A failed write leaves old in place.
func (h *PinHolder) replace(ctx context.Context, g *heldGen, old *Pin) {
	// The pin outlives the request that asked for it.
	p, err := g.snap.Pin(context.WithoutCancel(ctx), h.ttl, h.owner)
	if err != nil {
		h.log.Warn("cannot pin a generation; it is read while the collector retains it", "generation", g.snap.Generation(), "seq", g.snap.Seq(), "err", err)
		return
	}
	h.mu.Lock()
	swap := h.held[g.snap.Generation()] == g && g.pin == old
	if swap {
		g.pin = p
	}
	h.mu.Unlock()
	if swap {
		h.release(ctx, old)
	} else {
		h.release(ctx, p)
	}
}

// release deletes a pin, best effort: one left behind expires.
func (h *PinHolder) release(ctx context.Context, p *Pin) {
	if p == nil {
		return
	}
	if err := p.Release(context.WithoutCancel(ctx)); err != nil {
		h.log.Warn("cannot release a pin; it expires by itself", "pin", p.Key, "err", err)
	}
}
