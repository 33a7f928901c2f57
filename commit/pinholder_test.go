package commit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// pinKeys lists the pins of the store.
func pinKeys(t *testing.T, s store.Store) []string {
	t.Helper()
	var keys []string
	for o, err := range store.List(context.Background(), s, commit.PinDir, "", "") {
		require.NoError(t, err)
		keys = append(keys, o.Key)
	}
	return keys
}

// clockedDataset is a dataset of two commits on a mem store whose clock
// the test moves.
func clockedDataset(t *testing.T) (*commit.Dataset, store.Store, func(time.Duration)) {
	t.Helper()
	now := time.Now()
	var mu sync.Mutex
	s := mem.New(mem.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	d := commit.New(s)
	for range 2 {
		_, err := d.Update(context.Background(), commit.CommitOptions{}, func(ctx context.Context, tx *commit.Tx) error {
			return tx.PutBytes(ctx, "a", []byte(time.Now().String()))
		})
		require.NoError(t, err)
	}
	return d, s, func(by time.Duration) { mu.Lock(); now = now.Add(by); mu.Unlock() }
}

func TestPinHolderPinsAGenerationOnceUntilItsLastHoldIsDropped(t *testing.T) {
	ctx := context.Background()
	d, s, _ := clockedDataset(t)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	h := commit.NewPinHolder(time.Minute, "test", nil)
	h.Hold(ctx, snap)
	h.Hold(ctx, snap)
	require.Len(t, pinKeys(t, s), 1, "one pin for two holds")
	assert.True(t, h.Pinned(snap.Generation()))

	h.Drop(ctx, snap.Generation())
	require.Len(t, pinKeys(t, s), 1, "a hold remains")
	h.Drop(ctx, snap.Generation())
	require.Empty(t, pinKeys(t, s), "the last hold released the pin")
	assert.False(t, h.Pinned(snap.Generation()))
	h.Drop(ctx, snap.Generation()) // a drop too many changes nothing
}

func TestPinHolderRenewalPinsALapsedGenerationAgain(t *testing.T) {
	ctx := context.Background()
	d, s, advance := clockedDataset(t)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	h := commit.NewPinHolder(time.Minute, "test", nil)
	h.Hold(ctx, snap)
	old := pinKeys(t, s)
	require.Len(t, old, 1)

	h.Renew(ctx)
	require.Equal(t, old, pinKeys(t, s), "a live pin is renewed in place")

	advance(2 * time.Minute) // the pin lapsed: it cannot be renewed
	h.Renew(ctx)
	now := pinKeys(t, s)
	require.Len(t, now, 1, "the lapsed pin is gone and a new one written")
	assert.NotEqual(t, old, now)
	assert.True(t, h.Pinned(snap.Generation()))
	require.NoError(t, h.Close(ctx))
	require.Empty(t, pinKeys(t, s))
}

func TestPinHolderRenewalWritesAPinTheStoreRefusedAtFirst(t *testing.T) {
	ctx := context.Background()
	_, s, _ := clockedDataset(t)
	fs := faults.NewStore(s)
	snap, err := commit.New(fs).Open(ctx)
	require.NoError(t, err)
	fs.Add(faults.Rule{Op: store.OpPut, Key: commit.PinDir, Kind: faults.Refused, Times: 1})
	h := commit.NewPinHolder(time.Minute, "test", nil)
	h.Hold(ctx, snap)
	assert.False(t, h.Pinned(snap.Generation()))
	require.Empty(t, pinKeys(t, s))

	h.Renew(ctx)
	assert.True(t, h.Pinned(snap.Generation()))
	require.Len(t, pinKeys(t, s), 1)
}

// A pin whose write lands after its generation was dropped is released:
// nothing is left pinned that no one holds.
func TestPinHolderReleasesAPinWrittenAfterItsGenerationWasDropped(t *testing.T) {
	ctx := context.Background()
	_, s, _ := clockedDataset(t)
	fs := faults.NewStore(s)
	snap, err := commit.New(fs).Open(ctx)
	require.NoError(t, err)
	h := commit.NewPinHolder(time.Minute, "test", nil)
	written, drop := make(chan struct{}), make(chan struct{})
	fs.Add(faults.Rule{Op: store.OpPut, Key: commit.PinDir, Kind: faults.Held, Times: 1, Then: func() {
		close(written)
		<-drop
	}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Hold(ctx, snap)
	}()
	<-written
	require.Len(t, pinKeys(t, s), 1, "the pin is written; its response is held")
	h.Drop(ctx, snap.Generation())
	close(drop)
	<-done
	require.Empty(t, pinKeys(t, s))
	assert.False(t, h.Pinned(snap.Generation()))
}

func TestPinHolderCloseReleasesEveryPin(t *testing.T) {
	ctx := context.Background()
	d, s, _ := clockedDataset(t)
	h := commit.NewPinHolder(time.Minute, "test", nil)
	for _, ref := range []string{"1", "2"} {
		snap, err := d.OpenAt(ctx, ref)
		require.NoError(t, err)
		h.Hold(ctx, snap)
	}
	require.Len(t, pinKeys(t, s), 2)
	require.NoError(t, h.Close(ctx))
	require.Empty(t, pinKeys(t, s))
	h.Renew(ctx)
	require.Empty(t, pinKeys(t, s), "nothing is held after Close")
}
