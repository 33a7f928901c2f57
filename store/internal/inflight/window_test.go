package inflight

import (
	"math/rand/v2"
	"testing"
	"time"
)

// randomParams draws Params that New would accept as they are.
func randomParams(r *rand.Rand) Params {
	lo := 1 + r.IntN(8)
	hi := lo + r.IntN(300)
	p := Params{Initial: lo + r.IntN(hi-lo+1), Min: lo, Max: hi, Shrink: 0.1 + 0.85*r.Float64()}
	if r.IntN(3) > 0 {
		p.Tolerance = 1 + 3*r.Float64()
		p.Slack = time.Duration(r.IntN(5)) * time.Millisecond
	}
	return p
}

// randomStep draws an outcome, with a latency (not known one time in
// four, as 0 or less), of a request sent in the window w or in an earlier
// epoch.
func randomStep(r *rand.Rand, w Window) (Outcome, Sent) {
	o := Outcome{Signal: Signal(r.IntN(3)), Kind: Kind(r.IntN(int(kinds)))}
	if r.IntN(4) > 0 {
		o.Latency = time.Duration(1 + r.IntN(100_000_000))
	} else {
		o.Latency = -time.Duration(r.IntN(2))
	}
	sent := Sent{Epoch: w.Epoch, InFlight: 1 + r.IntN(w.Limit()+1)}
	if w.Epoch > 0 && r.IntN(3) == 0 {
		sent.Epoch = uint64(r.IntN(int(w.Epoch)))
	}
	return o, sent
}

// TestWindowRules checks every rule of Next over random walks: the window
// stays within its bounds; answers never shrink it and grow it by at most
// 1 (in slow start) or 1/Size (after a throttle), and only when the window
// was in use and the answer was not slow for its kind; the fastest latency
// of a kind is the lowest an answer of that kind had; throttles never grow it and shrink it once per
// epoch; unknown outcomes change nothing.
func TestWindowRules(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for walk := range 2000 {
		p := randomParams(r)
		w := Start(p)
		for step := range 200 {
			o, sent := randomStep(r, w)
			n := w.Next(o, sent, p)
			fail := func(why string) {
				t.Fatalf("walk %d step %d, %+v: %+v of %+v in %+v gives %+v: %s", walk, step, p, o, sent, w, n, why)
			}
			if n.Size < float64(p.Min) || n.Size > float64(p.Max) {
				fail("out of bounds")
			}
			switch o.Signal {
			case Unknown:
				if n != w {
					fail("an unknown outcome changed the window")
				}
			case Answered:
				used := 2*sent.InFlight >= w.Limit()
				fastest := w.Fastest
				if o.Latency > 0 && (fastest[o.Kind] == 0 || o.Latency < fastest[o.Kind]) {
					fastest[o.Kind] = o.Latency
				}
				slow := p.Tolerance > 0 && float64(o.Latency) > p.Tolerance*float64(fastest[o.Kind])+float64(p.Slack)
				switch {
				case n.Fastest != fastest:
					fail("the fastest latency of each kind is not the lowest an answer of that kind had")
				case n.Epoch != w.Epoch || n.Threshold != w.Threshold:
					fail("an answer changed the epoch or the threshold")
				case !used && n.Size != w.Size:
					fail("an answer from a window not in use changed its size")
				case slow && n.Size != w.Size:
					fail("a slow answer changed the size")
				case n.Size < w.Size:
					fail("an answer shrank the window")
				case w.Size < w.Threshold && used && !slow && n.Size != min(w.Size+1, float64(p.Max)):
					fail("slow start grows by one per answer")
				case w.Size >= w.Threshold && n.Size > w.Size+1/w.Size+1e-9:
					fail("after a throttle an answer grows by at most 1/Size")
				}
			case Throttled:
				switch {
				case n.Fastest != w.Fastest:
					fail("a throttle changed the fastest latency")
				case n.Size > w.Size:
					fail("a throttle grew the window")
				case sent.Epoch != w.Epoch && n != w:
					fail("a throttle from a request sent before the last shrink changed the window")
				case sent.Epoch == w.Epoch && n.Epoch != w.Epoch+1:
					fail("a throttle did not start a new epoch")
				case sent.Epoch == w.Epoch && n.Size != max(w.Size*p.Shrink, float64(p.Min)):
					fail("a throttle shrinks by Shrink, to no less than Min")
				case sent.Epoch == w.Epoch && n.Threshold != n.Size:
					fail("a throttle ends the slow start at the new size")
				}
			}
			w = n
		}
	}
}

// TestBurstOfThrottlesShrinksOnce: every request of a full window is
// throttled; the window shrinks by Shrink once, not once per request.
func TestBurstOfThrottlesShrinksOnce(t *testing.T) {
	p := Adaptive
	w := Start(p)
	sent := Sent{Epoch: w.Epoch, InFlight: w.Limit()}
	for range w.Limit() {
		w = w.Next(Outcome{Signal: Throttled}, sent, p)
	}
	if want := float64(p.Initial) * p.Shrink; w.Size != want || w.Epoch != 1 {
		t.Fatalf("after a burst of %d throttles: %+v, want size %v in epoch 1", p.Initial, w, want)
	}
}

// TestSlowStartDoublesPerRoundTrip: while nothing throttles, a window
// whose every request is answered doubles each round trip, up to Max.
func TestSlowStartDoublesPerRoundTrip(t *testing.T) {
	p := Adaptive
	w := Start(p)
	for trip := 1; w.Limit() < p.Max; trip++ {
		before := w.Limit()
		for range before {
			w = w.Next(Outcome{Signal: Answered}, Sent{Epoch: w.Epoch, InFlight: before}, p)
		}
		if want := min(2*before, p.Max); w.Limit() != want {
			t.Fatalf("round trip %d: limit %d, want %d", trip, w.Limit(), want)
		}
	}
}

// TestAfterThrottleGrowsOnePerRoundTrip: past the first throttle, a full
// window of answers grows the limit by about one.
func TestAfterThrottleGrowsOnePerRoundTrip(t *testing.T) {
	p := Adaptive
	w := Start(p)
	w = w.Next(Outcome{Signal: Throttled}, Sent{Epoch: 0, InFlight: 16}, p)
	for trip := range 20 {
		before := w.Size
		n := w.Limit()
		for range n {
			w = w.Next(Outcome{Signal: Answered}, Sent{Epoch: w.Epoch, InFlight: n}, p)
		}
		if grown := w.Size - before; grown < 0.9 || grown > 1.1 {
			t.Fatalf("round trip %d: the window grew by %.3f from %.3f, want about 1", trip, grown, before)
		}
	}
}

// TestWindowHoldsWhileAnswersSlowDown: in slow start, a full window of
// writes answered in 20 ms doubles it; writes at 50 ms (more than twice
// the fastest write, plus the slack) hold it, whatever reads take; writes
// at 42 ms grow it again, and a throttle still shrinks it.
func TestWindowHoldsWhileAnswersSlowDown(t *testing.T) {
	p := Adaptive
	w := Start(p)
	trip := func(latency time.Duration) {
		n := w.Limit()
		for range n {
			w = w.Next(Outcome{Signal: Answered, Kind: Write, Latency: latency}, Sent{Epoch: w.Epoch, InFlight: n}, p)
		}
	}
	trip(20 * time.Millisecond)
	if w.Limit() != 2*p.Initial || w.Fastest[Write] != 20*time.Millisecond {
		t.Fatalf("after a round trip at 20 ms: %+v, want limit %d and fastest 20ms", w, 2*p.Initial)
	}
	// A read answered in 5 ms sets the bar of reads only.
	w = w.Next(Outcome{Signal: Answered, Kind: Read, Latency: 5 * time.Millisecond}, Sent{Epoch: w.Epoch, InFlight: 1}, p)
	held := w
	trip(50 * time.Millisecond)
	if w != held {
		t.Fatalf("answers at 50 ms changed the window: %+v, was %+v", w, held)
	}
	trip(42 * time.Millisecond) // twice the fastest, plus 2 ms: not yet slow
	if w.Limit() != 4*p.Initial {
		t.Fatalf("answers at 42 ms: limit %d, want %d", w.Limit(), 4*p.Initial)
	}
	w = w.Next(Outcome{Signal: Throttled}, Sent{Epoch: w.Epoch, InFlight: w.Limit()}, p)
	if want := float64(4*p.Initial) * p.Shrink; w.Size != want {
		t.Fatalf("a throttle while slow: size %v, want %v", w.Size, want)
	}
}
