package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/faults/remote"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/store"
)

// lostModes are the two shapes of a lost response on the wire, under the
// SDK's own retries: only the first attempt's response is lost, and the
// retry meets the write it already made; or every attempt's is, and the
// driver returns the lost response itself.
var lostModes = []struct {
	name  string
	times int // Rule.Times: 0 is every attempt
}{
	{"retry meets own write", 1},
	{"every attempt lost", 0},
}

// TestAmbiguousWritesOnDrivers is TestAmbiguousWrites on the wire of each
// protocol: the response to the create, a renewal, the release and a
// takeover is lost after the store applied the write. A lease we hold is
// never reported as held by someone else or as lost, and each write is
// settled as landed.
func TestAmbiguousWritesOnDrivers(t *testing.T) {
	for _, driver := range remote.Drivers {
		for _, mode := range lostModes {
			t.Run(driver+"/"+mode.name, func(t *testing.T) {
				ctx := context.Background()
				in := faults.New(faults.Config{})
				p := remote.Open(t, driver, in)
				const name = "amb"
				// lose aims the fault at the lease's next write of cond.
				lose := func(cond faults.Cond) {
					in.Clear()
					in.Add(faults.Rule{Op: store.OpPut, Key: lease.Key(name), Cond: cond, Kind: faults.Lost, Times: mode.times})
				}
				lose(faults.IfNoneMatch)
				a, err := lease.TryAcquire(ctx, p.Faulty, name, opts("a", time.Minute))
				require.NoError(t, err, "create")
				assert.EqualValues(t, 1, a.Token())
				lost := in.Counts().Injected[store.OpPut][faults.Lost]
				require.Positive(t, lost, "the create's response was lost")

				lose(faults.IfMatch)
				require.NoError(t, a.Renew(ctx), "renew")
				assert.True(t, a.Held())
				require.Greater(t, in.Counts().Injected[store.OpPut][faults.Lost], lost, "the renewal's response was lost")
				lost = in.Counts().Injected[store.OpPut][faults.Lost]
				in.Clear()
				_, err = lease.TryAcquire(ctx, p.Clean, name, opts("b", time.Minute))
				requireHeld(t, err)
				require.NoError(t, a.Renew(ctx), "renew after the ambiguous one")

				lose(faults.IfMatch)
				require.NoError(t, a.Release(ctx), "release")
				require.Greater(t, in.Counts().Injected[store.OpPut][faults.Lost], lost, "the release's response was lost")
				lost = in.Counts().Injected[store.OpPut][faults.Lost]
				in.Clear()
				info, err := lease.Status(ctx, p.Clean, name)
				require.NoError(t, err)
				assert.True(t, info.Released)

				lose(faults.IfMatch)
				b, err := lease.TryAcquire(ctx, p.Faulty, name, opts("b", time.Minute))
				require.NoError(t, err, "takeover")
				assert.EqualValues(t, 2, b.Token())
				require.Greater(t, in.Counts().Injected[store.OpPut][faults.Lost], lost, "the takeover's response was lost")
				in.Clear()
				require.NoError(t, b.Renew(ctx))
				require.NoError(t, b.Release(ctx))
			})
		}
	}
}

// TestEpochAmbiguousCreateOnDrivers is TestEpochAmbiguousCreate on the
// wire of each protocol: the response to the create of an epoch, and to
// its renewal, is lost after the store applied it.
func TestEpochAmbiguousCreateOnDrivers(t *testing.T) {
	for _, driver := range remote.Drivers {
		for _, mode := range lostModes {
			t.Run(driver+"/"+mode.name, func(t *testing.T) {
				ctx := context.Background()
				in := faults.New(faults.Config{})
				p := remote.Open(t, driver, in)
				lose := func(cond faults.Cond) {
					in.Clear()
					in.Add(faults.Rule{Op: store.OpPut, Key: lease.Dir + "amb/", Cond: cond, Kind: faults.Lost, Times: mode.times})
				}
				lose(faults.IfNoneMatch)
				e, err := lease.TryAcquireEpoch(ctx, p.Faulty, "amb", opts("a", time.Minute))
				require.NoError(t, err, "create")
				lost := in.Counts().Injected[store.OpPut][faults.Lost]
				require.Positive(t, lost, "the create's response was lost")
				lose(faults.IfMatch)
				require.NoError(t, e.Renew(ctx), "renew")
				require.Greater(t, in.Counts().Injected[store.OpPut][faults.Lost], lost, "the renewal's response was lost")
				in.Clear()
				require.NoError(t, e.Release(ctx))
				info, err := lease.StatusEpoch(ctx, p.Clean, "amb")
				require.NoError(t, err)
				assert.True(t, info.Released)
				assert.Equal(t, e.Epoch(), info.Token)
			})
		}
	}
}

// TestDeadlineCountsFromSendOnDrivers is TestDeadlineCountsFromSend on the
// wire of each protocol: the response to the acquire and to the renewal is
// held, or lost and retried, for 2 s of the holder's clock after the store
// applied the write, and the holder's deadline still counts from the send.
func TestDeadlineCountsFromSendOnDrivers(t *testing.T) {
	for _, driver := range remote.Drivers {
		for _, kind := range []faults.Kind{faults.Held, faults.Lost} {
			t.Run(driver+"/"+kind.String(), func(t *testing.T) {
				ctx := context.Background()
				local := newFakeClock() // the holder's clock
				in := faults.New(faults.Config{})
				p := remote.Open(t, driver, in)
				const delay = 2 * time.Second
				hold := func() {
					in.Add(faults.Rule{Op: store.OpPut, Key: lease.Key("x"), Kind: kind, Times: 1, Then: func() { local.Advance(delay) }})
				}
				o := opts("a", 10*time.Second) // margin 1 s
				o.Clock = local

				hold()
				sent := local.Now()
				a, err := lease.TryAcquire(ctx, p.Faulty, "x", o)
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
			})
		}
	}
}
