package lease_test

// Tests that kill mutations of scripts/mutants/list which no other test
// caught.

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// leaseClock is a fakeClock usable as the holder's clock. Its timers run on
// real time, which the hour-long TTL below never reaches.
type leaseClock struct{ *fakeClock }

func (leaseClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// slowPuts is a store whose writes take d on the holder's clock: the clock
// moves while the request is in flight.
type slowPuts struct {
	store.Store
	clock *fakeClock
	d     time.Duration
}

func (s *slowPuts) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	a, err := s.Store.Put(ctx, key, body, opts)
	s.clock.Advance(s.d)
	return a, err
}

// TestAcquireDeadlineFromSend: a new holder's deadline counts from when its
// acquiring write was sent, not from when the answer came back: the store
// stamps the lease at some instant in between, and others judge expiry from
// that stamp.
func TestAcquireDeadlineFromSend(t *testing.T) {
	clock := newFakeClock()
	s := &slowPuts{Store: mem.New(), clock: clock, d: 10 * time.Minute}
	o := opts("a", time.Hour)
	o.Clock = leaseClock{clock}
	sent := clock.Now()
	l, err := lease.TryAcquire(context.Background(), s, "slow", o)
	require.NoError(t, err)
	defer l.Release(context.Background())
	assert.Equal(t, sent.Add(time.Hour-6*time.Minute), l.Deadline(), "deadline = send + TTL - margin (TTL/10)")
}

// TestRenewAnsweredAfterDeadline: a renewal whose answer comes back after
// the holder's deadline cannot revive the lease: others may have judged it
// expired meanwhile. Renew reports ErrLost and the lease is done.
func TestRenewAnsweredAfterDeadline(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	s := &slowPuts{Store: mem.New(), clock: clock}
	o := opts("a", time.Hour)
	o.Clock = leaseClock{clock}
	l, err := lease.TryAcquire(ctx, s, "slow", o)
	require.NoError(t, err)
	defer l.Release(ctx)
	s.d = time.Hour // past the deadline, 54 minutes on
	err = l.Renew(ctx)
	require.ErrorIs(t, err, lease.ErrLost)
	assert.False(t, l.Held())
	assert.True(t, isClosed(l.Done()))
}

// TestHeldEndsAtDeadline: Held turns false once the holder's clock reaches
// its deadline, before any timer has noticed.
func TestHeldEndsAtDeadline(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	o := opts("a", time.Hour)
	o.Clock = leaseClock{clock}
	l, err := lease.TryAcquire(ctx, mem.New(), "held", o)
	require.NoError(t, err)
	defer l.Release(ctx)
	require.True(t, l.Held())
	clock.Advance(l.Deadline().Sub(clock.Now()))
	assert.False(t, l.Held())
}
