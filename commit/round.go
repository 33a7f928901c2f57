package commit

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/commitptr/commitptr/internal/ctxtime"
)

// followerPatience is how long, in multiples of the time it took to
// publish and list, a writer that is not the first of its round waits for
// the pointer to move before it carries the round itself.
const followerPatience = 12

// roundClock is the clock a group-commit round measures and waits on: the
// machine's, or a test's that it steps.
type roundClock interface {
	Now() time.Time
	// Sleep waits d, or until ctx is done (then it returns ctx's error).
	Sleep(ctx context.Context, d time.Duration) error
}

type machineClock struct{}

func (machineClock) Now() time.Time                                   { return time.Now() }
func (machineClock) Sleep(ctx context.Context, d time.Duration) error { return ctxtime.Sleep(ctx, d) }

// roundAct is what a writer of a round does after a wait.
type roundAct int

const (
	// actCarry lists the round again and carries it.
	actCarry roundAct = iota
	// actPoll reads the pointer: if it moved, the round is settled.
	actPoll
)

// roundTimer is the timing of one writer's round, as a state machine.
// rtt is the time it took to publish its intent and list the round. The
// leader (the writer whose intent was listed first) waits one rtt, so
// that the others publish too, and carries. Every other writer polls:
// first after more than one and at most two rtt (so never before the
// leader carries), then every half to one rtt; once it has waited
// followerPatience rtt, it carries the round itself.
type roundTimer struct {
	rtt    time.Duration
	leader bool
	waited time.Duration
	polls  int
	// jitter returns a duration uniform in [0, n].
	jitter func(n time.Duration) time.Duration
}

func newRoundTimer(rtt time.Duration, leader bool) *roundTimer {
	return &roundTimer{rtt: rtt, leader: leader, jitter: func(n time.Duration) time.Duration { return rand.N(n + 1) }}
}

// next returns how long to wait, and what to do then.
func (r *roundTimer) next() (time.Duration, roundAct) {
	if r.leader {
		return r.rtt, actCarry
	}
	if r.waited >= followerPatience*r.rtt {
		return 0, actCarry
	}
	d := r.rtt/2 + r.jitter(r.rtt/2)
	if r.polls == 0 {
		d = r.rtt + 1 + r.jitter(r.rtt-1)
	}
	r.waited += d
	r.polls++
	return d, actPoll
}
