package commit_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// pinKeys lists the pins of the store.
func pinKeys(t *testing.T, s store.Store) []string { return testenv.Keys(t, s, commit.PinDir) }

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

// currentWithFaults is a holder of a minute's pins, and the current
// snapshot of a clockedDataset read through a store whose faults the test
// sets; s is the store beneath.
func currentWithFaults(t *testing.T) (*commit.PinHolder, *commit.Snapshot, store.Store, *faults.Store) {
	t.Helper()
	_, s, _ := clockedDataset(t)
	fs := faults.NewStore(s)
	snap, err := commit.New(fs).Open(context.Background())
	require.NoError(t, err)
	return commit.NewPinHolder(time.Minute, "test", nil), snap, s, fs
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
	h, snap, s, fs := currentWithFaults(t)
	fs.Add(faults.Rule{Op: store.OpPut, Key: commit.PinDir, Kind: faults.Refused, Times: 1})
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
	h, snap, s, fs := currentWithFaults(t)
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

// The last Drop, or Close, lands between a renewal's HEAD and its PUT,
// which writes the pin again after it was released: nothing stays pinned.
func TestPinHolderReleasesAPinItsRenewalWroteAfterTheGenerationWasLetGo(t *testing.T) {
	for name, letGo := range map[string]func(h *commit.PinHolder, gen string) error{
		"drop":  func(h *commit.PinHolder, gen string) error { h.Drop(context.Background(), gen); return nil },
		"close": func(h *commit.PinHolder, _ string) error { return h.Close(context.Background()) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			h, snap, s, fs := currentWithFaults(t)
			h.Hold(ctx, snap)
			require.Len(t, pinKeys(t, s), 1)
			fs.Add(faults.Rule{Op: store.OpPut, Key: commit.PinDir, Kind: faults.Latency, Times: 1, Then: func() {
				require.NoError(t, letGo(h, snap.Generation()))
				require.Empty(t, pinKeys(t, s), "the pin was released")
			}})
			h.Renew(ctx)
			require.Empty(t, pinKeys(t, s), "a pin written after its generation was let go is released")
		})
	}
}

// A renewal fails on the way (a 500 on its HEAD) while the pin is live:
// the old pin stays until the new one is written, so the generation is
// never without a pin.
func TestPinHolderKeepsAPinThatFailedToRenewUntilItsSuccessorIsWritten(t *testing.T) {
	ctx := context.Background()
	h, snap, s, fs := currentWithFaults(t)
	h.Hold(ctx, snap)
	old := pinKeys(t, s)
	require.Len(t, old, 1)
	fs.Add(faults.Rule{Op: store.OpHead, Key: commit.PinDir, Kind: faults.Internal, Times: 1})
	var during []string
	fs.Add(faults.Rule{Op: store.OpPut, Key: commit.PinDir, Kind: faults.Latency, Times: 1, Then: func() {
		// a collector listing _pin/ now sees what is here
		for _, k := range pinKeys(t, s) {
			if strings.Contains(k, snap.Generation()) {
				during = append(during, k)
			}
		}
	}})
	h.Renew(ctx)
	require.True(t, h.Pinned(snap.Generation()))
	require.NotEmpty(t, during, "while the new pin is written, the generation is held by some live pin (the old one never expired)")
}

// A reader holds seq 1, below the collector's reach unless pinned. A
// collector runs while the renewal writes a new pin, with and without a
// 500 on the renewal's HEAD: seq 1 is kept either way.
func TestPinHolderRenewalThatFailsOnTheWayNeverLetsTheCollectorTakeTheGeneration(t *testing.T) {
	for _, fault := range []bool{false, true} {
		ctx := context.Background()
		_, s, _ := clockedDataset(t) // seq 1 and 2
		fs := faults.NewStore(s)
		d := commit.New(fs)
		first, err := d.OpenAt(ctx, "1")
		require.NoError(t, err)
		h := commit.NewPinHolder(time.Minute, "test", nil)
		h.Hold(ctx, first)
		require.True(t, h.Pinned(first.Generation()))
		if fault {
			fs.Add(faults.Rule{Op: store.OpHead, Key: commit.PinDir, Kind: faults.Internal, Times: 1})
		}
		ran := false
		fs.Add(faults.Rule{Op: store.OpPut, Key: commit.PinDir, Kind: faults.Latency, Times: 1, Then: func() {
			_, err := gc.Run(ctx, s, gc.Options{Keep: -1, Grace: -1, OrphanAge: -1})
			require.NoError(t, err)
			ran = true
		}})
		h.Renew(ctx)
		require.True(t, ran)
		e, _ := first.Manifest.Find("a")
		_, err = s.Head(ctx, e.Key)
		require.NoError(t, err, "fault=%v: the generation a reader holds is kept while its pin is live", fault)
	}
}
