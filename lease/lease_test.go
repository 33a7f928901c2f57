package lease_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// fakeClock is a settable clock: the mem store's server time, or a
// holder's local clock (a lease.Clock, whose timers fire when Advance
// passes them).
type fakeClock struct {
	mu      sync.Mutex
	t       time.Time
	waiters []fakeTimer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.t
	} else {
		c.waiters = append(c.waiters, fakeTimer{c.t.Add(d), ch})
	}
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	pending := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.t) {
			pending = append(pending, w)
		} else {
			w.ch <- c.t
		}
	}
	c.waiters = pending
}

// hasTimerAt reports whether a timer waits to fire at exactly at.
func (c *fakeClock) hasTimerAt(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiters {
		if w.at.Equal(at) {
			return true
		}
	}
	return false
}

// timers returns how many timers wait, and when the earliest fires.
func (c *fakeClock) timers() (n int, next time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiters {
		if n == 0 || w.at.Before(next) {
			next = w.at
		}
		n++
	}
	return n, next
}

// skewClock is the real clock shifted by a fixed offset: a client whose
// wall clock is wrong. Its readings keep the monotonic component.
type skewClock struct{ off time.Duration }

func (c skewClock) Now() time.Time                         { return time.Now().Add(c.off) }
func (c skewClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func opts(owner string, ttl time.Duration) lease.Options {
	return lease.Options{Owner: owner, TTL: ttl, PollMin: 20 * time.Millisecond, PollMax: 200 * time.Millisecond}
}

// requireHeld requires err to be a *lease.HeldError matching ErrHeld.
func requireHeld(t *testing.T, err error) {
	t.Helper()
	_ = heldError(t, err)
}

// heldError requires err to be a *lease.HeldError matching ErrHeld and
// returns it.
func heldError(t *testing.T, err error) *lease.HeldError {
	t.Helper()
	var he *lease.HeldError
	require.ErrorAs(t, err, &he)
	require.ErrorIs(t, err, lease.ErrHeld)
	return he
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		desc, name string
		ok         bool
	}{
		{"short", "gc", true},
		{"punctuation", "leader-01.x_y", true},
		{"empty", "", false},
		{"slash", "a/b", false},
		{"leading dot", ".hidden", false},
		{"leading dash", "-x", false},
		{"space", "a b", false},
		{"non-ascii", "é", false},
		{"128 bytes", strings.Repeat("a", 128), true},
		{"129 bytes", strings.Repeat("a", 129), false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := lease.CheckName(tc.name)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, lease.ErrInvalid)
			}
		})
	}
	assert.Equal(t, "_lease/gc", lease.Key("gc"))
	assert.Equal(t, "_lease/gc/0000000042", lease.EpochKey("gc", 42))
}

func TestBadOptions(t *testing.T) {
	s := mem.New()
	ctx := context.Background()
	for name, o := range map[string]lease.Options{
		"negative ttl":     {TTL: -time.Second},
		"margin above ttl": {TTL: time.Second, Margin: time.Second},
		"negative margin":  {TTL: time.Second, Margin: -1},
		"sub-ms ttl":       {TTL: time.Microsecond},
		"long owner":       {Owner: strings.Repeat("o", 300)},
	} {
		_, err := lease.TryAcquire(ctx, s, "x", o)
		assert.ErrorIs(t, err, lease.ErrInvalid, name)
	}
	_, err := lease.TryAcquire(ctx, s, "a/b", lease.Options{})
	assert.ErrorIs(t, err, lease.ErrInvalid)
}

// TestCosts checks the request counts of the protocol on every driver.
func TestCosts(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		c := store.Count(s)
		measure := func(fn func()) store.Counts {
			before := c.Counts()
			fn()
			return c.Counts().Sub(before)
		}
		var a *lease.Lease
		n := measure(func() {
			var err error
			a, err = lease.TryAcquire(ctx, c, "gc", opts("a", time.Minute))
			require.NoError(t, err)
		})
		assert.Equal(t, "put=1", n.String(), "uncontended acquire")
		assert.EqualValues(t, 1, a.Token())
		assert.Equal(t, "gc", a.Name())
		assert.True(t, a.Held())
		assert.False(t, a.ServerTime().IsZero())

		n = measure(func() { require.NoError(t, a.Renew(ctx)) })
		assert.Equal(t, "put=1", n.String(), "renew")

		n = measure(func() {
			_, err := lease.TryAcquire(ctx, c, "gc", opts("b", time.Minute))
			he := heldError(t, err)
			assert.Equal(t, "a", he.Owner)
		})
		assert.Equal(t, "get=1 put=1", n.String(), "contended TryAcquire")

		// A blocking Acquire polls with GETs only while the lease is held.
		n = measure(func() {
			pctx, cancel := context.WithTimeout(ctx, 600*time.Millisecond)
			defer cancel()
			_, err := lease.Acquire(pctx, c, "gc", lease.Options{Owner: "b", PollMin: 50 * time.Millisecond, PollMax: 50 * time.Millisecond})
			require.ErrorIs(t, err, context.DeadlineExceeded)
			requireHeld(t, err)
		})
		assert.EqualValues(t, 1, n[store.OpPut], "blocking Acquire: only the first try writes (%s)", n)
		assert.GreaterOrEqual(t, n[store.OpGet], int64(3), "blocking Acquire polls (%s)", n)
		// At most one GET per PollMin in the 600 ms, and the first try's.
		assert.LessOrEqual(t, n[store.OpGet], int64(13), "blocking Acquire respects PollMin (%s)", n)

		n = measure(func() { require.NoError(t, a.Release(ctx)) })
		assert.Equal(t, "put=1", n.String(), "release")
		n = measure(func() { require.NoError(t, a.Release(ctx)) })
		assert.Equal(t, "none", n.String(), "second release")

		// Re-acquiring a released lease: create (412), read, take over.
		var b *lease.Lease
		n = measure(func() {
			var err error
			b, err = lease.TryAcquire(ctx, c, "gc", opts("b", time.Minute))
			require.NoError(t, err)
		})
		assert.Equal(t, "get=1 put=2", n.String(), "takeover of a released lease")
		assert.EqualValues(t, 2, b.Token())
		require.NoError(t, b.Release(ctx))

		// A poll of a blocking Acquire that finds the lease free: 1 GET + 1 PUT.
		h, err := lease.TryAcquire(ctx, c, "gc", opts("h", time.Minute))
		require.NoError(t, err)
		got := make(chan *lease.Lease)
		start := c.Counts()
		go func() {
			l, err := lease.Acquire(ctx, c, "gc", lease.Options{Owner: "w", PollMin: 100 * time.Millisecond, PollMax: 100 * time.Millisecond})
			assert.NoError(t, err)
			got <- l
		}()
		// The waiter's first try (1 PUT + 1 GET) ends with its GET.
		require.Eventually(t, func() bool { return c.Counts().Sub(start)[store.OpGet] >= 1 }, 5*time.Second, time.Millisecond)
		time.Sleep(10 * time.Millisecond)
		before := c.Counts()
		require.NoError(t, h.Release(ctx))
		w := <-got
		n = c.Counts().Sub(before)
		assert.EqualValues(t, 2, n[store.OpPut], "release + takeover (%s)", n)
		assert.GreaterOrEqual(t, n[store.OpGet], int64(1), "polls read first (%s)", n)
		// One poll after the release; one or two before it lands, when
		// the release takes longer than a poll interval (a loaded machine).
		assert.LessOrEqual(t, n[store.OpGet], int64(3), "one poll after the release, at most two during it (%s)", n)
		assert.EqualValues(t, 4, w.Token())
		require.NoError(t, w.Release(ctx))
	})
}

func TestReleaseThenReacquire(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		var last uint64
		for i, owner := range []string{"a", "b", "a", "c"} {
			l, err := lease.TryAcquire(ctx, s, "job", opts(owner, time.Minute))
			require.NoError(t, err, "acquire %d", i)
			assert.Greater(t, l.Token(), last, "tokens strictly increase")
			last = l.Token()
			info, err := lease.Status(ctx, s, "job")
			require.NoError(t, err)
			assert.Equal(t, owner, info.Owner)
			assert.Equal(t, l.Token(), info.Token)
			assert.False(t, info.Released)
			assert.False(t, info.Expired)
			assert.Equal(t, time.Minute, info.TTL)

			require.NoError(t, l.Release(ctx))
			assert.True(t, isClosed(l.Done()))
			assert.False(t, l.Held())
			require.ErrorIs(t, l.Err(), lease.ErrLost)
			require.ErrorIs(t, l.Renew(ctx), lease.ErrLost)
			info, err = lease.Status(ctx, s, "job")
			require.NoError(t, err)
			assert.True(t, info.Released)
			assert.True(t, info.Expired)
		}
		assert.EqualValues(t, 4, last)
	})
}

func TestReleaseToken(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		a, err := lease.TryAcquire(ctx, s, "dead", opts("a", time.Hour))
		require.NoError(t, err)
		require.ErrorIs(t, lease.ReleaseToken(ctx, s, "dead", 7), lease.ErrLost)
		require.NoError(t, lease.ReleaseToken(ctx, s, "dead", a.Token()))
		require.NoError(t, lease.ReleaseToken(ctx, s, "dead", a.Token()), "already released")
		require.ErrorIs(t, a.Renew(ctx), lease.ErrLost, "the holder learns at its next renewal")
		b, err := lease.TryAcquire(ctx, s, "dead", opts("b", time.Hour))
		require.NoError(t, err)
		assert.EqualValues(t, 2, b.Token())
		require.NoError(t, a.Release(ctx))
		info, err := lease.Status(ctx, s, "dead")
		require.NoError(t, err)
		assert.Equal(t, "b", info.Owner)
		assert.False(t, info.Released, "the old holder's release does not touch the new holder")
		_, err = lease.Status(ctx, s, "never")
		require.ErrorIs(t, err, store.ErrNotExist)
		require.ErrorIs(t, lease.ReleaseToken(ctx, s, "never", 1), store.ErrNotExist)
	})
}

func TestReleaseAfterCancel(t *testing.T) {
	s := mem.New()
	ctx, cancel := context.WithCancel(context.Background())
	l, err := lease.TryAcquire(ctx, s, "x", opts("a", time.Minute))
	require.NoError(t, err)
	l.KeepAlive(ctx)
	cancel()
	require.NoError(t, l.Release(ctx), "release runs on a fresh context")
	info, err := lease.Status(context.Background(), s, "x")
	require.NoError(t, err)
	assert.True(t, info.Released)
}

func TestHeldError(t *testing.T) {
	clock := newFakeClock()
	s := mem.New(mem.WithClock(clock.Now))
	ctx := context.Background()
	a, err := lease.TryAcquire(ctx, s, "gc", opts("host-a:1", 10*time.Second))
	require.NoError(t, err)
	acquiredAt := clock.Now()
	clock.Advance(3 * time.Second)

	_, err = lease.TryAcquire(ctx, s, "gc", opts("host-b:2", 10*time.Second))
	he := heldError(t, err)
	assert.NotErrorIs(t, err, lease.ErrRace)
	assert.Equal(t, "gc", he.Name)
	assert.Equal(t, "host-a:1", he.Owner)
	assert.EqualValues(t, 1, he.Token)
	assert.Equal(t, acquiredAt.Add(11*time.Second), he.Until, "Until = Last-Modified + TTL + 1 s, in server time")
	assert.Equal(t, clock.Now(), he.ServerTime)
	assert.Contains(t, err.Error(), "host-a:1")
	assert.Contains(t, err.Error(), acquiredAt.Add(11*time.Second).Format(time.RFC3339))
	assert.True(t, a.Held())

	_, err = lease.Status(ctx, s, "never")
	assert.ErrorIs(t, err, store.ErrNotExist)
}

// TestExpiry moves the store's clock past the TTL: another owner takes the
// lease over with a larger token, and the old holder learns it lost.
func TestExpiry(t *testing.T) {
	clock := newFakeClock()
	s := mem.New(mem.WithClock(clock.Now))
	ctx := context.Background()
	a, err := lease.TryAcquire(ctx, s, "gc", opts("a", 10*time.Second))
	require.NoError(t, err)

	clock.Advance(10*time.Second + 999*time.Millisecond)
	_, err = lease.TryAcquire(ctx, s, "gc", opts("b", 10*time.Second))
	requireHeld(t, err) // TTL + 1 s has not passed yet

	clock.Advance(time.Millisecond)
	info, err := lease.Status(ctx, s, "gc")
	require.NoError(t, err)
	assert.True(t, info.Expired)
	assert.False(t, info.Released)
	b, err := lease.TryAcquire(ctx, s, "gc", opts("b", 10*time.Second))
	require.NoError(t, err)
	assert.EqualValues(t, 2, b.Token())

	assert.False(t, isClosed(a.Done()))
	err = a.Renew(ctx)
	require.ErrorIs(t, err, lease.ErrLost)
	assert.Contains(t, err.Error(), "taken over by b")
	assert.True(t, isClosed(a.Done()))
	assert.False(t, a.Held())
	require.NoError(t, a.Release(ctx), "releasing a lost lease is a no-op")

	info, err = lease.Status(ctx, s, "gc")
	require.NoError(t, err)
	assert.Equal(t, "b", info.Owner)
	assert.False(t, info.Released)
	assert.True(t, b.Held())
	require.NoError(t, b.Renew(ctx))
}

// TestClockSkew runs one scenario with the client's clock right and off by
// ±1 h: everything observable is identical.
func TestClockSkew(t *testing.T) {
	run := func(off time.Duration) []string {
		clock := newFakeClock()
		s := mem.New(mem.WithClock(clock.Now))
		c := store.Count(s)
		ctx := context.Background()
		var out []string
		log := func(format string, args ...any) { out = append(out, strings.TrimSpace(sprintf(format, args...))) }
		o := opts("a", 10*time.Second)
		o.Clock = skewClock{off}
		a, err := lease.TryAcquire(ctx, c, "gc", o)
		require.NoError(t, err)
		left := a.Deadline().Sub(o.Clock.Now())
		log("a token=%d held=%v deadline-ok=%v", a.Token(), a.Held(), left > 8*time.Second && left <= 9*time.Second)

		ob := opts("b", 10*time.Second)
		ob.Clock = skewClock{-off}
		_, err = lease.TryAcquire(ctx, c, "gc", ob)
		he := heldError(t, err)
		log("b held-error owner=%s token=%d until=%s left=%v", he.Owner, he.Token, he.Until.Sub(clock.Now()), he.Until.Sub(he.ServerTime))
		require.NoError(t, a.Renew(ctx))
		log("a renewed held=%v", a.Held())

		clock.Advance(11 * time.Second)
		b, err := lease.TryAcquire(ctx, c, "gc", ob)
		require.NoError(t, err)
		log("b token=%d held=%v", b.Token(), b.Held())
		log("a renew: %v", a.Renew(ctx))
		log("a done=%v held=%v", isClosed(a.Done()), a.Held())
		log("b release: %v", b.Release(ctx))
		a2, err := lease.TryAcquire(ctx, c, "gc", o)
		require.NoError(t, err)
		log("a token=%d", a2.Token())
		log("requests: %s", c.Counts())
		return out
	}
	want := run(0)
	t.Log(strings.Join(want, "\n"))
	for _, off := range []time.Duration{time.Hour, -time.Hour} {
		assert.Equal(t, want, run(off), "clock off by %v", off)
	}
}

// TestAmbiguousWrites injects lost responses and SDK-retry 412s into each
// write of the protocol: a lease we hold is never reported as held by
// someone else or as lost.
func TestAmbiguousWrites(t *testing.T) {
	kinds := map[string]faults.Kind{"lost-response": faults.Lost, "spurious-412": faults.Retried}
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		for kname, kind := range kinds {
			t.Run(kname, func(t *testing.T) {
				name := "amb-" + kname
				f := faults.NewStore(s)
				fault := func() { f.Add(faults.Rule{Op: store.OpPut, Key: lease.Key(name), Kind: kind, Times: 1}) }

				fault()
				a, err := lease.TryAcquire(ctx, f, name, opts("a", time.Minute))
				require.NoError(t, err, "create")
				assert.EqualValues(t, 1, a.Token())

				fault()
				require.NoError(t, a.Renew(ctx), "renew")
				assert.True(t, a.Held())
				_, err = lease.TryAcquire(ctx, s, name, opts("b", time.Minute))
				requireHeld(t, err)
				require.NoError(t, a.Renew(ctx), "renew after the ambiguous one")

				fault()
				require.NoError(t, a.Release(ctx), "release")
				info, err := lease.Status(ctx, s, name)
				require.NoError(t, err)
				assert.True(t, info.Released)

				fault()
				b, err := lease.TryAcquire(ctx, f, name, opts("b", time.Minute))
				require.NoError(t, err, "takeover")
				assert.EqualValues(t, 2, b.Token())
				require.NoError(t, b.Renew(ctx))
				require.NoError(t, b.Release(ctx))
			})
		}
	})
}

// TestDeadlineCountsFromSend: the holder's own deadline is the time its
// acquire or renew was sent + TTL − margin, not the time it heard back. The
// response of each is held in flight for 2 s of the holder's clock, and
// the deadline still counts from the send: at send + 9 s the holder stops
// believing it holds, though only 7 s passed since it heard back.
func TestDeadlineCountsFromSend(t *testing.T) {
	kinds := map[string]faults.Kind{"held-response": faults.Held, "lost-response": faults.Lost}
	for kname, kind := range kinds {
		t.Run(kname, func(t *testing.T) {
			ctx := context.Background()
			local := newFakeClock() // the holder's clock
			f := faults.NewStore(mem.New())
			const delay = 2 * time.Second
			hold := func() {
				f.Add(faults.Rule{Op: store.OpPut, Key: lease.Key("x"), Kind: kind, Times: 1, Then: func() { local.Advance(delay) }})
			}
			o := opts("a", 10*time.Second) // margin 1 s
			o.Clock = local

			hold()
			sent := local.Now()
			a, err := lease.TryAcquire(ctx, f, "x", o)
			require.NoError(t, err)
			require.Equal(t, sent.Add(delay), local.Now(), "the response was held")
			assert.Equal(t, sent.Add(9*time.Second), a.Deadline(), "acquire: deadline from the send")

			local.Advance(time.Second)
			hold()
			sent = local.Now()
			require.NoError(t, a.Renew(ctx))
			require.Equal(t, sent.Add(delay), local.Now(), "the response was held")
			assert.Equal(t, sent.Add(9*time.Second), a.Deadline(), "renew: deadline from the send")

			local.Advance(sent.Add(9*time.Second).Sub(local.Now()) - time.Millisecond)
			assert.True(t, a.Held(), "1 ms before send + TTL − margin")
			local.Advance(time.Millisecond)
			assert.False(t, a.Held(), "at send + TTL − margin")
			err = a.Renew(ctx)
			require.ErrorIs(t, err, lease.ErrLost)
			assert.Contains(t, err.Error(), "own deadline passed")
			assert.True(t, isClosed(a.Done()))
		})
	}
}

// TestRenewFailureKeepsLease: a renewal that provably did not land, with
// an error that a retry would meet again, is an error at once, but not a
// loss; the lease holds until its deadline.
func TestRenewFailureKeepsLease(t *testing.T) {
	s := mem.New()
	f := faults.NewStore(s)
	c := store.Count(f)
	ctx := context.Background()
	a, err := lease.TryAcquire(ctx, c, "x", opts("a", time.Minute))
	require.NoError(t, err)
	f.Add(faults.Rule{Op: store.OpPut, Key: lease.Key("x"), Kind: faults.Refused, Times: 1, Err: store.ErrAccess})
	before := c.Counts()
	err = a.Renew(ctx)
	require.ErrorIs(t, err, store.ErrAccess)
	require.NotErrorIs(t, err, lease.ErrLost)
	assert.Equal(t, "get=1 put=1", c.Counts().Sub(before).String(), "one write, read back, not retried")
	assert.True(t, a.Held())
	require.NoError(t, a.Renew(ctx))
	require.NoError(t, a.Release(ctx))
}

// TestRenewRetriesTransient: a renewal answered 409
// (ConditionalRequestConflict), 5xx or "connection refused" did not land,
// and is sent again within the deadline: Renew succeeds and the lease stays
// held. A collector must not stop its run on one of them.
func TestRenewRetriesTransient(t *testing.T) {
	kinds := map[string]faults.Kind{"409": faults.Conflict, "500": faults.Internal, "503": faults.SlowDown, "refused": faults.Refused}
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		for kname, kind := range kinds {
			t.Run(kname, func(t *testing.T) {
				name := "retry-" + kname
				f := faults.NewStore(s)
				c := store.Count(f)
				a, err := lease.TryAcquire(ctx, c, name, opts("a", time.Minute))
				require.NoError(t, err)
				first := a.Deadline()
				f.Add(faults.Rule{Op: store.OpPut, Key: lease.Key(name), Kind: kind, Times: 2})
				before := c.Counts()
				require.NoError(t, a.Renew(ctx), "two refused writes, then one that lands")
				assert.EqualValues(t, 3, c.Counts().Sub(before)[store.OpPut])
				assert.True(t, a.Held())
				assert.True(t, a.Deadline().After(first), "the deadline moved on")
				_, err = lease.TryAcquire(ctx, s, name, opts("b", time.Minute))
				requireHeld(t, err)
				require.NoError(t, a.Release(ctx))
			})
		}
	})
}

// TestRenewRetriesUntilDeadline: a renewal that keeps getting 409s is sent
// again and again, but a pause never reaches the holder's deadline: Renew
// gives up with the 409 less than one pause before it, and the lease is
// still held, not lost. The holder's clock runs from timer to timer.
func TestRenewRetriesUntilDeadline(t *testing.T) {
	ctx := context.Background()
	local := newFakeClock()
	f := faults.NewStore(mem.New())
	c := store.Count(f)
	o := opts("a", 10*time.Second)
	o.Clock = local
	a, err := lease.TryAcquire(ctx, c, "x", o)
	require.NoError(t, err)
	f.Add(faults.Rule{Op: store.OpPut, Key: lease.Key("x"), Kind: faults.Conflict})
	before := c.Counts()
	done := make(chan error, 1)
	go func() { done <- a.Renew(ctx) }()
	giveUp := time.Now().Add(time.Minute)
	for returned := false; !returned; {
		select {
		case err = <-done:
			returned = true
		default:
			// Fire the earliest timer once both the lease's deadline timer
			// and the renewal's pause wait.
			if n, next := local.timers(); n >= 2 {
				local.Advance(next.Sub(local.Now()))
			} else {
				require.True(t, time.Now().Before(giveUp), "Renew neither waits nor returns")
				time.Sleep(time.Millisecond)
			}
		}
	}
	require.ErrorIs(t, err, store.ErrConflict)
	require.NotErrorIs(t, err, lease.ErrLost)
	assert.True(t, a.Held())
	left := a.Deadline().Sub(local.Now())
	assert.Positive(t, left)
	assert.LessOrEqual(t, left, time.Second, "retried until less than one pause (at most TTL/10) was left")
	assert.GreaterOrEqual(t, c.Counts().Sub(before)[store.OpPut], int64(10), "sent again and again")
	f.Clear()
	require.NoError(t, a.Renew(ctx))
	require.NoError(t, a.Release(ctx))
}

func TestKeepAlive(t *testing.T) {
	s := mem.New()
	c := store.Count(s)
	ctx := context.Background()
	local := newFakeClock()
	o := opts("a", 3*time.Second)
	o.Clock = local
	a, err := lease.TryAcquire(ctx, c, "x", o)
	require.NoError(t, err)
	first := a.Deadline()
	a.KeepAlive(ctx)
	a.KeepAlive(ctx) // no second goroutine
	puts := func() int64 { return c.Counts()[store.OpPut] }
	start := puts()
	for i := int64(1); i <= 6; i++ {
		// The keeper renews every TTL/3 of the holder's clock.
		require.Eventually(t, func() bool { return local.hasTimerAt(local.Now().Add(time.Second)) }, 10*time.Second, time.Millisecond, "renewal %d armed", i)
		local.Advance(time.Second)
		require.Eventually(t, func() bool { return puts() >= start+i }, 10*time.Second, time.Millisecond, "renewal %d sent", i)
	}
	require.Eventually(t, func() bool { return a.Deadline().Equal(first.Add(6 * time.Second)) }, 10*time.Second, time.Millisecond,
		"each renewal moves the deadline to its send time + TTL - margin")
	assert.True(t, a.Held())
	assert.False(t, isClosed(a.Done()))
	assert.Equal(t, start+6, puts(), "one renewal per TTL/3: one keeper")
	require.NoError(t, a.Release(ctx))
	assert.True(t, isClosed(a.Done()))
	n := puts()
	local.Advance(10 * time.Second)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, n, puts(), "no renewals after release")
}

// TestPausedHolder: a holder whose renewals cannot get through finds Done
// closed at its deadline; a new holder takes over with a larger token, and
// a commit fenced with the old token is refused after the new one
// committed (I6).
func TestPausedHolder(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f := faults.NewStore(s)
		const ttl = 500 * time.Millisecond
		a, err := lease.TryAcquire(ctx, f, "gc", opts("a", ttl))
		require.NoError(t, err)
		da := commit.New(f, commit.WithWriter("a"))
		_, err = commitFile(ctx, da, "x", "from a", a.Token())
		require.NoError(t, err)

		// Pause a: every renewal fails before it is sent.
		f.Add(faults.Rule{Op: store.OpPut, Key: lease.Key("gc"), Kind: faults.Refused})
		a.KeepAlive(ctx)
		select {
		case <-a.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done did not close after the deadline")
		}
		assert.False(t, a.Held())
		require.ErrorIs(t, a.Err(), lease.ErrLost)
		assert.False(t, time.Now().Before(a.Deadline()))

		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		b, err := lease.Acquire(actx, s, "gc", opts("b", 10*time.Second))
		require.NoError(t, err)
		assert.Greater(t, b.Token(), a.Token())
		db := commit.New(s, commit.WithWriter("b"))
		_, err = commitFile(ctx, db, "x", "from b", b.Token())
		require.NoError(t, err)

		_, err = commitFile(ctx, da, "x", "late a", a.Token())
		require.ErrorIs(t, err, commit.ErrFenced)
		require.ErrorIs(t, a.Renew(ctx), lease.ErrLost)
		require.NoError(t, b.Release(ctx))
	})
}

func commitFile(ctx context.Context, d *commit.Dataset, path, content string, fence uint64) (any, error) {
	tx, err := d.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if err := tx.PutBytes(ctx, path, []byte(content)); err != nil {
		return nil, err
	}
	return tx.Commit(ctx, commit.CommitOptions{Fence: fence})
}

func TestCorrupt(t *testing.T) {
	ctx := context.Background()
	for name, body := range map[string]string{
		"not json":      "garbage",
		"unknown field": `{"owner":"a","token":1,"ttl_ms":1000,"released":false,"write_id":"w","extra":1}`,
		"zero token":    `{"owner":"a","token":0,"ttl_ms":1000,"released":false,"write_id":"w"}`,
		"no ttl":        `{"owner":"a","token":1,"released":false,"write_id":"w"}`,
		"no write id":   `{"owner":"a","token":1,"ttl_ms":1000,"released":true}`,
		"trailing":      `{"owner":"a","token":1,"ttl_ms":1000,"released":true,"write_id":"w"} {}`,
		"too large":     `{"owner":"` + strings.Repeat("a", 70<<10) + `"}`,
		"empty":         ``,
	} {
		t.Run(name, func(t *testing.T) {
			clock := newFakeClock()
			s := mem.New(mem.WithClock(clock.Now))
			_, err := s.Put(ctx, lease.Key("gc"), bytes.NewReader([]byte(body)), store.PutOptions{})
			require.NoError(t, err)
			clock.Advance(24 * time.Hour) // long "expired", if it were a lease
			_, err = lease.TryAcquire(ctx, s, "gc", opts("b", time.Second))
			require.ErrorIs(t, err, lease.ErrCorrupt)
			assert.Contains(t, err.Error(), "_lease/gc")
			_, err = lease.Status(ctx, s, "gc")
			require.ErrorIs(t, err, lease.ErrCorrupt)
		})
	}
}

// TestContendedGoroutines: many goroutines contend for one lease on every
// driver; tokens strictly increase and holding intervals never overlap.
func TestContendedGoroutines(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		var mu sync.Mutex
		holder := ""
		var tokens []uint64
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				me := sprintf("g%d", i)
				for range 3 {
					actx, cancel := context.WithTimeout(ctx, 30*time.Second)
					l, err := lease.Acquire(actx, s, "hot", opts(me, 5*time.Second))
					cancel()
					if !assert.NoError(t, err) {
						return
					}
					mu.Lock()
					assert.Empty(t, holder, "two holders at once")
					holder = me
					tokens = append(tokens, l.Token())
					mu.Unlock()
					time.Sleep(5 * time.Millisecond)
					mu.Lock()
					holder = ""
					mu.Unlock()
					assert.NoError(t, l.Release(ctx))
				}
			}()
		}
		wg.Wait()
		require.Len(t, tokens, 18)
		for i := 1; i < len(tokens); i++ {
			assert.Greater(t, tokens[i], tokens[i-1])
		}
	})
}

var sprintf = fmt.Sprintf

// TestTryAcquireChurn: a client that loses every takeover race to a busy
// lease or epoch lock hears that it is taken (ErrHeld, ErrRace), not a
// failure it cannot act on. A collector that runs often must be able to
// tell "someone else is collecting" from "the store is broken".
func TestTryAcquireChurn(t *testing.T) {
	type release interface{ Release(context.Context) error }
	kinds := map[string]func(context.Context, store.Store, string, lease.Options) (release, error){
		"lease": func(ctx context.Context, s store.Store, name string, o lease.Options) (release, error) {
			return lease.TryAcquire(ctx, s, name, o)
		},
		"epoch": func(ctx context.Context, s store.Store, name string, o lease.Options) (release, error) {
			return lease.TryAcquireEpoch(ctx, s, name, o)
		},
	}
	for kind, try := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			s := mem.New()
			cycles := 0
			other := func() {
				l, err := try(ctx, s, "leader", opts("b", time.Minute))
				require.NoError(t, err)
				require.NoError(t, l.Release(ctx))
				cycles++
			}
			other()
			// Another client acquires and releases the lease before each
			// of our takeover writes (and each create of a "leader" epoch)
			// reaches the store: the lease is free whenever we look, and
			// taken whenever we write.
			churn := faults.NewStore(s)
			churn.Add(faults.Rule{Op: store.OpPut, Cond: faults.IfMatch, Kind: faults.Latency, Then: other})
			churn.Add(faults.Rule{Op: store.OpPut, Key: lease.Dir + "leader/", Cond: faults.IfNoneMatch, Kind: faults.Latency, Then: other})
			_, err := try(ctx, churn, "leader", opts("a", time.Minute))
			he := heldError(t, err)
			assert.ErrorIs(t, err, lease.ErrRace)
			assert.True(t, he.Race)
			assert.Equal(t, "b", he.Owner)
			assert.Greater(t, cycles, 1)
		})
	}
}
