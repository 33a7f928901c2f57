package commit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/faults/remote"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// lostModes are the two shapes of a lost response on the wire, under the
// SDK's own retries: only the first attempt's response is lost, and the
// retry meets the write it already made; or every attempt's is, and the
// driver returns the lost response itself.
var lostModes = []struct {
	name  string
	times int // faults.Rule.Times: 0 is every attempt
}{
	{"retry meets own write", 1},
	{"every attempt lost", 0},
}

// lostPuts returns how many put responses in has lost.
func lostPuts(in *faults.Injector) int64 {
	return in.Counts().Injected[store.OpPut][faults.Lost]
}

// TestLostPointerWriteOnDrivers is TestLostResponse on the wire of each
// protocol: the pointer's create, then its update, lands and its response
// is lost. Each commit reports success, and the pointer names it.
func TestLostPointerWriteOnDrivers(t *testing.T) {
	for _, driver := range remote.Drivers {
		for _, mode := range lostModes {
			t.Run(driver+"/"+mode.name, func(t *testing.T) {
				in := faults.New(faults.Config{})
				p := remote.Open(t, driver, in)
				d := commit.New(p.Faulty)
				for seq, cond := range []faults.Cond{faults.IfNoneMatch, faults.IfMatch} {
					before := lostPuts(in)
					in.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Cond: cond, Kind: faults.Lost, Times: mode.times})
					ptr, err := publish(t, d, map[string]string{"x": string(rune('1' + seq))}, commit.CommitOptions{})
					require.NoError(t, err, "the write landed, so the commit succeeded")
					require.Greater(t, lostPuts(in), before, "the pointer write's response was lost")
					in.Clear()
					snap := checkComplete(t, commit.New(p.Clean))
					assert.Equal(t, ptr.Generation, snap.Generation())
					assert.EqualValues(t, seq+1, snap.Seq())
				}
			})
		}
	}
}

// TestBuiltOnTopOfMeOnDrivers is TestBuiltOnTopOfMe on the wire of each
// protocol: my pointer write lands, and while its response is lost another
// writer commits twice on top; the SDK's retry then meets a pointer that
// moved on. I must find my generation by walking the parent chain, and
// keep my objects.
func TestBuiltOnTopOfMeOnDrivers(t *testing.T) {
	for _, driver := range remote.Drivers {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			in := faults.New(faults.Config{})
			p := remote.Open(t, driver, in)
			d := commit.New(p.Faulty)
			other := commit.New(p.Clean)
			_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
			require.NoError(t, err)
			var top *pointer.Pointer
			in.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Lost, Times: 1, Then: func() {
				var err error
				top, err = publish(t, other, map[string]string{"x": "3"}, commit.CommitOptions{})
				require.NoError(t, err)
				_, err = publish(t, other, map[string]string{"x": "4"}, commit.CommitOptions{})
				require.NoError(t, err)
			}})
			tx, err := d.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.PutBytes(ctx, "x", []byte("2")))
			ptr, err := tx.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err, "my write landed and was built upon")
			require.EqualValues(t, 1, lostPuts(in))
			assert.EqualValues(t, 2, ptr.Seq)
			require.NotNil(t, top)
			assert.Equal(t, tx.Generation(), top.Parent)
			assert.NotEmpty(t, keysUnder(t, p.Clean, generation.Prefix(tx.Generation())), "my committed objects must not be discarded")
			old, err := other.OpenAt(ctx, "2")
			require.NoError(t, err)
			b, err := old.ReadFile(ctx, "x")
			require.NoError(t, err)
			assert.Equal(t, "2", string(b))
		})
	}
}

// TestCommitUnknownOnDrivers is TestCommitUnknown on the wire of each
// protocol: every response to the pointer write is lost and every read
// back is refused. The commit must say that its outcome is unknown and
// delete nothing.
func TestCommitUnknownOnDrivers(t *testing.T) {
	for _, driver := range remote.Drivers {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			in := faults.New(faults.Config{})
			p := remote.Open(t, driver, in)
			d := commit.New(p.Faulty, commit.WithRetry(commit.Retry{Attempts: 10, Base: time.Millisecond, Max: 10 * time.Millisecond}))
			_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
			require.NoError(t, err)
			tx, err := d.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.PutBytes(ctx, "x", []byte("2")))
			in.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Lost})
			in.Add(faults.Rule{Op: store.OpGet, Key: pointer.Key, Kind: faults.Refused})
			_, err = tx.Commit(ctx, commit.CommitOptions{})
			require.ErrorIs(t, err, commit.ErrCommitUnknown)
			require.Positive(t, lostPuts(in))
			in.Clear()
			assert.Len(t, keysUnder(t, p.Clean, generation.Prefix(tx.Generation())), 2, "unknown is never lost: the data and manifest stay")
			snap := checkComplete(t, commit.New(p.Clean))
			assert.Equal(t, tx.Generation(), snap.Generation(), "the write had in fact landed")
		})
	}
}

// TestLostManifestWriteOnDrivers is TestManifestSpurious412 on the wire of
// each protocol: the manifest's create lands and its response is lost.
// When the SDK's retry meets it, the commit goes on and succeeds. When
// every attempt's response is lost, the commit fails before its pointer
// write, naming the manifest: not an unknown outcome, the pointer is
// untouched, and the generation's objects are deleted.
func TestLostManifestWriteOnDrivers(t *testing.T) {
	for _, driver := range remote.Drivers {
		for _, mode := range lostModes {
			t.Run(driver+"/"+mode.name, func(t *testing.T) {
				ctx := context.Background()
				in := faults.New(faults.Config{})
				p := remote.Open(t, driver, in)
				d := commit.New(p.Faulty)
				first, err := publish(t, d, map[string]string{"a": "0"}, commit.CommitOptions{})
				require.NoError(t, err)
				tx, err := d.Begin(ctx)
				require.NoError(t, err)
				require.NoError(t, tx.PutBytes(ctx, "a", []byte("1")))
				manifest := generation.ManifestKey(tx.Generation())
				in.Add(faults.Rule{Op: store.OpPut, Key: manifest, Kind: faults.Lost, Times: mode.times})
				ptr, err := tx.Commit(ctx, commit.CommitOptions{})
				require.Positive(t, lostPuts(in), "the manifest's response was lost")
				in.Clear()
				snap := checkComplete(t, commit.New(p.Clean))
				if mode.times == 0 {
					require.Error(t, err)
					require.NotErrorIs(t, err, commit.ErrCommitUnknown)
					assert.Contains(t, err.Error(), "write manifest")
					assert.Contains(t, err.Error(), manifest)
					assert.Equal(t, first.Generation, snap.Generation(), "the pointer is untouched")
					assert.Empty(t, keysUnder(t, p.Clean, generation.Prefix(tx.Generation())))
					return
				}
				require.NoError(t, err)
				assert.Equal(t, ptr.Generation, snap.Generation())
				b, err := snap.ReadFile(ctx, "a")
				require.NoError(t, err)
				assert.Equal(t, "1", string(b))
			})
		}
	}
}
