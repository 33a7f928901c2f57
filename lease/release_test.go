package lease_test

import (
	"context"
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

// staleRelease acquires name on s for a holder "a" whose clock is local,
// lets a's own deadline pass without a renewal, ends a's tenure in the
// store with end, has "b" take the lease over, and then has a release it,
// as a holder does that stops after its work without having renewed since.
// It returns b.
func staleRelease(t *testing.T, s store.Store, name string, end func(a *lease.Lease)) *lease.Lease {
	t.Helper()
	ctx := context.Background()
	local := newFakeClock()
	o := opts("a", time.Minute)
	o.Clock = local
	a, err := lease.TryAcquire(ctx, s, name, o)
	require.NoError(t, err)
	local.Advance(time.Minute) // past a's deadline: TTL − margin
	require.False(t, a.Held())
	end(a)
	b, err := lease.TryAcquire(ctx, s, name, opts("b", time.Minute))
	require.NoError(t, err)
	require.EqualValues(t, 2, b.Token())
	require.NoError(t, a.Release(ctx), "the lease is provably not a's any more")
	return b
}

// TestStaleReleaseLeavesNewHolder: a holder whose deadline passed, and
// that never learned that its lease was taken over, releases it. Its
// release is conditional on its own last write, so it does not touch the
// new holder's lease: that one stays held with its larger token, and the
// next holder's token is larger still (I5).
func TestStaleReleaseLeavesNewHolder(t *testing.T) {
	check := func(t *testing.T, s store.Store, name string, b *lease.Lease) {
		ctx := context.Background()
		info, err := lease.Status(ctx, s, name)
		require.NoError(t, err)
		assert.Equal(t, "b", info.Owner)
		assert.EqualValues(t, 2, info.Token)
		assert.False(t, info.Released, "a's release left b's lease alone")
		_, err = lease.TryAcquire(ctx, s, name, opts("c", time.Minute))
		he := heldError(t, err)
		assert.Equal(t, "b", he.Owner)
		require.NoError(t, b.Release(ctx))
		c, err := lease.TryAcquire(ctx, s, name, opts("c", time.Minute))
		require.NoError(t, err)
		assert.EqualValues(t, 3, c.Token(), "tokens strictly increase across holders")
		require.NoError(t, c.Release(ctx))
	}
	// a's lease expires by the store's clock and b takes it over.
	t.Run("expired", func(t *testing.T) {
		server := newFakeClock()
		s := mem.New(mem.WithClock(server.Now))
		b := staleRelease(t, s, "stale", func(*lease.Lease) { server.Advance(time.Minute + time.Second) })
		check(t, s, "stale", b)
	})
	// An operator releases a's token, a holder known to be gone, and b
	// takes the lease over.
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		b := staleRelease(t, s, "stale", func(a *lease.Lease) {
			require.NoError(t, lease.ReleaseToken(context.Background(), s, "stale", a.Token()))
		})
		check(t, s, "stale", b)
	})
}

// TestReleaseAfterUnknownRenewal: a release that meets a renewal of ours
// whose outcome was unknown, and that landed, releases on top of it. The
// refusal of its first write (412, on the ETag before that renewal) is
// neither the lease being someone else's nor the lease being released.
func TestReleaseAfterUnknownRenewal(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f := faults.NewStore(s)
		key := lease.Key("unknown")
		a, err := lease.TryAcquire(ctx, f, "unknown", opts("a", time.Minute))
		require.NoError(t, err)
		f.Add(faults.Rule{Op: store.OpPut, Key: key, Kind: faults.Lost, Times: 1, Err: context.DeadlineExceeded})
		f.Add(faults.Rule{Op: store.OpGet, Key: key, Kind: faults.Refused, Times: 1, Err: context.DeadlineExceeded})
		require.ErrorIs(t, a.Renew(ctx), context.DeadlineExceeded)

		require.NoError(t, a.Release(ctx))
		info, err := lease.Status(ctx, s, "unknown")
		require.NoError(t, err)
		assert.True(t, info.Released, "released on top of the renewal that landed")
		assert.EqualValues(t, 1, info.Token)
		b, err := lease.TryAcquire(ctx, s, "unknown", opts("b", time.Minute))
		require.NoError(t, err, "a released lease is free at once")
		assert.EqualValues(t, 2, b.Token())
		require.NoError(t, b.Release(ctx))
	})
}

// TestReleaseUnknownIsAnError: a release whose write failed and whose read
// back failed too has not been shown to land: Release returns the error,
// and the lease, still held in the store, expires after its TTL.
func TestReleaseUnknownIsAnError(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		f := faults.NewStore(s)
		key := lease.Key("unknown")
		a, err := lease.TryAcquire(ctx, f, "unknown", opts("a", time.Minute))
		require.NoError(t, err)
		f.Add(faults.Rule{Op: store.OpPut, Key: key, Kind: faults.Internal, Times: 1})
		f.Add(faults.Rule{Op: store.OpGet, Key: key, Kind: faults.Refused, Times: 1, Err: context.DeadlineExceeded})
		err = a.Release(ctx)
		require.Error(t, err, "neither the write nor the read back says the lease was released")
		assert.Contains(t, err.Error(), `lease "unknown": release`)
		assert.False(t, a.Held())
		info, err := lease.Status(ctx, s, "unknown")
		require.NoError(t, err)
		assert.False(t, info.Released)
	})
}

// TestReleaseAfterProvenTakeover: once a renewal found the lease taken
// over, Release sends nothing: there is nothing of ours to release.
func TestReleaseAfterProvenTakeover(t *testing.T) {
	ctx := context.Background()
	server := newFakeClock()
	s := mem.New(mem.WithClock(server.Now))
	c := store.Count(s)
	a, err := lease.TryAcquire(ctx, c, "x", opts("a", time.Minute))
	require.NoError(t, err)
	server.Advance(time.Minute + time.Second)
	b, err := lease.TryAcquire(ctx, s, "x", opts("b", time.Minute))
	require.NoError(t, err)
	require.ErrorIs(t, a.Renew(ctx), lease.ErrLost)
	before := c.Counts()
	require.NoError(t, a.Release(ctx))
	assert.Equal(t, "none", c.Counts().Sub(before).String())
	require.NoError(t, b.Release(ctx))
}

// TestReleaseTokenRacingTakeover: ReleaseToken's write is conditional on
// the lease it read. A takeover that lands between its read and its write
// stays: ReleaseToken reports ErrLost, and the new holder keeps the lease
// with its larger token (I5).
func TestReleaseTokenRacingTakeover(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		a, err := lease.TryAcquire(ctx, s, "race", opts("a", time.Minute))
		require.NoError(t, err)
		f := faults.NewStore(s)
		var b *lease.Lease
		// Between ReleaseToken's read and its write, a gives the lease up
		// and b takes it over.
		f.Add(faults.Rule{Op: store.OpPut, Key: lease.Key("race"), Kind: faults.Latency, Times: 1, Then: func() {
			require.NoError(t, a.Release(ctx))
			b, err = lease.TryAcquire(ctx, s, "race", opts("b", time.Minute))
			require.NoError(t, err)
		}})
		err = lease.ReleaseToken(ctx, f, "race", a.Token())
		require.ErrorIs(t, err, lease.ErrLost)
		assert.Contains(t, err.Error(), "nothing released")
		info, err := lease.Status(ctx, s, "race")
		require.NoError(t, err)
		assert.Equal(t, "b", info.Owner)
		assert.EqualValues(t, 2, info.Token)
		assert.False(t, info.Released, "b's lease is left alone")
		_, err = lease.TryAcquire(ctx, s, "race", opts("c", time.Minute))
		requireHeld(t, err)
		require.NoError(t, b.Release(ctx))
	})
}

// TestReleaseTokenWriteFails: a ReleaseToken write that fails without
// landing is not taken for a release: reading the lease back does not find
// it, so ReleaseToken writes again, and nil means the lease is released.
func TestReleaseTokenWriteFails(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		a, err := lease.TryAcquire(ctx, s, "fails", opts("a", time.Minute))
		require.NoError(t, err)
		f := faults.NewStore(s)
		c := store.Count(f)
		f.Add(faults.Rule{Op: store.OpPut, Key: lease.Key("fails"), Kind: faults.Internal, Times: 1})
		require.NoError(t, lease.ReleaseToken(ctx, c, "fails", a.Token()))
		assert.Equal(t, "get=3 put=2", c.Counts().String(), "read, write (failed), read back, read, write")
		info, err := lease.Status(ctx, s, "fails")
		require.NoError(t, err)
		assert.True(t, info.Released)
	})
}
