package lease

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// Dir is the key prefix under which leases live, relative to the dataset.
const Dir = "_lease/"

// Defaults of Options.
const (
	DefaultTTL     = 30 * time.Second
	DefaultPollMin = 200 * time.Millisecond
	DefaultPollMax = 5 * time.Second
)

// DefaultMargin returns the Margin of a lease whose Options leave it zero:
// TTL/10.
func DefaultMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// ReleaseTimeout bounds Release. Release runs on a fresh context (it keeps
// the caller's values but not its cancellation), so that a lease can be
// released after the work that held it was cancelled.
const ReleaseTimeout = 5 * time.Second

// clockResolution is added to every TTL when judging expiry: HTTP dates
// (Last-Modified, Date) have whole-second resolution, so a difference of
// two of them can understate the elapsed time by up to one second.
const clockResolution = time.Second

// maxBody caps how much of a lease object is read; a real one is ~150 bytes.
const maxBody = 64 << 10

// maxTTL caps the TTL a lease object may declare.
const maxTTL = 366 * 24 * time.Hour

// maxOwner caps the length of an owner name.
const maxOwner = 256

// maxName caps the length of a lease name.
const maxName = 128

// Errors. Match them with errors.Is.
var (
	// ErrHeld: the lease is held by someone else. Errors of this class are
	// *HeldError values naming the holder and, in server time, until when.
	ErrHeld = errors.New("lease: held")
	// ErrRace: the lease had expired, but another client took it over
	// first. Such an error is a *HeldError with Race set, and it also
	// matches ErrHeld; trying again is reasonable.
	ErrRace = errors.New("lease: lost the takeover race")
	// ErrLost: the lease is no longer held. It was taken over, its
	// holder's own deadline passed, or it was released.
	ErrLost = errors.New("lease: lost")
	// ErrCorrupt: the lease object does not hold a valid lease. A corrupt
	// lease is never treated as expired; an operator must look at it.
	ErrCorrupt = errors.New("lease: corrupt lease object")
	// ErrInvalid: a bad name or bad options.
	ErrInvalid = errors.New("lease: invalid argument")
)

// HeldError reports a lease held by someone else.
type HeldError struct {
	Name  string
	Owner string
	// Token is the holder's fencing token (the epoch, for an epoch lock).
	Token uint64
	// Until is the server time at which the lease becomes expired unless
	// it is renewed: its Last-Modified + TTL + 1 s.
	Until time.Time
	// ServerTime is the store's clock when the lease was read. Until minus
	// ServerTime is how long the lease has left, whatever the local clock.
	ServerTime time.Time
	// Race is set when the lease had expired and another client took it
	// over between our read and our write.
	Race bool
}

func (e *HeldError) Error() string {
	verb := "held"
	if e.Race {
		verb = "taken over first"
	}
	return fmt.Sprintf("lease: %q %s by %s (token %d) until %s (server time)",
		e.Name, verb, e.Owner, e.Token, e.Until.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrHeld) true, and errors.Is(err, ErrRace) true
// when Race is set.
func (e *HeldError) Is(target error) bool {
	return target == ErrHeld || (e.Race && target == ErrRace)
}

// Clock is the holder's local clock. It must be monotonic: only
// differences of its readings matter, never its absolute value. A lease
// uses it for its own deadline and timers only; whether anyone's lease has
// expired is always judged by the store's clock.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// systemClock is the real clock. time.Now carries a monotonic reading, so
// differences ignore wall-clock steps.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configure a lease. The zero value gives the defaults.
type Options struct {
	// TTL is how long the lease lives without a renewal; default 30 s. It
	// is truncated to whole milliseconds. Others may take the lease over
	// once the store's clock says TTL + 1 s passed since its last write.
	TTL time.Duration
	// Owner names the holder in the lease object (informational, at most
	// 256 bytes); default "<hostname>:<pid>".
	Owner string
	// Margin is how long before the end of the TTL the holder stops
	// believing it holds the lease: its deadline is the local time at
	// which its last successful acquire or renew was sent, + TTL − Margin.
	// It absorbs rate differences between the local and the store's
	// clock. Default TTL/10; it must be less than TTL.
	Margin time.Duration
	// Clock is the local monotonic clock; default the real one. It is used
	// only for the holder's own deadline and for timers.
	Clock Clock
	// PollMin and PollMax bound the jittered exponential backoff between
	// polls of a blocking Acquire; defaults 200 ms and 5 s. PollMin is also
	// the cap on the poll rate.
	PollMin, PollMax time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	o.TTL = o.TTL.Truncate(time.Millisecond)
	if o.TTL <= 0 || o.TTL > maxTTL {
		return o, fmt.Errorf("%w: TTL %v is not between 1ms and %v", ErrInvalid, o.TTL, maxTTL)
	}
	if o.Margin == 0 {
		o.Margin = DefaultMargin(o.TTL)
	}
	if o.Margin < 0 || o.Margin >= o.TTL {
		return o, fmt.Errorf("%w: margin %v is not between 0 and the TTL %v", ErrInvalid, o.Margin, o.TTL)
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = host + ":" + strconv.Itoa(os.Getpid())
	}
	if len(o.Owner) > maxOwner {
		return o, fmt.Errorf("%w: owner is longer than %d bytes", ErrInvalid, maxOwner)
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	if o.PollMin <= 0 {
		o.PollMin = DefaultPollMin
	}
	if o.PollMax <= 0 {
		o.PollMax = DefaultPollMax
	}
	o.PollMax = max(o.PollMax, o.PollMin)
	return o, nil
}

// CheckName reports whether name is a valid lease name: 1 to 128 bytes of
// ASCII letters, digits, '.', '_' and '-', starting with a letter or digit.
// Names never contain '/', so every lease has a key of its own.
func CheckName(name string) error {
	if name == "" || len(name) > maxName {
		return fmt.Errorf("%w: lease name %q must have 1 to %d bytes", ErrInvalid, name, maxName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return fmt.Errorf("%w: lease name %q: want letters, digits, '.', '_' and '-', starting with a letter or digit", ErrInvalid, name)
		}
	}
	return nil
}

// Key returns the key of the single-key lease name: Dir + name. It does
// not validate name; see CheckName.
func Key(name string) string { return Dir + name }

// record is the JSON body of a lease object (single-key and epoch alike).
type record struct {
	Owner    string `json:"owner"`
	Token    uint64 `json:"token"`
	TTLms    int64  `json:"ttl_ms"`
	Released bool   `json:"released"`
	WriteID  string `json:"write_id"`
}

func (r record) encode() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // a struct of strings, ints and bools always encodes
	}
	return b
}

// decodeRecord reads a lease body strictly: at most maxBody bytes, one JSON
// object with known fields only, and sane values.
func decodeRecord(key string, r io.Reader) (record, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxBody+1))
	if err != nil {
		return record{}, fmt.Errorf("read lease %q: %w", key, err)
	}
	if len(data) > maxBody {
		return record{}, fmt.Errorf("%w %q: larger than %d bytes", ErrCorrupt, key, maxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var rec record
	if err := dec.Decode(&rec); err != nil {
		return record{}, fmt.Errorf("%w %q: %v", ErrCorrupt, key, err)
	}
	if dec.More() {
		return record{}, fmt.Errorf("%w %q: data after the JSON object", ErrCorrupt, key)
	}
	switch {
	case rec.Owner == "" || len(rec.Owner) > maxOwner:
		return record{}, fmt.Errorf("%w %q: bad owner", ErrCorrupt, key)
	case rec.Token == 0:
		return record{}, fmt.Errorf("%w %q: token is missing or zero", ErrCorrupt, key)
	case rec.TTLms <= 0 || time.Duration(rec.TTLms)*time.Millisecond > maxTTL:
		return record{}, fmt.Errorf("%w %q: ttl_ms %d is out of range", ErrCorrupt, key, rec.TTLms)
	case rec.WriteID == "":
		return record{}, fmt.Errorf("%w %q: write_id is missing", ErrCorrupt, key)
	}
	return rec, nil
}

// newWriteID returns a random write id. Every write of a lease object
// carries a fresh one, so that bodies never repeat (S3 ETags are body
// MD5s: a repeated body would bring back an old ETag) and so that the
// writer can recognise its own write when it reads the object back.
func newWriteID() string { return rand.Text() }
