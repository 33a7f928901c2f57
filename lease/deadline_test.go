package lease_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
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

// adoptRenewal has a holder on s whose clock is local send a renewal that
// lands but whose outcome it cannot learn (the response and the read back
// both time out), and later find that renewal in the store and adopt it.
// The adopting Renew's own write on top of it is refused, so the adopted
// renewal is the last one the holder confirmed. It returns the lease and
// when the adopted renewal was sent.
func adoptRenewal(t *testing.T, s store.Store, local *fakeClock) (*lease.Lease, time.Time) {
	t.Helper()
	ctx := context.Background()
	f := faults.NewStore(s)
	o := opts("a", time.Hour) // margin 6 min
	o.Clock = local
	a, err := lease.TryAcquire(ctx, f, "adopt", o)
	require.NoError(t, err)
	t.Cleanup(func() { a.Release(context.Background()) })

	local.Advance(10 * time.Minute)
	sent := local.Now()
	key := lease.Key("adopt")
	f.Add(faults.Rule{Op: store.OpPut, Key: key, Kind: faults.Lost, Times: 1, Err: context.DeadlineExceeded})
	f.Add(faults.Rule{Op: store.OpGet, Key: key, Kind: faults.Refused, Times: 1, Err: context.DeadlineExceeded})
	err = a.Renew(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, lease.ErrLost)

	// 20 minutes on, the next renewal is refused (412 on the ETag before
	// the unknown one) and finds the unknown one in the store: adopted. The
	// renewal it sends on top of it is refused too (access denied).
	local.Advance(20 * time.Minute)
	f.Add(faults.Rule{Op: store.OpPut, Key: key, Kind: faults.Latency, Times: 1, Then: func() {
		f.Add(faults.Rule{Op: store.OpPut, Key: key, Kind: faults.Refused, Times: 1, Err: store.ErrAccess})
	}})
	err = a.Renew(ctx)
	require.ErrorIs(t, err, store.ErrAccess)
	require.NotErrorIs(t, err, lease.ErrLost)
	assert.Equal(t, sent.Add(54*time.Minute), a.Deadline(), "the adopted renewal counts from its send + TTL − margin")
	return a, sent
}

// TestAdoptedRenewalDeadlineFromSend: a renewal whose outcome was unknown
// and that is later found to have landed moves the holder's deadline to
// its send time + TTL − margin, not to the time it was found: the store
// stamped it when it landed, and others judge expiry from that stamp (I5).
func TestAdoptedRenewalDeadlineFromSend(t *testing.T) {
	// The store and the holder share one clock that does not move while a
	// request is in flight: the adopted renewal landed at its send time,
	// and b takes the lease over TTL + 1 s later. By then a must have
	// stopped believing that it holds the lease.
	t.Run("takeover", func(t *testing.T) {
		clock := newFakeClock()
		s := mem.New(mem.WithClock(clock.Now))
		a, sent := adoptRenewal(t, s, clock)
		clock.Advance(sent.Add(time.Hour + time.Second).Sub(clock.Now()))
		b, err := lease.TryAcquire(context.Background(), s, "adopt", opts("b", time.Hour))
		require.NoError(t, err)
		assert.Greater(t, b.Token(), a.Token())
		assert.False(t, a.Held(), "a and b both hold the lease")
	})
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		local := newFakeClock()
		a, sent := adoptRenewal(t, s, local)
		deadline := sent.Add(54 * time.Minute)
		local.Advance(deadline.Sub(local.Now()) - time.Millisecond)
		assert.True(t, a.Held(), "1 ms before the adopted renewal's send + TTL − margin")
		local.Advance(time.Millisecond)
		assert.False(t, a.Held(), "at the adopted renewal's send + TTL − margin")
	})
}
