// Package inflight owns how many requests a network driver keeps in flight
// to its endpoint. A Limiter holds the requests, data and manifests of
// every caller alike, to one window, which grows while the service answers
// and shrinks when it throttles (503, 429) or fails to answer in time:
// additive increase and multiplicative decrease, as TCP Reno's congestion
// window. A pinned Limiter (rclone's --transfers) keeps its window where it
// is set. Urgent requests (a pointer's, a lease's, a multipart upload's
// start, completion and abort) go out at once, outside the window.
//
// The rule is the pure function Window.Next; Limiter is the shell that
// queues requests, first come first served, and feeds it what each
// request's answer said.
package inflight

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

// Params bound a window.
type Params struct {
	Initial int     // the window before any answer
	Min     int     // it never shrinks below Min (at least 1)
	Max     int     // it never grows above Max
	Shrink  float64 // a throttle multiplies it by Shrink, in (0, 1)
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

// Next is the window after the outcome s of the request r:
//   - Answered grows it, but only if the window was in use: with
//     InFlight at least half the limit. Otherwise the caller, not the
//     window, held the requests back, and the answer proves nothing about
//     a larger window.
//   - Throttled shrinks it by Shrink, to no less than Min, and ends the
//     slow start, unless the window has shrunk since r was sent.
//   - Unknown leaves it as it is.
func (w Window) Next(s Signal, r Sent, p Params) Window {
	switch s {
	case Answered:
		if 2*r.InFlight < w.Limit() {
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
