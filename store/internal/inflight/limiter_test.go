package inflight

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// state is the Limiter's bookkeeping.
func (l *Limiter) state() (inFlight, waiting int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight, len(l.queue)
}

// waitFor polls until cond holds, for at most a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLimiterKeepsRequestsWithinTheWindow: many requests with random
// outcomes; none is let through while the window is full, and at the end
// none is counted in flight or waiting.
func TestLimiterKeepsRequestsWithinTheWindow(t *testing.T) {
	for _, l := range []*Limiter{New(Params{Initial: 4, Min: 1, Max: 12, Shrink: 0.5}), Pinned(3)} {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 400 {
			wg.Go(func() {
				s, err := l.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				n, _ := l.state()
				if limit := l.Limit(); n > l.p.Max {
					t.Errorf("%d in flight, above the most the window allows (%d; limit now %d)", n, l.p.Max, limit)
				}
				mu.Unlock()
				s.Done(Outcome{Signal: Signal(i % 3)})
			})
		}
		wg.Wait()
		if n, q := l.state(); n != 0 || q != 0 {
			t.Fatalf("after every request: %d in flight, %d waiting", n, q)
		}
	}
}

// TestLimiterLetsTheFullWindowThroughAndNoMore: with a window of n, n
// requests are let through at once and the next waits until one is done.
func TestLimiterLetsTheFullWindowThroughAndNoMore(t *testing.T) {
	l := Pinned(3)
	var slots []*Slot
	for range 3 {
		s, err := l.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		slots = append(slots, s)
	}
	got := make(chan *Slot)
	go func() {
		s, err := l.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	waitFor(t, "the fourth request waits", func() bool { _, q := l.state(); return q == 1 })
	select {
	case <-got:
		t.Fatal("a fourth request went through a full window of 3")
	default:
	}
	slots[1].Done(Outcome{Signal: Answered})
	(<-got).Done(Outcome{Signal: Answered})
	slots[0].Done(Outcome{Signal: Answered})
	slots[2].Done(Outcome{Signal: Answered})
	if n, q := l.state(); n != 0 || q != 0 {
		t.Fatalf("%d in flight, %d waiting", n, q)
	}
}

// TestLimiterServesWaitersInOrder: waiters are let through in the order
// they came.
func TestLimiterServesWaitersInOrder(t *testing.T) {
	l := Pinned(1)
	first, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 5)
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			s, err := l.Acquire(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			order <- i
			s.Done(Outcome{Signal: Answered})
		})
		waitFor(t, "the waiter queues", func() bool { _, q := l.state(); return q == i+1 })
	}
	first.Done(Outcome{Signal: Answered})
	wg.Wait()
	close(order)
	want := 0
	for i := range order {
		if i != want {
			t.Fatalf("waiter %d went through as number %d", i, want)
		}
		want++
	}
}

// TestCancelledWaiterGivesUpItsPlace: a waiter whose context ends leaves
// the queue, or passes on the place it was given meanwhile; either way
// the next waiter goes through and nothing stays counted.
func TestCancelledWaiterGivesUpItsPlace(t *testing.T) {
	for trial := range 200 {
		l := Pinned(1)
		held, err := l.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		first := make(chan error, 1)
		go func() {
			s, err := l.Acquire(ctx)
			if err == nil {
				s.Done(Outcome{Signal: Answered})
			}
			first <- err
		}()
		waitFor(t, "the first waiter queues", func() bool { _, q := l.state(); return q == 1 })
		second := make(chan *Slot, 1)
		go func() {
			s, err := l.Acquire(context.Background())
			if err != nil {
				t.Error(err)
			}
			second <- s
		}()
		waitFor(t, "the second waiter queues", func() bool { _, q := l.state(); return q == 2 })
		// The first waiter gives up before the place frees, or both
		// happen at once and it may see its turn or its cancellation
		// first.
		switch trial % 3 {
		case 0:
			cancel()
			if err := <-first; !errors.Is(err, context.Canceled) {
				t.Fatalf("a waiter that gave up: %v", err)
			}
			held.Done(Outcome{Signal: Answered})
		case 1:
			cancel()
			held.Done(Outcome{Signal: Answered})
		case 2:
			held.Done(Outcome{Signal: Answered})
			cancel()
		}
		if trial%3 != 0 {
			if err := <-first; err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
		}
		select {
		case s := <-second:
			s.Done(Outcome{Signal: Answered})
		case <-time.After(time.Minute):
			n, q := l.state()
			t.Fatalf("trial %d: the next waiter never went through (%d in flight, %d waiting)", trial, n, q)
		}
		if n, q := l.state(); n != 0 || q != 0 {
			t.Fatalf("trial %d: %d in flight, %d waiting", trial, n, q)
		}
	}
}

// TestDoneCountsOnce: a second Done of a slot changes nothing.
func TestDoneCountsOnce(t *testing.T) {
	l := New(Params{Initial: 4, Min: 1, Max: 8, Shrink: 0.5})
	a, _ := l.Acquire(context.Background())
	b, _ := l.Acquire(context.Background())
	a.Done(Outcome{Signal: Throttled})
	a.Done(Outcome{Signal: Throttled})
	if n, _ := l.state(); n != 1 || l.Limit() != 2 {
		t.Fatalf("after a throttle reported twice: %d in flight, limit %d; want 1 and 2", n, l.Limit())
	}
	b.Done(Outcome{Signal: Unknown})
}

// TestPinnedLimiterIgnoresOutcomes: throttles and answers leave a pinned
// window where it was set.
func TestPinnedLimiterIgnoresOutcomes(t *testing.T) {
	l := Pinned(5)
	for i := range 100 {
		s, _ := l.Acquire(context.Background())
		s.Done(Outcome{Signal: Signal(i % 3)})
	}
	if l.Limit() != 5 {
		t.Fatalf("a pinned window of 5 is now %d", l.Limit())
	}
}

// TestLimiterSettlesAtTheServiceRate simulates, in virtual time, a
// client with more work than the window, requests that take a round trip
// of 0.5 to 1.5 units, and a service that answers k requests per unit
// (a token bucket) and throttles the others. The window settles near k:
// about one request in k+1 is throttled, and the limit averages near k.
func TestLimiterSettlesAtTheServiceRate(t *testing.T) {
	for _, k := range []int{4, 40, 200} {
		l := New(Adaptive)
		r := rand.New(rand.NewPCG(uint64(k), 4))
		type request struct {
			s       *Slot
			ends    float64
			refused bool
		}
		var pending []request // in flight, in no order
		now, tokens, last := 0.0, float64(k), 0.0
		var answered, throttled, limits, samples int
		for sent := 0; sent < 200*k; {
			// Send while the window has room; the service judges each
			// request as it arrives.
			for {
				if n, _ := l.state(); n >= l.Limit() {
					break
				}
				s, err := l.Acquire(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				sent++
				tokens = min(tokens+(now-last)*float64(k), float64(k))
				last = now
				refused := tokens < 1
				if !refused {
					tokens--
				}
				pending = append(pending, request{s: s, ends: now + 0.5 + r.Float64(), refused: refused})
			}
			if sent > 20*k {
				limits += l.Limit()
				samples++
			}
			next := 0
			for i, p := range pending {
				if p.ends < pending[next].ends {
					next = i
				}
			}
			p := pending[next]
			pending = append(pending[:next], pending[next+1:]...)
			now = p.ends
			if p.refused {
				throttled++
				p.s.Done(Outcome{Signal: Throttled})
			} else {
				answered++
				p.s.Done(Outcome{Signal: Answered})
			}
		}
		// A window near k grows by one per round trip and is throttled
		// about once per round trip: about one request in k+1.
		if frac := float64(throttled) / float64(answered+throttled); frac > 1.5/float64(k+1) {
			t.Errorf("k=%d: %d answered, %d throttled: the window did not settle at the service's rate", k, answered, throttled)
		}
		if mean := float64(limits) / float64(samples); mean < float64(k)*0.8 || mean > float64(k)*1.2+1 {
			t.Errorf("k=%d: the limit averaged %.1f, want it near the service's rate", k, mean)
		} else {
			t.Logf("k=%d: limit %.1f on average, %d answered, %d throttled", k, mean, answered, throttled)
		}
	}
}

// TestForPinsEveryPositiveNumber: --transfers N pins the window at N, and
// 0 adapts it.
func TestForPinsEveryPositiveNumber(t *testing.T) {
	for _, n := range []int{1, 2, 300} {
		if l := For(n); l.Limit() != n || l.p.Max != n {
			t.Fatalf("For(%d): limit %d, max %d", n, l.Limit(), l.p.Max)
		}
	}
	if l := For(0); l.Limit() != Adaptive.Initial || l.p.Max != Adaptive.Max {
		t.Fatalf("For(0): limit %d, max %d", l.Limit(), l.p.Max)
	}
}

// TestWindowKeepsAtLeastOneRequest: Params without Min or Initial still let
// a request through, before and after a throttle.
func TestWindowKeepsAtLeastOneRequest(t *testing.T) {
	l := New(Params{Max: 8, Shrink: 0.5})
	for _, sig := range []Signal{Throttled, Throttled, Answered} {
		if l.Limit() < 1 {
			t.Fatalf("limit %d: nothing can be sent", l.Limit())
		}
		s, err := l.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		s.Done(Outcome{Signal: sig})
	}
}
