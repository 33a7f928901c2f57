package commit

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestRoundTimerLeaderCarriesAfterOneRoundTrip: the writer listed first
// waits one rtt and carries, whatever the jitter.
func TestRoundTimerLeaderCarriesAfterOneRoundTrip(t *testing.T) {
	for _, rtt := range []time.Duration{time.Millisecond, 7 * time.Millisecond, time.Second} {
		r := newRoundTimer(rtt, true)
		if d, act := r.next(); d != rtt || act != actCarry {
			t.Fatalf("rtt %s: the leader waits %s then %v, want %s then carry", rtt, d, act, rtt)
		}
	}
}

// TestRoundTimerFollowerProperties checks, over random round trips and
// jitters (extremes included), that a follower: polls first strictly after
// the leader carries and at most two rtt in; then polls every half to one
// rtt; carries once it has waited followerPatience rtt, and not before;
// and so carries within followerPatience+1 rtt, after at most
// 2×followerPatience polls. With the most jitter and an even rtt, the
// waits add up to exactly followerPatience rtt: it carries then, without
// one more poll.
func TestRoundTimerFollowerProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	jitters := map[string]func(time.Duration) time.Duration{
		"least":  func(time.Duration) time.Duration { return 0 },
		"most":   func(n time.Duration) time.Duration { return n },
		"random": func(n time.Duration) time.Duration { return time.Duration(r.Int64N(int64(n) + 1)) },
	}
	for name, jitter := range jitters {
		for range 300 {
			rtt := time.Millisecond + time.Duration(r.Int64N(int64(time.Second)))
			tm := newRoundTimer(rtt, false)
			tm.jitter = jitter
			var waited time.Duration
			for polls := 0; ; polls++ {
				d, act := tm.next()
				if act == actPoll && waited >= followerPatience*rtt {
					t.Fatalf("%s, rtt %s: polls again after waiting %s, want it to carry", name, rtt, waited)
				}
				if act == actCarry {
					if d != 0 || waited < followerPatience*rtt {
						t.Fatalf("%s, rtt %s: carries after waiting %s more, %s in all, want %s at least", name, rtt, d, waited, followerPatience*rtt)
					}
					if polls > 2*followerPatience {
						t.Fatalf("%s, rtt %s: %d polls", name, rtt, polls)
					}
					break
				}
				lo, hi := rtt/2, rtt
				if polls == 0 {
					lo, hi = rtt+1, 2*rtt
				}
				if d < lo || d > hi {
					t.Fatalf("%s, rtt %s: poll %d after %s, want within [%s, %s]", name, rtt, polls, d, lo, hi)
				}
				if waited += d; waited >= (followerPatience+1)*rtt+rtt {
					t.Fatalf("%s, rtt %s: still polling after %s", name, rtt, waited)
				}
			}
		}
	}
}
