package commit_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// readPointer returns the dataset's current pointer.
func readPointer(t *testing.T, s store.Store) *pointer.Pointer {
	t.Helper()
	p, _, err := pointer.Read(context.Background(), s)
	require.NoError(t, err)
	return p
}

// TestFencesPerLease: tokens of different leases are never compared, and a
// commit without a token is not fenced unless the dataset asks for fenced
// writers only.
func TestFencesPerLease(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		const a, b = "s3://bucket/jobs/_lease/a", "s3://bucket/jobs/_lease/b"
		_, err := publish(t, d, map[string]string{"x": "plain"}, commit.CommitOptions{})
		require.NoError(t, err)
		_, err = publish(t, d, map[string]string{"x": "a6"}, commit.CommitOptions{Fence: 6, FenceLease: a})
		require.NoError(t, err)
		_, err = publish(t, d, map[string]string{"x": "b1"}, commit.CommitOptions{Fence: 1, FenceLease: b})
		require.NoError(t, err, "lease b's token 1 is not compared with lease a's 6")
		_, err = publish(t, d, map[string]string{"x": "unfenced"}, commit.CommitOptions{})
		require.NoError(t, err, "a commit without a token is not fenced")

		_, err = publish(t, d, map[string]string{"x": "a5"}, commit.CommitOptions{Fence: 5, FenceLease: a})
		var fe *commit.FencedError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, commit.FencedError{Lease: a, Mine: 5, Committed: 6}, *fe)
		assert.Contains(t, err.Error(), a)

		p := readPointer(t, s)
		assert.Equal(t, map[string]uint64{a: 6, b: 1}, p.Fences)
		assert.Zero(t, p.Fence, "no unnamed token committed")

		// Fenced writers only: a commit without a token is refused; a
		// token of any lease still commits.
		require.NoError(t, d.SetFencedOnly(ctx, true))
		_, err = publish(t, d, map[string]string{"x": "unfenced"}, commit.CommitOptions{})
		require.ErrorAs(t, err, &fe)
		assert.Zero(t, fe.Mine)
		assert.ErrorIs(t, err, commit.ErrFenced)
		_, err = publish(t, d, map[string]string{"x": "b2"}, commit.CommitOptions{Fence: 2, FenceLease: b})
		require.NoError(t, err)
		assert.True(t, readPointer(t, s).FencedOnly, "commits keep the setting")
		require.NoError(t, d.SetFencedOnly(ctx, false))
		_, err = publish(t, d, map[string]string{"x": "unfenced again"}, commit.CommitOptions{})
		require.NoError(t, err)
		got, err := checkComplete(t, d).ReadFile(ctx, "x")
		require.NoError(t, err)
		assert.Equal(t, "unfenced again", string(got))
		assert.Equal(t, map[string]uint64{a: 6, b: 2}, readPointer(t, s).Fences)
	})
}

// TestLegacyFence: a pointer written before fences were kept per lease has
// one "fence"; it reads as the unnamed lease's token.
func TestLegacyFence(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	p, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	legacy := []byte(`{"format":1,"seq":1,"generation":"` + p.Generation + `","manifest":"` + p.Manifest +
		`","manifest_sha256":"` + p.ManifestSHA256 + `","write_id":"w-legacy","fence":5}`)
	_, err = s.Put(ctx, pointer.Key, bytes.NewReader(legacy), store.PutOptions{})
	require.NoError(t, err)

	got := readPointer(t, s)
	assert.EqualValues(t, 5, got.FenceOf(""))
	_, err = publish(t, d, map[string]string{"x": "unnamed 4"}, commit.CommitOptions{Fence: 4})
	require.ErrorIs(t, err, commit.ErrFenced, "the old fence still fences tokens given without a lease")
	_, err = publish(t, d, map[string]string{"x": "named 1"}, commit.CommitOptions{Fence: 1, FenceLease: "file:///locks/_lease/n"})
	require.NoError(t, err, "a named lease's token is not compared with the old fence")
	_, err = publish(t, d, map[string]string{"x": "plain"}, commit.CommitOptions{})
	require.NoError(t, err)
	got = readPointer(t, s)
	assert.EqualValues(t, 5, got.Fence, "the old fence is carried forward")
	assert.Equal(t, map[string]uint64{"file:///locks/_lease/n": 1}, got.Fences)
}

// TestPausedHolderFenced: a holder paused past its TTL cannot commit after
// the next holder of the same lease registered its token, although the
// next holder has not committed yet. The store's clock is controlled.
func TestPausedHolderFenced(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	s := mem.New(mem.WithClock(clock))
	const id = "mem://x/_lease/job"
	_, err := publish(t, commit.New(s), map[string]string{"x": "seed"}, commit.CommitOptions{})
	require.NoError(t, err)

	opts := func(owner string) lease.Options { return lease.Options{TTL: time.Minute, Owner: owner} }
	a, err := lease.TryAcquire(ctx, s, "job", opts("a"))
	require.NoError(t, err)
	da := commit.New(s, commit.WithWriter("a"))
	require.NoError(t, da.RegisterFence(ctx, id, a.Token()))
	txA, err := da.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, txA.PutBytes(ctx, "x", []byte("from a")))

	// A is paused; the store's clock runs past its TTL, and B takes over.
	advance(2 * time.Minute)
	b, err := lease.TryAcquire(ctx, s, "job", opts("b"))
	require.NoError(t, err)
	require.Greater(t, b.Token(), a.Token())
	db := commit.New(s, commit.WithWriter("b"))
	require.NoError(t, db.RegisterFence(ctx, id, b.Token()))
	txB, err := db.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, txB.PutBytes(ctx, "x", []byte("from b")))

	// A wakes and commits before B does: refused.
	_, err = txA.Commit(ctx, commit.CommitOptions{Fence: a.Token(), FenceLease: id})
	var fe *commit.FencedError
	require.ErrorAs(t, err, &fe, "I6: a paused holder committed after its lease was taken over")
	assert.Equal(t, commit.FencedError{Lease: id, Mine: a.Token(), Committed: b.Token()}, *fe)
	_, err = txB.Commit(ctx, commit.CommitOptions{Fence: b.Token(), FenceLease: id})
	require.NoError(t, err)
	got, err := checkComplete(t, db).ReadFile(ctx, "x")
	require.NoError(t, err)
	assert.Equal(t, "from b", string(got))

	// A late registration of the lower token is refused too.
	err = da.RegisterFence(ctx, id, a.Token())
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, b.Token(), fe.Committed)
}

// TestRegisterFenceCost: a new token costs one pointer GET and one PUT, a
// registered one a GET; a dataset without commits has nothing to register
// in and nothing is written.
func TestRegisterFenceCost(t *testing.T) {
	ctx := context.Background()
	c := store.Count(mem.New())
	d := commit.New(c)
	const id = "file:///locks/_lease/n"
	require.NoError(t, d.RegisterFence(ctx, id, 3))
	assert.Equal(t, "get=1", c.Counts().String(), "no pointer: nothing written")

	_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	before := readPointer(t, c)
	start := c.Counts()
	require.NoError(t, d.RegisterFence(ctx, id, 3))
	assert.Equal(t, "get=1 put=1", c.Counts().Sub(start).String())
	start = c.Counts()
	require.NoError(t, d.RegisterFence(ctx, id, 3))
	assert.Equal(t, "get=1", c.Counts().Sub(start).String(), "a registered token writes nothing")

	after := readPointer(t, c)
	assert.Equal(t, before.Seq, after.Seq)
	assert.Equal(t, before.Generation, after.Generation)
	assert.NotEqual(t, before.WriteID, after.WriteID)
	assert.False(t, after.GCCommittedAt.IsZero(), "the rewrite keeps the commit time")
	assert.EqualValues(t, 3, after.FenceOf(id))
	_, err = publish(t, d, map[string]string{"x": "2"}, commit.CommitOptions{Fence: 3, FenceLease: id})
	require.NoError(t, err, "the registering holder commits")
}

// TestForgetFence: forgetting a lease's fence makes room for another lease
// when the pointer keeps pointer.MaxFences, and re-admits the forgotten
// lease's lower tokens, which is why it is the operator's call. A commit
// of a new lease, like a registration, is refused while the pointer is
// full.
func TestForgetFence(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		assert.ErrorIs(t, d.ForgetFence(ctx, "s3://bucket/_lease/a"), commit.ErrNoCommits)
		_, err := publish(t, d, map[string]string{"x": "first"}, commit.CommitOptions{Fence: 3})
		require.NoError(t, err)
		id := func(n int) string { return fmt.Sprintf("s3://bucket/_lease/job-%03d", n) }
		for n := range pointer.MaxFences {
			require.NoError(t, d.RegisterFence(ctx, id(n), 5))
		}
		newcomer := id(pointer.MaxFences)
		_, err = publish(t, d, map[string]string{"x": "new lease"}, commit.CommitOptions{Fence: 1, FenceLease: newcomer})
		require.ErrorIs(t, err, pointer.ErrFenceLimit)
		require.ErrorIs(t, d.RegisterFence(ctx, newcomer, 1), pointer.ErrFenceLimit)

		before := readPointer(t, s)
		require.NoError(t, d.ForgetFence(ctx, id(7)))
		after := readPointer(t, s)
		assert.Len(t, after.Fences, pointer.MaxFences-1)
		assert.Zero(t, after.FenceOf(id(7)))
		assert.Equal(t, before.Generation, after.Generation, "forgetting is not a commit")
		assert.Equal(t, before.Seq, after.Seq)
		assert.ErrorIs(t, d.ForgetFence(ctx, id(7)), commit.ErrNotFound)

		require.NoError(t, d.RegisterFence(ctx, newcomer, 1))
		_, err = publish(t, d, map[string]string{"x": "lower token"}, commit.CommitOptions{Fence: 2, FenceLease: id(7)})
		require.ErrorIs(t, err, pointer.ErrFenceLimit, "full again")
		require.NoError(t, d.ForgetFence(ctx, id(8)))
		_, err = publish(t, d, map[string]string{"x": "lower token"}, commit.CommitOptions{Fence: 2, FenceLease: id(7)})
		require.NoError(t, err, "token 2 of a forgotten lease that had 5 commits again")

		require.NoError(t, d.ForgetFence(ctx, ""), "the unnamed lease")
		assert.Zero(t, readPointer(t, s).Fence)
		_, err = publish(t, d, map[string]string{"x": "unnamed 1"}, commit.CommitOptions{Fence: 1})
		require.NoError(t, err)
	})
}
