package commit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/store/mem"
)

// gatedClock is the Dataset's clock: once armed, its next Now waits until
// the test opens the gate (a goroutine that runs late), then reads c.
type gatedClock struct {
	*setClock
	mu      sync.Mutex
	armed   bool
	reached chan struct{}
	open    chan struct{}
}

func (g *gatedClock) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.reached, g.open = true, make(chan struct{}), make(chan struct{})
}

func (g *gatedClock) Now() time.Time {
	g.mu.Lock()
	armed, reached, open := g.armed, g.reached, g.open
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(reached)
		<-open
	}
	return g.setClock.Now()
}

// TestAheadStartPrecedesUploadsSentBeforeThePointerGET: BeginAhead returns
// before its goroutine has taken the time it sends the pointer GET at. A
// file PutFile uploads in between (at 3:04:05.9, Last-Modified 3:04:05)
// precedes that time; the GET is sent 1.2 s later and answered at once
// (Date 3:04:07), so the staging start would be 3:04:06. A collector then
// deletes the upload as an orphan and publishes the horizon 3:04:05. The
// commit must be refused (ErrStale), not publish the deleted object.
func TestAheadStartPrecedesUploadsSentBeforeThePointerGET(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2030, 1, 2, 3, 4, 5, 900e6, time.UTC)
	clock := &setClock{now: start}
	s := wholeSeconds{mem.New(mem.WithClock(clock.Now))}
	gate := &gatedClock{setClock: clock}
	d, local, p1 := committedX(t, s, gate)
	gate.arm()
	began := make(chan *commit.Tx, 1)
	go func() {
		tx, err := d.BeginAhead(ctx, p1.ManifestSHA256)
		require.NoError(t, err)
		began <- tx
	}()
	<-gate.reached // the time the GET is sent at is being taken
	var tx *commit.Tx
	select {
	case tx = <-began:
		// BeginAhead returned first: a file can be staged before then.
		stageAhead(t, tx, "x", local) // stored at 3:04:05.9, Last-Modified 3:04:05
		clock.Set(start.Add(1200 * time.Millisecond))
		close(gate.open)
	case <-time.After(2 * time.Second):
		// BeginAhead takes it before it returns: nothing can be staged
		// before it.
		close(gate.open)
		tx = <-began
		stageAhead(t, tx, "x", local)
		clock.Set(start.Add(1200 * time.Millisecond))
	}
	require.NotNil(t, tx.Base()) // the GET is answered at 3:04:07.1, Date 3:04:07

	clock.Set(start.Add(time.Minute + 100*time.Millisecond))
	rep, err := gc.Run(ctx, s, gc.Options{Keep: 1, Grace: -1, OrphanAge: time.Minute})
	require.NoError(t, err)
	require.Len(t, rep.Orphans, 1, "the upload is an orphan's at the cutoff")
	require.Equal(t, tx.Generation(), rep.Orphans[0].Generation)

	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrStale)
	require.Equal(t, p1.Generation, checkComplete(t, d).Generation())
}

// TestFirstCommitRebasedIsHeldAgainstTheHorizon: a Tx that finds no
// pointer takes the local time as its staging start. When it loses the
// first commit to another writer and rebases (EnableRebase), that start
// is held against the horizon of the other writer's pointer: a store whose
// clock is an hour behind the machine's stores the Tx's upload at a time
// the collector's horizon reaches, while the local start is an hour
// later. The rebased commit must be refused (ErrStale), not publish the
// object the collector deleted.
func TestFirstCommitRebasedIsHeldAgainstTheHorizon(t *testing.T) {
	for _, ahead := range []bool{false, true} {
		name := "Begin"
		if ahead {
			name = "BeginAhead"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			start := time.Now().Add(-time.Hour).Truncate(time.Second).Add(500 * time.Millisecond).UTC()
			clock := &setClock{now: start}
			s := wholeSeconds{mem.New(mem.WithClock(clock.Now))}
			d := commit.New(s)
			var tx *commit.Tx
			var err error
			if ahead {
				tx, err = d.BeginAhead(ctx, "")
			} else {
				tx, err = d.Begin(ctx)
			}
			require.NoError(t, err)
			require.Nil(t, tx.Base())
			require.NoError(t, tx.EnableRebase(commit.Rebase{}))
			require.NoError(t, tx.PutBytes(ctx, "a", []byte("mine"))) // Last-Modified start

			// Another writer commits first; a minute later the collector
			// takes the Tx's upload for an orphan's.
			_, err = publish(t, commit.New(s), map[string]string{"b": "theirs"}, commit.CommitOptions{})
			require.NoError(t, err)
			clock.Set(start.Add(time.Minute + time.Second))
			rep, err := gc.Run(ctx, s, gc.Options{Keep: 1, Grace: -1, OrphanAge: time.Minute})
			require.NoError(t, err)
			require.Len(t, rep.Orphans, 1, "the upload is an orphan's at the cutoff")

			_, err = tx.Commit(ctx, commit.CommitOptions{})
			assert.ErrorIs(t, err, commit.ErrStale)
			checkComplete(t, d)
		})
	}
}
