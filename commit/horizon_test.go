package commit_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// pointerTimes records the server time of every pointer read, so that a
// test knows a Tx's staging start: the Date of the pointer GET in Begin.
type pointerTimes struct {
	store.Store
	mu   sync.Mutex
	seen []time.Time
}

func (p *pointerTimes) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	rc, attrs, err := p.Store.Get(ctx, key)
	if err == nil && key == pointer.Key {
		p.mu.Lock()
		p.seen = append(p.seen, attrs.ServerTime)
		p.mu.Unlock()
	}
	return rc, attrs, err
}

func (p *pointerTimes) last() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[len(p.seen)-1]
}

// TestHorizonSameSecond: S3 dates have whole seconds, so a writer's
// staging start and the collector's horizon can be the same instant. The
// collector counts an object modified at its cutoff as an orphan, so a
// writer whose staging started at the horizon may have lost objects and
// must be refused: the guard is horizon >= staging start, not >.
//
// The horizon is written as the collector writes it, equal to the staging
// start this Tx read (on s3 and minio a whole second), on every driver.
func TestHorizonSameSecond(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		seen := &pointerTimes{Store: s}
		d := commit.New(seen)
		p1, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
		require.NoError(t, err)
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		start := seen.last()
		require.False(t, start.IsZero())
		require.NoError(t, tx.PutBytes(ctx, "x", []byte("2")))

		cur, attrs, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		cur.GCHorizon = start
		_, err = pointer.Write(ctx, s, cur, attrs.ETag)
		require.NoError(t, err)

		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.ErrorIs(t, err, commit.ErrStale)
		assert.Equal(t, p1.Generation, checkComplete(t, d).Generation())
	})
}

// TestHorizonSameSecondCollected: the same second with the real
// collector, on a store clock that stands still: the writer stages at T,
// the collector runs at T + orphan age + 1 s (its allowance for
// whole-second dates), takes the staged objects for an orphan's, deletes
// them and publishes the horizon T. The writer's commit must be refused,
// or the pointer would name a generation whose objects are gone (I1).
func TestHorizonSameSecondCollected(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s := mem.New(mem.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	d := commit.New(s)
	p1, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutBytes(ctx, "x", []byte("2")))

	const orphanAge = time.Minute
	mu.Lock()
	now = now.Add(orphanAge + time.Second)
	mu.Unlock()
	rep, err := gc.Run(ctx, s, gc.Options{Keep: 1, Grace: -1, OrphanAge: orphanAge})
	require.NoError(t, err)
	require.Len(t, rep.Orphans, 1, "the staged objects are an orphan's at the cutoff")
	assert.Equal(t, tx.Generation(), rep.Orphans[0].Generation)
	assert.True(t, rep.Horizon.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)), "horizon %s", rep.Horizon)

	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrStale)
	assert.Equal(t, p1.Generation, checkComplete(t, d).Generation())
	assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())), "the refused writer discarded its manifest")
}
