// Package faults injects the failures of a real object store into tests, by
// operation kind and with seeded probabilities:
//
//   - Lost: the request is applied, then the response is lost and the client
//     sees a timeout;
//   - Reset: the request is applied, then the connection is reset;
//   - Refused: the request fails before it is sent;
//   - Internal and SlowDown: a 500 InternalError or 503 SlowDown, not applied;
//   - Conflict: a 409 ConditionalRequestConflict, for conditional writes;
//   - Latency: the request is delayed, then sent;
//   - Cut: a GET's response body breaks off with a reset partway through.
//
// One Injector drives both an http.RoundTripper for the s3 and minio drivers
// (Injector.Transport), under which the SDKs' own retries stay on, and a
// store.Store wrapper for the mem and fs drivers (Injector.Store), which
// emulates those retries. A retry that follows a lost response to a
// conditional write meets the write it already made and gets a 412: the
// spurious precondition failures that commit and update code must resolve.
//
// The Injector is safe for concurrent use. Its random source is seeded, so a
// single-threaded run is repeatable; under concurrency the sequence of draws
// is the same but which request gets which draw depends on scheduling.
package faults

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/commitptr/commitptr/store"
)

// Kind is a kind of injected fault.
type Kind int

// The fault kinds.
const (
	// Lost sends the request and lets the store apply it, then drops the
	// response: the client sees a timeout.
	Lost Kind = iota
	// Reset sends the request and lets the store apply it, then fails with
	// a connection reset.
	Reset
	// Refused fails the request before it is sent (connection refused).
	Refused
	// Internal answers 500 InternalError without sending the request.
	Internal
	// SlowDown answers 503 SlowDown without sending the request.
	SlowDown
	// Conflict answers 409 ConditionalRequestConflict without sending the
	// request. Only conditional writes and deletes (If-Match or
	// If-None-Match) get it, as on S3.
	Conflict
	// Latency delays the request by up to Config.MaxLatency, then sends it.
	Latency
	// Cut sends a GET and returns its response, but the body breaks off
	// with a connection reset before its end. Only GETs get it.
	Cut
	// NumKinds is the number of kinds.
	NumKinds
)

var kindNames = [NumKinds]string{"lost", "reset", "refused", "500", "503", "409", "latency", "cut"}

func (k Kind) String() string {
	if k < 0 || k >= NumKinds {
		return fmt.Sprintf("kind(%d)", int(k))
	}
	return kindNames[k]
}

// numOps is the number of store.Op values.
const numOps = int(store.OpList) + 1

// Rates are the probabilities, per request, of each kind of fault. Their
// sum must not exceed 1.
type Rates [NumKinds]float64

// Total returns the probability that a request gets some fault.
func (r Rates) Total() float64 {
	var t float64
	for _, p := range r {
		t += p
	}
	return t
}

// Config configures an Injector.
type Config struct {
	// Seed seeds the random source.
	Seed uint64
	// Rates are the fault probabilities per operation kind. An operation
	// kind without an entry gets no faults.
	Rates map[store.Op]Rates
	// MaxLatency bounds the delay of a Latency fault; the delay is uniform
	// in [0, MaxLatency). Zero means 50 ms.
	MaxLatency time.Duration
}

// Uniform returns rates for every operation kind: r for all of them.
func Uniform(r Rates) map[store.Op]Rates {
	m := make(map[store.Op]Rates, numOps)
	for op := store.Op(0); int(op) < numOps; op++ {
		m[op] = r
	}
	return m
}

// Injector decides which requests fail and how, and counts what it injected.
type Injector struct {
	rates      [numOps]Rates
	maxLatency time.Duration
	enabled    atomic.Bool

	mu  sync.Mutex
	rnd *rand.Rand

	seen     [numOps]atomic.Int64
	injected [numOps][NumKinds]atomic.Int64
}

// New returns an enabled Injector.
func New(cfg Config) *Injector {
	in := &Injector{
		maxLatency: cfg.MaxLatency,
		rnd:        rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
	}
	if in.maxLatency <= 0 {
		in.maxLatency = 50 * time.Millisecond
	}
	for op, r := range cfg.Rates {
		if int(op) >= 0 && int(op) < numOps {
			in.rates[op] = r
		}
	}
	in.enabled.Store(true)
	return in
}

// SetEnabled turns injection on or off, e.g. off while a test verifies the
// state a run left behind. Requests sent while it is off are not counted.
func (in *Injector) SetEnabled(on bool) { in.enabled.Store(on) }

// none is the result of a roll that injects nothing.
const none Kind = -1

// roll decides the fault for one request of kind op. conditional says
// whether the request carries If-Match or If-None-Match. It also returns a
// random duration below MaxLatency.
func (in *Injector) roll(op store.Op, conditional bool) (Kind, time.Duration) {
	if !in.enabled.Load() || int(op) < 0 || int(op) >= numOps {
		return none, 0
	}
	in.seen[op].Add(1)
	r := &in.rates[op]
	if r.Total() == 0 {
		return none, 0
	}
	in.mu.Lock()
	u := in.rnd.Float64()
	lat := time.Duration(in.rnd.Int64N(int64(in.maxLatency)))
	in.mu.Unlock()
	k := none
	for i, p := range r {
		if u < p {
			k = Kind(i)
			break
		}
		u -= p
	}
	switch {
	case k == Conflict && !conditional, k == Cut && op != store.OpGet:
		return none, 0
	case k != none:
		in.injected[op][k].Add(1)
	}
	return k, lat
}

// Counts are the numbers of faults injected, by operation kind and fault
// kind, and the numbers of requests seen by operation kind.
type Counts struct {
	Injected [numOps][NumKinds]int64
	Requests [numOps]int64
}

// Counts returns the counts so far.
func (in *Injector) Counts() Counts {
	var c Counts
	for op := range numOps {
		c.Requests[op] = in.seen[op].Load()
		for k := range NumKinds {
			c.Injected[op][k] = in.injected[op][k].Load()
		}
	}
	return c
}

// Add returns c + d, for summing the counts of several injectors.
func (c Counts) Add(d Counts) Counts {
	for op := range numOps {
		c.Requests[op] += d.Requests[op]
		for k := range NumKinds {
			c.Injected[op][k] += d.Injected[op][k]
		}
	}
	return c
}

// ByKind returns the faults injected per fault kind, over all operations.
func (c Counts) ByKind() [NumKinds]int64 {
	var out [NumKinds]int64
	for op := range numOps {
		for k := range NumKinds {
			out[k] += c.Injected[op][k]
		}
	}
	return out
}

// Total returns the number of faults injected.
func (c Counts) Total() int64 {
	var t int64
	for _, n := range c.ByKind() {
		t += n
	}
	return t
}

// TotalRequests returns the number of requests seen.
func (c Counts) TotalRequests() int64 {
	var t int64
	for _, n := range c.Requests {
		t += n
	}
	return t
}

// String formats the counts, e.g.
// "requests=1200 faults=96 (lost=20 reset=11 ...); put: lost=9 ...".
func (c Counts) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests=%d faults=%d (", c.TotalRequests(), c.Total())
	for k, n := range c.ByKind() {
		if k > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", Kind(k), n)
	}
	b.WriteByte(')')
	for op := range numOps {
		var parts []string
		for k, n := range c.Injected[op] {
			if n > 0 {
				parts = append(parts, fmt.Sprintf("%s=%d", Kind(k), n))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "; %s: %s", store.Op(op), strings.Join(parts, " "))
		}
	}
	return b.String()
}

// Error is an injected transport failure.
type Error struct {
	Kind Kind
	Op   store.Op
}

func (e *Error) Error() string {
	switch e.Kind {
	case Lost:
		return fmt.Sprintf("faults: injected timeout: %s applied, response lost", e.Op)
	case Reset, Cut:
		return fmt.Sprintf("faults: injected connection reset by peer (%s, %s)", e.Op, e.Kind)
	case Refused:
		return fmt.Sprintf("faults: injected connection refused (%s not sent)", e.Op)
	}
	return fmt.Sprintf("faults: injected %s on %s", e.Kind, e.Op)
}

// Unwrap returns the system error the fault imitates.
func (e *Error) Unwrap() error {
	switch e.Kind {
	case Lost:
		return os.ErrDeadlineExceeded
	case Reset, Cut:
		return syscall.ECONNRESET
	case Refused:
		return syscall.ECONNREFUSED
	}
	return nil
}

// Timeout reports whether the fault imitates a timeout (net.Error).
func (e *Error) Timeout() bool { return e.Kind == Lost }

// Temporary reports true: every injected failure is worth a retry.
func (e *Error) Temporary() bool { return true }

// IsInjected reports whether err is, or wraps, an injected fault.
func IsInjected(err error) bool {
	_, ok := errors.AsType[*Error](err)
	return ok
}
