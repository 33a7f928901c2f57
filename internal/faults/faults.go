// Package faults injects the failures of a real object store into tests, by
// operation kind, drawn with seeded probabilities or aimed by rules:
//
//   - Lost: the request is applied, then the response is lost and the client
//     sees a timeout;
//   - Reset: the request is applied, then the connection is reset;
//   - Refused: the request fails before it is sent;
//   - Internal and SlowDown: a 500 or a throttling answer, not applied;
//   - Conflict: a 409 ConditionalRequestConflict, for conditional writes
//     on S3;
//   - Latency: the request is delayed, then sent;
//   - Held: the request is applied, and its response delayed;
//   - Cut: a GET's response body breaks off with a reset partway through;
//
// and, on a Store only:
//
//   - Retried: the request is applied, its response lost, and it is sent
//     again at once, as an SDK's retry;
//   - Late: a PUT is kept back and fails as Lost; it lands when the test
//     releases it (Store.Release);
//   - Paused: a PUT's body stops partway while the test acts.
//
// One Injector drives an http.RoundTripper per HTTP API (Injector.Transport
// for S3, TransportFor for Cloud Storage and Azure Blob), under which the
// SDKs' own retries stay on, and Stores, store.Store wrappers for the mem
// and fs drivers or any store (Injector.Store), which emulate those
// retries. A retry that follows a lost response to a conditional write
// meets the write it already made and gets a 412: the spurious
// precondition failures that commit and update code must resolve. Rules
// (Injector.Add, Store.Add) aim a fault at the next requests of one
// operation, key and precondition, such as the pointer write or a lease
// renewal, whatever the driver; a rule's Then runs while the fault holds
// the request, so that a test acts at that point: another writer commits,
// a lease changes hands. NewStore gives a store whose faults are its rules
// alone.
//
// The Injector is safe for concurrent use. Its random source is seeded, so a
// single-threaded run is repeatable; under concurrency the sequence of draws
// is the same but which request gets which draw depends on scheduling.
package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/commitptr/commitptr/internal/ctxtime"
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
	// Internal answers 500 without sending the request.
	Internal
	// SlowDown answers the API's throttling response without sending the
	// request: 503 SlowDown on S3, 429 on Cloud Storage, 503 ServerBusy on
	// Azure Blob.
	SlowDown
	// Conflict answers 409 ConditionalRequestConflict without sending the
	// request. Only conditional writes and deletes get it, and only on S3:
	// the other APIs have no such answer.
	Conflict
	// Latency delays the request by up to Config.MaxLatency, then sends it.
	Latency
	// Cut sends a GET and returns its response, but the body breaks off
	// with a connection reset before its end. Only GETs get it.
	Cut
	// Held sends the request and lets the store apply it, then delays the
	// response by up to Config.MaxLatency: others may see the write before
	// its writer hears of it.
	Held
	// Retried sends the request and lets the store apply it, drops the
	// response, and sends the request again at once, as an SDK retries
	// after a lost response: the caller gets the second answer (for a
	// conditional write, a precondition failure against its own write).
	// A Store's requests only get it.
	Retried
	// Late keeps a PUT back and fails it as Lost does: a request held in
	// the network, whose writer gave up on it. Store.Release sends it. A
	// Store's PUTs only get it.
	Late
	// Paused lets the store read Rule.At bytes of a PUT's body, runs the
	// rule's Then, and lets the store read on: a source that changes while
	// it is uploaded. A Store's PUTs only get it.
	Paused
	// NumKinds is the number of kinds.
	NumKinds
)

var kindNames = [NumKinds]string{"lost", "reset", "refused", "500", "503", "409", "latency", "cut", "held", "retried", "late", "paused"}

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

// Cond is the precondition a request carries.
type Cond int

const (
	// AnyCond, in a Rule, matches every precondition. No request has it.
	AnyCond Cond = iota
	// Unconditional is a request without a precondition.
	Unconditional
	// IfNoneMatch is a create, refused if the key exists: If-None-Match: *
	// on S3 and Azure Blob, ifGenerationMatch=0 on Cloud Storage.
	IfNoneMatch
	// IfMatch is a write or delete of one version of the key: If-Match, or
	// ifGenerationMatch of a generation on Cloud Storage.
	IfMatch
)

var condNames = [...]string{"any", "unconditional", "if-none-match", "if-match"}

func (c Cond) String() string {
	if c < 0 || int(c) >= len(condNames) {
		return fmt.Sprintf("cond(%d)", int(c))
	}
	return condNames[c]
}

// Request is what the injector knows of a request: its operation kind, its
// key and its precondition.
type Request struct {
	Op store.Op
	// Key is the object's key, the prefix of a listing, the first key of
	// a multi-object delete on a Store, or "" for a request on the wire
	// that names no key (a multi-object delete, a chunk of an upload
	// session).
	Key  string
	Cond Cond
}

func (r Request) conditional() bool { return r.Cond == IfMatch || r.Cond == IfNoneMatch }

// Rule aims a fault at chosen requests, before any drawn one: the next
// Times requests of operation Op whose key starts with Key (and ends with
// Suffix) and whose precondition is Cond get fault Kind. A request the
// kind cannot strike (Conflict on an unconditional request or off S3, Cut
// off a GET, Retried, Late and Paused on the wire) does not match. Rules
// match in the order they were added.
type Rule struct {
	Op     store.Op
	Key    string // a key prefix; "" matches every key
	Suffix string // a key suffix; "" matches every key
	Cond   Cond   // AnyCond matches every precondition
	Kind   Kind
	// Times is how many requests the rule strikes; 0 means every one.
	Times int
	// Err, on a Store, is the error the caller gets instead of the kind's
	// own *Error, for the kinds that fail the request. A transport answers
	// as its API does, and ignores it.
	Err error
	// At, for Paused, is how many bytes of the body the store reads
	// before Then runs.
	At int64
	// Then, if set, runs while the fault holds the request, and replaces
	// the drawn delay: for Held, Lost, Reset and Retried after the store
	// applied the request and before the client hears back (for Retried,
	// before the request is sent again); for Late once the request is
	// kept back; for Latency before the request is sent; for the kinds
	// that are not sent, before the client hears of the failure; for Cut
	// before the body is returned; for Paused when the store has read At
	// bytes of the body. A Then that blocks holds the request. The
	// caller's context does not cut a Then short, and the request goes on
	// after it as if Then had not run: Latency sends it (with the caller's
	// context, ended or not), Held answers with what the store answered.
	Then func()
}

// Injector decides which requests fail and how, and counts what it injected.
type Injector struct {
	rates      [numOps]Rates
	maxLatency time.Duration
	enabled    atomic.Bool

	mu    sync.Mutex
	rnd   *rand.Rand
	rules []*rule

	seen     [numOps]atomic.Int64
	injected [numOps][NumKinds]atomic.Int64
}

type rule struct {
	Rule
	hits int
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
// state a run left behind. Requests sent while it is off are not counted,
// and rules strike none of them.
func (in *Injector) SetEnabled(on bool) { in.enabled.Store(on) }

// Add installs a rule.
func (in *Injector) Add(r Rule) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rules = append(in.rules, &rule{Rule: r})
}

// Clear removes every rule.
func (in *Injector) Clear() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rules = nil
}

// none is the result of a roll that injects nothing.
const none Kind = -1

// fault is the decision for one request: its kind, and the drawn delay
// or the Then, Err and At of the rule that chose it.
type fault struct {
	kind  Kind
	delay time.Duration
	rule  bool // chosen by a rule, not drawn
	then  func()
	err   error
	at    int64
}

// error returns the error a Store's caller gets for the fault on a
// request of operation op.
func (f fault) error(op store.Op) error {
	if f.err != nil {
		return f.err
	}
	return &Error{Kind: f.kind, Op: op}
}

// wait holds a delayed request or response for the rule's Then (a rule
// without one holds nothing), or else for the drawn delay, which ends
// early, with ctx's error, if ctx does.
func (f fault) wait(ctx context.Context) error {
	switch {
	case f.then != nil:
		f.then()
		return nil
	case f.rule:
		return nil
	}
	return ctxtime.Sleep(ctx, f.delay)
}

// hold runs the rule's Then, if any, for the faults that have no delay.
func (f fault) hold() {
	if f.then != nil {
		f.then()
	}
}

// strikes reports whether kind k can strike request r of protocol p, a
// Store's (onStore) or one on the wire.
func strikes(k Kind, r Request, p Protocol, onStore bool) bool {
	switch k {
	case Conflict:
		return r.conditional() && p == S3
	case Cut:
		return r.Op == store.OpGet
	case Retried:
		return onStore
	case Late, Paused:
		return onStore && r.Op == store.OpPut
	}
	return true
}

// roll decides the fault for request r of protocol p, a Store's (onStore)
// or one on the wire: a matching rule's, or else one drawn by the rates of
// r.Op, with a random delay below MaxLatency.
func (in *Injector) roll(r Request, p Protocol, onStore bool) fault {
	op := r.Op
	if !in.enabled.Load() || int(op) < 0 || int(op) >= numOps {
		return fault{kind: none}
	}
	in.seen[op].Add(1)
	in.mu.Lock()
	for _, ru := range in.rules {
		if ru.Op != op || !strings.HasPrefix(r.Key, ru.Key) || !strings.HasSuffix(r.Key, ru.Suffix) ||
			(ru.Cond != AnyCond && ru.Cond != r.Cond) || (ru.Times > 0 && ru.hits >= ru.Times) || !strikes(ru.Kind, r, p, onStore) {
			continue
		}
		ru.hits++
		in.mu.Unlock()
		in.injected[op][ru.Kind].Add(1)
		return fault{kind: ru.Kind, rule: true, then: ru.Then, err: ru.Err, at: ru.At}
	}
	rates := &in.rates[op]
	if rates.Total() == 0 {
		in.mu.Unlock()
		return fault{kind: none}
	}
	u := in.rnd.Float64()
	lat := time.Duration(in.rnd.Int64N(int64(in.maxLatency)))
	in.mu.Unlock()
	k := none
	for i, pr := range rates {
		if u < pr {
			k = Kind(i)
			break
		}
		u -= pr
	}
	if k == none || !strikes(k, r, p, onStore) {
		return fault{kind: none}
	}
	in.injected[op][k].Add(1)
	return fault{kind: k, delay: lat}
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

// ErrInjected matches (errors.Is) every injected fault, and stands for one
// in the faults a test's own store wrapper injects.
var ErrInjected = errors.New("faults: injected fault")

// Error is an injected transport failure.
type Error struct {
	Kind Kind
	Op   store.Op
}

func (e *Error) Error() string {
	switch e.Kind {
	case Lost:
		return fmt.Sprintf("faults: injected timeout: %s applied, response lost", e.Op)
	case Late:
		return fmt.Sprintf("faults: injected timeout: %s held back, to land later", e.Op)
	case Reset, Cut:
		return fmt.Sprintf("faults: injected connection reset by peer (%s, %s)", e.Op, e.Kind)
	case Refused:
		return fmt.Sprintf("faults: injected connection refused (%s not sent)", e.Op)
	}
	return fmt.Sprintf("faults: injected %s on %s", e.Kind, e.Op)
}

// Is makes errors.Is(err, ErrInjected) true.
func (e *Error) Is(target error) bool { return target == ErrInjected }

// Unwrap returns the system error the fault imitates.
func (e *Error) Unwrap() error {
	switch e.Kind {
	case Lost, Late:
		return os.ErrDeadlineExceeded
	case Reset, Cut:
		return syscall.ECONNRESET
	case Refused:
		return syscall.ECONNREFUSED
	}
	return nil
}

// Timeout reports whether the fault imitates a timeout (net.Error).
func (e *Error) Timeout() bool { return e.Kind == Lost || e.Kind == Late }

// Temporary reports true: every injected failure is worth a retry.
func (e *Error) Temporary() bool { return true }

// IsInjected reports whether err is, or wraps, an injected fault.
func IsInjected(err error) bool { return errors.Is(err, ErrInjected) }
