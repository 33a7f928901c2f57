package gc_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/store"
)

// clockedStore returns an in-memory store on a settable clock, and the
// function that moves that clock forward.
func clockedStore() (store.Store, func(time.Duration)) {
	var mu sync.Mutex
	now := time.Now()
	s := memStore(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	return s, func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
}

// collected returns the generations a run deleted, from the chain or as
// orphans (a pinned generation beyond a collected link is no longer in the
// chain once its pin expires).
func collected(rep *gc.Report) []string {
	return append(genIDs(rep.Deleted), genIDs(rep.Orphans)...)
}

// TestGraceAllowsClockResolution: an ancestor superseded the grace ago plus
// half a second is still kept; only the grace plus a second frees it.
func TestGraceAllowsClockResolution(t *testing.T) {
	ctx := context.Background()
	s, advance := clockedStore()
	d := dataset(s)
	publish(t, d, false, files(1, "1"))
	publish(t, d, false, files(1, "2")) // gen 1 superseded now
	advance(10*time.Minute + 500*time.Millisecond)

	opts := gc.Options{Keep: -1, Grace: 10 * time.Minute, OrphanAge: -1}
	rep, err := gc.Run(ctx, s, opts)
	require.NoError(t, err)
	assert.Empty(t, rep.Deleted, "gen 1 was superseded 10m0.5s ago: within the grace plus the clock's resolution")

	advance(time.Second)
	rep, err = gc.Run(ctx, s, opts)
	require.NoError(t, err)
	require.Len(t, rep.Deleted, 1, "10m1.5s after its supersession gen 1 goes")
	assert.EqualValues(t, 1, rep.Deleted[0].Seq)
}

// TestPinAllowsClockResolution: a pin counts until its TTL plus a second has
// passed by the store's clock, not only its TTL.
func TestPinAllowsClockResolution(t *testing.T) {
	ctx := context.Background()
	s, advance := clockedStore()
	d := dataset(s)
	publish(t, d, false, files(2, "1"))
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	_, err = snap.Pin(ctx, time.Minute, "reader")
	require.NoError(t, err)
	publish(t, d, false, files(2, "2"))
	publish(t, d, false, files(2, "3"))
	advance(time.Minute + 500*time.Millisecond)

	opts := gc.Options{Keep: -1, Grace: -1, OrphanAge: -1}
	rep, err := gc.Run(ctx, s, opts)
	require.NoError(t, err)
	assert.NotContains(t, collected(rep), snap.Generation(), "the pin is 1m0.5s old: it still holds")
	require.NoError(t, readAll(ctx, snap), "the pinned generation reads back whole")

	advance(time.Second)
	rep, err = gc.Run(ctx, s, opts)
	require.NoError(t, err)
	assert.Contains(t, collected(rep), snap.Generation(), "at 1m1.5s the pin has expired")
	assert.Empty(t, keysUnder(t, s, commit.PinDir), "and it was dropped")
}

// TestOrphanAgeAllowsClockResolution: a staging generation whose newest
// object is the orphan age plus half a second old is left alone, and its
// writer still commits it whole.
func TestOrphanAgeAllowsClockResolution(t *testing.T) {
	ctx := context.Background()
	s, advance := clockedStore()
	d := dataset(s)
	publish(t, d, false, files(1, "1"))
	tx := stage(t, d, 2)
	advance(10*time.Minute + 500*time.Millisecond)

	rep, err := gc.Run(ctx, s, gc.Options{Keep: 1, Grace: -1, OrphanAge: 10 * time.Minute})
	require.NoError(t, err)
	assert.Empty(t, rep.Orphans, "the staged objects are 10m0.5s old: within the orphan age plus the clock's resolution")
	assert.Len(t, keysUnder(t, s, generation.Prefix(tx.Generation())), 2)

	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err, "the writer was not stopped by a horizon")
	requireComplete(t, d)
}

// TestGraceFromSuccessorDeeper: deeper in the chain too, the grace counts
// from when the successor committed, not from the generation's own commit.
func TestGraceFromSuccessorDeeper(t *testing.T) {
	ctx := context.Background()
	s, advance := clockedStore()
	d := dataset(s)
	publish(t, d, false, files(1, "1")) // committed at T
	advance(30 * time.Minute)
	publish(t, d, false, files(1, "2")) // gen 1 superseded at T+30m
	advance(time.Minute)
	publish(t, d, false, files(1, "3"))
	advance(9 * time.Minute) // now T+40m

	rep, err := gc.Run(ctx, s, gc.Options{Keep: -1, Grace: 20 * time.Minute, OrphanAge: -1})
	require.NoError(t, err)
	assert.Empty(t, rep.Deleted, "gen 1 was superseded 10 minutes ago, though committed 40 minutes ago")
}
