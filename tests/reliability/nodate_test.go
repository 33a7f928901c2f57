package reliability_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/store"
)

// storeLag is how far the store's clock runs behind the local one in the
// tests of responses without a Date. By the local clock, everything the
// store wrote looks ten minutes older than it is.
const storeLag = -10 * time.Minute

// laggingBucket is a fresh bucket of the S3 test server whose clock its
// clients see storeLag behind the local one.
type laggingBucket struct {
	t      *testing.T
	driver string
	bucket string
	base   *http.Transport
}

func newLaggingBucket(t *testing.T, driver string) laggingBucket {
	base := newHTTPTransport()
	t.Cleanup(base.CloseIdleConnections)
	return laggingBucket{t, driver, newBucket(t), base}
}

// open returns a client of the bucket whose responses to the requests of
// kinds drop lose their Date; its transport changes that later.
func (b laggingBucket) open(drop ...store.Op) (store.Store, *faults.ClockTransport) {
	tr := faults.NewClockTransport(b.base, storeLag)
	tr.DropDate(drop...)
	return openRemote(b.t, b.driver, b.bucket, tr), tr
}

// commitFile commits one file in a new generation and returns its seq.
func commitFile(t *testing.T, d *commit.Dataset, path, body string) uint64 {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutBytes(ctx, path, []byte(body)))
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	return p.Seq
}

// TestNoDateLeaseTakeoverRefused: a client whose responses carry no Date
// must not judge a lease by its own clock. It would see a lease renewed a
// moment ago as ten minutes old, take it over, and two holders would both
// be Held.
func TestNoDateLeaseTakeoverRefused(t *testing.T) {
	for _, driver := range []string{"s3", "minio"} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			b := newLaggingBucket(t, driver)
			dated, _ := b.open()
			undated, _ := b.open(faults.AllOps...)
			opts := func(owner string) lease.Options { return lease.Options{TTL: 30 * time.Second, Owner: owner} }

			a, err := lease.TryAcquire(ctx, dated, "job", opts("A"))
			require.NoError(t, err)
			defer a.Release(ctx)
			_, err = lease.TryAcquire(ctx, undated, "job", opts("B"))
			require.ErrorIs(t, err, store.ErrNoServerTime)
			assert.ErrorContains(t, err, `store: no Date header in the response to GET "_lease/job": cannot judge the lease's age`)
			assert.True(t, a.Held())
			info, err := lease.Status(ctx, dated, "job")
			require.NoError(t, err)
			assert.Equal(t, "A", info.Owner, "the lease was taken over")
			assert.EqualValues(t, 1, info.Token)

			// The epoch lock judges its latest epoch the same way.
			ea, err := lease.TryAcquireEpoch(ctx, dated, "jobs", opts("A"))
			require.NoError(t, err)
			defer ea.Release(ctx)
			_, err = lease.TryAcquireEpoch(ctx, undated, "jobs", opts("B"))
			require.ErrorIs(t, err, store.ErrNoServerTime)
			assert.True(t, ea.Held())
			info, err = lease.StatusEpoch(ctx, dated, "jobs")
			require.NoError(t, err)
			assert.EqualValues(t, 1, info.Token, "a second epoch was created")

			// Nobody could ever judge a lease acquired without a Date
			// expired: the acquisition is refused and given back.
			_, err = lease.TryAcquire(ctx, undated, "fresh", opts("B"))
			require.ErrorIs(t, err, store.ErrNoServerTime)
			assert.ErrorContains(t, err, `PUT "_lease/fresh"`)
			info, err = lease.Status(ctx, dated, "fresh")
			require.NoError(t, err)
			assert.True(t, info.Released)

			// Control: with the Date, the lagging clock is the store's
			// clock and the lease is judged held, then free once released.
			_, err = lease.TryAcquire(ctx, dated, "job", opts("B"))
			require.ErrorIs(t, err, lease.ErrHeld)
			require.NoError(t, a.Release(ctx))
			b2, err := lease.TryAcquire(ctx, dated, "job", opts("B"))
			require.NoError(t, err)
			assert.EqualValues(t, 2, b2.Token())
			require.NoError(t, b2.Release(ctx))
		})
	}
}

// TestNoDateLeaseRenewExtendsNothing: a renewal whose response has no Date
// does not move the holder's deadline. The lease stays held until the
// deadline it had.
func TestNoDateLeaseRenewExtendsNothing(t *testing.T) {
	ctx := context.Background()
	s, tr := newLaggingBucket(t, "s3").open()
	l, err := lease.TryAcquire(ctx, s, "job", lease.Options{TTL: 30 * time.Second})
	require.NoError(t, err)
	defer l.Release(ctx)
	tr.DropDate(store.OpPut)
	before := l.Deadline()
	err = l.Renew(ctx)
	require.ErrorIs(t, err, store.ErrNoServerTime)
	assert.Equal(t, before, l.Deadline())
	assert.True(t, l.Held())

	// Control: with the Date back, the renewal extends the deadline.
	tr.DropDate()
	require.NoError(t, l.Renew(ctx))
	assert.True(t, l.Deadline().After(before))
}

// TestNoDatePinnedGenerationKept: a collector whose responses carry no
// Date must not judge pins by its own clock. It would see a pin written a
// moment ago for 5 minutes as ten minutes old, and delete the pinned
// generation. A pin written or renewed without a Date is refused too.
func TestNoDatePinnedGenerationKept(t *testing.T) {
	for _, driver := range []string{"s3", "minio"} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			b := newLaggingBucket(t, driver)
			dated, _ := b.open()
			undated, tr := b.open(faults.AllOps...)
			d := commit.New(dated)
			commitFile(t, d, "f", "v1")
			snap, err := d.Open(ctx)
			require.NoError(t, err)

			// A pin through the store without Date is refused and removed.
			usnap, err := commit.New(undated).Open(ctx)
			require.NoError(t, err)
			_, err = usnap.Pin(ctx, 5*time.Minute, "reader")
			require.ErrorIs(t, err, store.ErrNoServerTime)
			page, err := dated.List(ctx, store.ListRequest{Prefix: commit.PinDir})
			require.NoError(t, err)
			assert.Empty(t, page.Objects, "the refused pin is left behind")

			pin, err := snap.Pin(ctx, 5*time.Minute, "reader")
			require.NoError(t, err)
			commitFile(t, d, "f", "v2")
			commitFile(t, d, "f", "v3")

			// The collector's reads carry no Date; its lease write does.
			opts := gc.Options{Keep: -1, Grace: -1, OrphanAge: -1}
			tr.DropDate(store.OpGet, store.OpHead, store.OpList)
			_, err = gc.Run(ctx, undated, opts)
			require.ErrorIs(t, err, store.ErrNoServerTime)
			assert.ErrorContains(t, err, `GET "_pointer"`)
			// No Date at all: refused at the collector's lease.
			tr.DropDate(faults.AllOps...)
			_, err = gc.Run(ctx, undated, opts)
			require.ErrorIs(t, err, store.ErrNoServerTime)
			got, err := snap.ReadFile(ctx, "f")
			require.NoError(t, err, "the pinned generation was collected")
			assert.Equal(t, "v1", string(got))

			// Control: with the Date, the pin is judged unexpired and kept.
			rep, err := gc.Run(ctx, dated, opts)
			require.NoError(t, err)
			require.Len(t, rep.Deleted, 1, "the unpinned ancestor goes")
			got, err = snap.ReadFile(ctx, "f")
			require.NoError(t, err)
			assert.Equal(t, "v1", string(got))
			require.NoError(t, pin.Renew(ctx))
		})
	}
}

// TestNoDatePinRenewRefused: Renew judges the pin's age by the HEAD's Date,
// and whether it landed in time by the PUT's. Without the first it
// refuses; without the second it gives the pin up, as for a late renewal.
func TestNoDatePinRenewRefused(t *testing.T) {
	ctx := context.Background()
	s, tr := newLaggingBucket(t, "s3").open()
	d := commit.New(s)
	commitFile(t, d, "f", "v1")
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	pin, err := snap.Pin(ctx, 5*time.Minute, "reader")
	require.NoError(t, err)

	tr.DropDate(store.OpHead)
	err = pin.Renew(ctx)
	require.ErrorIs(t, err, store.ErrNoServerTime)
	assert.NotErrorIs(t, err, commit.ErrCollected)
	assert.ErrorContains(t, err, `HEAD "`+pin.Key+`"`)

	tr.DropDate(store.OpPut)
	err = pin.Renew(ctx)
	require.ErrorIs(t, err, store.ErrNoServerTime)
	require.ErrorIs(t, err, commit.ErrCollected)
	_, err = s.Head(ctx, pin.Key)
	require.ErrorIs(t, err, store.ErrNotExist, "a renewal that may have landed late must give the pin up")
}

// TestNoDateStagingStartRefused: a writer whose pointer read carries no
// Date has no staging start in the store's clock. Taking its own clock
// instead, ten minutes ahead, it would pass the collector's horizon after
// the collector removed its objects as orphans, and commit a generation
// whose objects are gone.
func TestNoDateStagingStartRefused(t *testing.T) {
	for _, driver := range []string{"s3", "minio"} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			b := newLaggingBucket(t, driver)
			dated, _ := b.open()
			undated, _ := b.open(faults.AllOps...)
			d := commit.New(dated)
			commitFile(t, d, "f", "v1")

			_, err := commit.New(undated).Begin(ctx)
			require.ErrorIs(t, err, store.ErrNoServerTime)
			assert.ErrorContains(t, err, `store: no Date header in the response to GET "_pointer": cannot judge the staging start`)

			// Control: with the Date, a stalled writer's staging start is
			// in the store's clock, and the collector's horizon stops it.
			tx, err := d.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.PutBytes(ctx, "f", []byte("stalled")))
			// A collector without a minimum orphan age takes objects
			// older than its clock's whole second for orphans.
			waitStoreClockPast(t, dated, newestUnder(t, dated, "_gen/"+tx.Generation()+"/"))
			rep, err := gc.Run(ctx, dated, gc.Options{OrphanAge: -1})
			require.NoError(t, err)
			require.Len(t, rep.Orphans, 1, "the stalled writer's objects were not collected")
			_, err = tx.Commit(ctx, commit.CommitOptions{})
			require.ErrorIs(t, err, commit.ErrStale)
			// A writer that begins after the horizon's second commits.
			waitStoreClockPast(t, dated, rep.Horizon)
			commitFile(t, d, "f", "v2")
		})
	}
}

// newestUnder returns the newest Last-Modified of the objects under prefix.
func newestUnder(t *testing.T, s store.Store, prefix string) time.Time {
	t.Helper()
	var newest time.Time
	for o, err := range store.List(context.Background(), s, prefix, "", "") {
		require.NoError(t, err)
		if o.LastModified.After(newest) {
			newest = o.LastModified
		}
	}
	require.False(t, newest.IsZero(), "nothing under %q", prefix)
	return newest
}

// waitStoreClockPast waits until the store's clock (a whole second, from
// the Date) is past at.
func waitStoreClockPast(t *testing.T, s store.Store, at time.Time) {
	t.Helper()
	for start := time.Now(); ; {
		a, err := s.Head(context.Background(), "_pointer")
		require.NoError(t, err)
		if a.ServerTime.After(at) {
			return
		}
		require.Less(t, time.Since(start), time.Minute, "the store's clock stands still at %v", a.ServerTime)
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNoDateCleanupRefused: removing old lease epochs and the leftovers of
// interrupted uploads are judged by age too, and refused without a Date.
func TestNoDateCleanupRefused(t *testing.T) {
	for _, driver := range []string{"s3", "minio"} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			b := newLaggingBucket(t, driver)
			dated, _ := b.open()
			undated, _ := b.open(faults.AllOps...)
			for range 2 {
				e, err := lease.TryAcquireEpoch(ctx, dated, "jobs", lease.Options{})
				require.NoError(t, err)
				require.NoError(t, e.Release(ctx))
			}
			// By the local clock, epoch 1 is ten minutes old.
			n, err := lease.CleanupEpochs(ctx, undated, "jobs", lease.MinCleanupAge)
			require.ErrorIs(t, err, store.ErrNoServerTime)
			assert.Zero(t, n)
			_, err = store.SweepLeftovers(ctx, undated, "", time.Minute)
			require.ErrorIs(t, err, store.ErrNoServerTime)

			// Control: by the store's clock, epoch 1 is young.
			n, err = lease.CleanupEpochs(ctx, dated, "jobs", lease.MinCleanupAge)
			require.NoError(t, err)
			assert.Zero(t, n)
			_, err = store.SweepLeftovers(ctx, dated, "", time.Minute)
			require.NoError(t, err)
			info, err := lease.StatusEpoch(ctx, dated, "jobs")
			require.NoError(t, err)
			assert.EqualValues(t, 2, info.Token)
			_, err = dated.Head(ctx, lease.EpochKey("jobs", 1))
			require.NoError(t, err, "epoch 1 was removed")
		})
	}
}
