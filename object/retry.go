package object

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/store"
)

// Retry is a bounded, jittered exponential backoff policy.
type Retry struct {
	// Attempts is the most tries, the first included.
	Attempts int
	// Base is the first backoff; each retry doubles it, up to Max. The
	// actual sleep is uniformly random in [0, backoff) ("full jitter"),
	// which spreads contending writers apart.
	Base, Max time.Duration
}

// DefaultRetry is 10 attempts, backing off from 20 ms up to 2 s.
var DefaultRetry = Retry{Attempts: 10, Base: 20 * time.Millisecond, Max: 2 * time.Second}

// Backoff returns the sleep before retry attempt+1 (attempt counts from 0):
// uniformly random in [0, min(Base·2^attempt, Max)).
func (r Retry) Backoff(attempt int) time.Duration {
	d := r.Base << min(attempt, 30)
	if d <= 0 || d > r.Max {
		d = r.Max
	}
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

// ReadBack runs read, the read that settles a write of uncertain outcome,
// up to four times, backing off between tries, while it fails in a way a
// retry may cure: not a missing object (store.ErrNotExist), not an error
// for which final (if not nil) reports true, and not with ctx done.
// Settling an uncertain outcome on one failed read would turn it into an
// unknown one for nothing. It returns read's last error.
func (r Retry) ReadBack(ctx context.Context, read func() error, final func(error) bool) error {
	var err error
	for attempt := range 4 {
		if attempt > 0 {
			if serr := ctxtime.Sleep(ctx, r.Backoff(attempt-1)); serr != nil {
				return err
			}
		}
		err = read()
		if err == nil || errors.Is(err, store.ErrNotExist) || (final != nil && final(err)) || ctx.Err() != nil {
			return err
		}
	}
	return err
}
