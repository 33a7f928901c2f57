// Package inflight owns how many requests a network driver keeps in flight
// to its endpoint. A Limiter holds the requests, data and manifests of
// every caller alike, to one window, which grows while the service answers
// as fast as it can, holds when its answers slow down, and shrinks when it
// throttles (503, 429) or fails to answer in time: additive increase and
// multiplicative decrease, as TCP Reno's congestion window, held at the
// knee as TCP Vegas holds it. A pinned Limiter (rclone's --transfers)
// keeps its window where it is set. Urgent requests (a pointer's, a
// lease's, a pin's renewal, a multipart upload's start, completion and
// abort) go out at once, outside the window.
//
// The rule is the pure function Window.Next; Limiter is the shell that
// queues requests, first come first served, and feeds it what each
// request's answer said.
package inflight

import "time"

// Signal is what one request's outcome says about the service's load.
type Signal int

const (
	// Unknown says nothing: the caller gave up, or the connection failed
	// before the service could answer.
	Unknown Signal = iota
	// Answered: the service answered, whatever the status, unless it
	// throttled.
	Answered
	// Throttled: the service asked the client to slow down (503, 429), or
	// sent no response within the header timeout.
	Throttled
)

// Kind sorts requests by the work they ask of the service: reads (GET,
// HEAD) and writes (the others) take their own times, so each kind has its
// own fastest latency.
type Kind int

const (
	Read Kind = iota
	Write
	kinds
)

// Outcome is what one request's end says to the window.
type Outcome struct {
	Signal Signal
	Kind   Kind
	// Latency runs from the request's last byte to its answer's first;
	// 0 or less: not known.
	Latency time.Duration
}

// Params bound a window.
type Params struct {
	Initial int     // the window before any answer
	Min     int     // it never shrinks below Min (at least 1)
	Max     int     // it never grows above Max
	Shrink  float64 // a throttle multiplies it by Shrink, in (0, 1)
	// Tolerance, when positive, holds the window while the service's
	// answers slow down: an answer whose latency is more than Tolerance
	// times the fastest of its kind, plus Slack, grows nothing. Requests
	// beyond what the service works on at once only wait in its queue.
	Tolerance float64
	Slack     time.Duration
}

// Window is the state of the rule.
type Window struct {
	// Size is how many requests may be in flight: its integer part counts.
	Size float64
	// Threshold ends the slow start: below it each answer grows Size by 1
	// (doubling it per round trip), at or above it by 1/Size (1 per round
	// trip). The first throttle sets it.
	Threshold float64
	// Epoch counts the shrinks. A request carries the Epoch in which it
	// was sent, so a burst of throttles from requests sent before a shrink
	// shrinks the window once, not once per request.
	Epoch uint64
	// Fastest is the lowest latency of an answer of each kind, 0 before
	// the first.
	Fastest [kinds]time.Duration
}

// Start is the window before any request.
func Start(p Params) Window {
	return Window{Size: float64(p.Initial), Threshold: float64(p.Max)}
}

// Limit is how many requests the window lets be in flight.
func (w Window) Limit() int { return int(w.Size) }

// Sent describes one request when it was let through.
type Sent struct {
	Epoch    uint64 // the window's Epoch then
	InFlight int    // requests in flight with it, itself included
}

// Next is the window after the outcome o of the request r:
//   - Answered lowers the fastest latency of its kind to its own, and
//     grows the window, but only if the window was in use (InFlight at
//     least half the limit: otherwise the caller, not the window, held the
//     requests back, and the answer proves nothing about a larger window)
//     and the answer was not slow (see Params.Tolerance).
//   - Throttled shrinks it by Shrink, to no less than Min, and ends the
//     slow start, unless the window has shrunk since r was sent.
//   - Unknown leaves it as it is.
func (w Window) Next(o Outcome, r Sent, p Params) Window {
	switch o.Signal {
	case Answered:
		fastest := &w.Fastest[o.Kind]
		if o.Latency > 0 && (*fastest == 0 || o.Latency < *fastest) {
			*fastest = o.Latency
		}
		if 2*r.InFlight < w.Limit() || slow(o.Latency, *fastest, p) {
			return w
		}
		if w.Size < w.Threshold {
			w.Size++
		} else {
			w.Size += 1 / w.Size
		}
		w.Size = min(w.Size, float64(p.Max))
	case Throttled:
		if r.Epoch != w.Epoch {
			return w
		}
		w.Size = max(w.Size*p.Shrink, float64(max(p.Min, 1)))
		w.Threshold = w.Size
		w.Epoch++
	}
	return w
}

// slow reports whether an answer after latency says the service's queue
// is growing: more than Tolerance times the fastest of its kind, plus
// Slack.
func slow(latency, fastest time.Duration, p Params) bool {
	return p.Tolerance > 0 && latency > time.Duration(p.Tolerance*float64(fastest))+p.Slack
}
