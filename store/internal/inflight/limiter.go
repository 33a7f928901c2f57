package inflight

import (
	"context"
	"sync"
	"time"

	"github.com/commitptr/commitptr/store"
)

// Adaptive is the Params of an adaptive Limiter: 16 requests at first, as
// many as 256, shrinking to 0.7 of itself on a throttle (CUBIC's factor),
// holding while answers take more than twice the fastest, plus 2 ms.
var Adaptive = Params{Initial: 16, Min: 1, Max: store.MaxTransfers, Shrink: 0.7, Tolerance: 2, Slack: 2 * time.Millisecond}

// Limiter lets requests through while fewer than its window's limit are in
// flight, and queues the others in the order they came. It is safe for
// concurrent use.
type Limiter struct {
	p Params

	mu       sync.Mutex
	w        Window
	inFlight int
	queue    []chan struct{} // waiters, oldest first; a closed one is let through
}

// New returns an adaptive Limiter with Params p.
func New(p Params) *Limiter {
	p.Min = max(p.Min, 1)
	p.Max = max(p.Max, p.Min)
	p.Initial = min(max(p.Initial, p.Min), p.Max)
	return &Limiter{p: p, w: Start(p)}
}

// For returns the Limiter of a store.Config's Transfers: adaptive for 0,
// pinned at n otherwise.
func For(transfers int) *Limiter {
	if transfers > 0 {
		return Pinned(transfers)
	}
	return New(Adaptive)
}

// Pinned returns a Limiter that keeps n requests in flight at most, whatever
// their outcomes (n at least 1): a window whose bounds are both n.
func Pinned(n int) *Limiter {
	n = max(n, 1)
	return New(Params{Initial: n, Min: n, Max: n, Shrink: 1})
}

// Limit is how many requests may be in flight now.
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Limit()
}

// Slot is a request let through; Done ends it.
type Slot struct {
	l    *Limiter
	sent Sent
	once sync.Once
}

// Acquire waits until a request may be sent, or ctx ends.
func (l *Limiter) Acquire(ctx context.Context) (*Slot, error) {
	l.mu.Lock()
	if len(l.queue) == 0 && l.inFlight < l.w.Limit() {
		s := l.admit()
		l.mu.Unlock()
		return s, nil
	}
	ch := make(chan struct{})
	l.queue = append(l.queue, ch)
	l.mu.Unlock()
	select {
	case <-ch:
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.admitted(), nil
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		select {
		case <-ch:
			// Let through meanwhile: pass the place on.
			l.inFlight--
			l.wake()
		default:
			for i, c := range l.queue {
				if c == ch {
					l.queue = append(l.queue[:i], l.queue[i+1:]...)
					break
				}
			}
		}
		return nil, ctx.Err()
	}
}

// admit counts a request in flight and returns its slot; l.mu is held.
func (l *Limiter) admit() *Slot {
	l.inFlight++
	return l.admitted()
}

// admitted returns the slot of a request already counted in flight (wake
// counts a waiter as it lets it through); l.mu is held.
func (l *Limiter) admitted() *Slot {
	return &Slot{l: l, sent: Sent{Epoch: l.w.Epoch, InFlight: l.inFlight}}
}

// wake lets waiters through, oldest first, while the window has room;
// l.mu is held.
func (l *Limiter) wake() {
	for len(l.queue) > 0 && l.inFlight < l.w.Limit() {
		ch := l.queue[0]
		l.queue = l.queue[1:]
		l.inFlight++
		close(ch)
	}
}

// Done ends the request with what its outcome says. Only its first call
// counts.
func (s *Slot) Done(o Outcome) {
	s.once.Do(func() {
		l := s.l
		l.mu.Lock()
		defer l.mu.Unlock()
		l.inFlight--
		l.w = l.w.Next(o, s.sent, l.p)
		l.wake()
	})
}
