package commit_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// dataPuts counts the PUTs of data objects (not manifests, not the
// pointer) that pass through it.
type dataPuts struct {
	store.Store
	mu   sync.Mutex
	keys map[string]int
}

func (c *dataPuts) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	if strings.HasPrefix(key, generation.Dir) && !strings.HasSuffix(key, "/"+generation.ManifestName) {
		c.mu.Lock()
		if c.keys == nil {
			c.keys = map[string]int{}
		}
		c.keys[key]++
		c.mu.Unlock()
	}
	return c.Store.Put(ctx, key, body, opts)
}

func (c *dataPuts) count() (puts, twice int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.keys {
		puts += n
		if n > 1 {
			twice++
		}
	}
	return puts, twice
}

// contents reads every file of the current generation.
func contents(t *testing.T, d *commit.Dataset) map[string]string {
	t.Helper()
	ctx := context.Background()
	snap := checkComplete(t, d)
	out := map[string]string{}
	for _, e := range snap.Files() {
		b, err := snap.ReadFile(ctx, e.Path)
		require.NoError(t, err)
		out[e.Path] = string(b)
	}
	return out
}

// partition begins a Tx that keeps everything and replaces the subtree
// prefix with files, rebasing within it.
func partition(t *testing.T, d *commit.Dataset, prefix string, files map[string]string) *commit.Tx {
	t.Helper()
	return partitionWith(t, d, prefix, files, commit.Rebase{})
}

// partitionWith is partition with the rebase settings r (its Scope is
// the prefix).
func partitionWith(t *testing.T, d *commit.Dataset, prefix string, files map[string]string, r commit.Rebase) *commit.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.KeepAll(ctx))
	for _, e := range tx.Entries() {
		if strings.HasPrefix(e.Path, prefix) {
			tx.Remove(e.Path)
		}
	}
	for p, c := range files {
		require.NoError(t, tx.PutBytes(ctx, prefix+p, []byte(c)))
	}
	r.Scope = prefix
	require.NoError(t, tx.EnableRebase(r))
	return tx
}

// TestRebaseDisjoint: writers of disjoint partitions, all begun on one
// base, all commit, in turn and at once, each generation holding exactly
// the union; nothing is uploaded twice, and every rebased manifest has the
// winner as parent and the Tx's staging start.
func TestRebaseDisjoint(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		puts := &dataPuts{Store: s}
		d := commit.New(puts)
		_, err := publish(t, d, map[string]string{"keep": "k", "p0/old": "o"}, commit.CommitOptions{})
		require.NoError(t, err)
		want := map[string]string{"keep": "k"}

		// In turn: every commit after the first loses its CAS and rebases.
		const n = 4
		var txs []*commit.Tx
		for i := range n {
			files := map[string]string{"a": fmt.Sprint("a", i), "b": fmt.Sprint("b", i)}
			txs = append(txs, partition(t, d, fmt.Sprintf("p%d/", i), files))
			for p, c := range files {
				want[fmt.Sprintf("p%d/%s", i, p)] = c
			}
		}
		for i, tx := range txs {
			prev, attrs, err := pointer.Read(ctx, s)
			require.NoError(t, err)
			p, err := tx.Commit(ctx, commit.CommitOptions{Message: fmt.Sprint("p", i)})
			require.NoError(t, err, "writer %d", i)
			assert.Equal(t, min(i, 1), tx.Rebased(), "writer %d", i)
			assert.Equal(t, prev.Seq+1, p.Seq)
			assert.Equal(t, prev.Generation, p.Parent, "the parent is the winner")
			snap := checkComplete(t, d)
			assert.Equal(t, p.Generation, snap.Generation())
			assert.Equal(t, prev.Generation, snap.Manifest.Parent)
			assert.Equal(t, prev.ManifestSHA256, snap.Manifest.ParentManifestSHA256)
			if i > 0 {
				assert.NotEqual(t, tx.Generation(), p.Generation, "a rebased manifest has a fresh id")
				orig := readManifest(t, s, tx.Generation())
				assert.True(t, orig.StagingStart.Equal(snap.Manifest.StagingStart), "the staging start is the Tx's")
				assert.Equal(t, fmt.Sprint("p", i), snap.Manifest.Message)
			}
			// The collector's grace counts from when the parent was
			// superseded: the winner's commit time, not the base's.
			assert.True(t, prev.CommittedAtServer(attrs.LastModified).Equal(snap.Manifest.BaseCommittedAt),
				"base_committed_at %s, the winner committed at %s", snap.Manifest.BaseCommittedAt, prev.CommittedAtServer(attrs.LastModified))
		}
		assert.Equal(t, want, contents(t, d), "the union, with p0/old removed")
		got, twice := puts.count()
		assert.Equal(t, 2+2*n, got, "data PUTs: the seed and each writer's, once")
		assert.Zero(t, twice)

		// At once.
		base := readPointer(t, s)
		txs = txs[:0]
		for i := range n {
			files := map[string]string{"c": fmt.Sprint("c", i)}
			txs = append(txs, partition(t, d, fmt.Sprintf("q%d/", i), files))
			want[fmt.Sprintf("q%d/c", i)] = fmt.Sprint("c", i)
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i, tx := range txs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = tx.Commit(ctx, commit.CommitOptions{})
			}()
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "writer %d", i)
		}
		assert.Equal(t, want, contents(t, d))
		carried := 0
		for _, tx := range txs {
			if tx.CarriedBy() != "" {
				carried++
			}
		}
		assert.Equal(t, base.Seq+uint64(n-carried), readPointer(t, s).Seq, "one commit per writer not carried by another's")
		_, twice = puts.count()
		assert.Zero(t, twice, "nothing uploaded twice")
	})
}

func readManifest(t *testing.T, s store.Store, gen string) *generation.Manifest {
	t.Helper()
	rc, _, err := s.Get(context.Background(), generation.ManifestKey(gen))
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	m, err := generation.Decode(b)
	require.NoError(t, err)
	return m
}

// TestRebaseOverlap: writers that read a path the winner changed lose as
// without rebase, naming the paths, and delete what they staged.
func TestRebaseOverlap(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		_, err := publish(t, d, map[string]string{"shared": "0", "p/old": "o"}, commit.CommitOptions{})
		require.NoError(t, err)

		// The same path, changed by both.
		a := partition(t, d, "x/", nil)
		require.NoError(t, a.PutBytes(ctx, "shared", []byte("a")))
		b := partition(t, d, "y/", nil)
		require.NoError(t, b.PutBytes(ctx, "shared", []byte("b")))
		pa, err := a.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		_, err = b.Commit(ctx, commit.CommitOptions{})
		var ce *commit.ConflictError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, []string{"shared"}, ce.Overlap)
		assert.Equal(t, pa.Generation, ce.Winner)
		assert.Contains(t, err.Error(), "shared")
		assert.Empty(t, keysUnder(t, s, generation.Prefix(b.Generation())), "the loser deleted what it staged")

		// Two writers of one partition, on different paths: the scope
		// makes them conflict.
		a = partition(t, d, "p/", map[string]string{"one": "1"})
		b = partition(t, d, "p/", map[string]string{"two": "2"})
		_, err = a.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		_, err = b.Commit(ctx, commit.CommitOptions{})
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, []string{"p/old", "p/one"}, ce.Overlap, "the winner removed p/old and added p/one")
		assert.Equal(t, map[string]string{"shared": "a", "p/one": "1"}, contents(t, d))
		assert.Empty(t, keysUnder(t, s, generation.Prefix(b.Generation())))
	})
}

// TestRebaseRule: the rebased generation is the winner's entries with the
// loser's changes put in and its removals applied; a file it only carried
// (KeepAll) is the winner's.
func TestRebaseRule(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	_, err := publish(t, d, map[string]string{"a": "0", "b": "0", "c": "0"}, commit.CommitOptions{})
	require.NoError(t, err)

	loser, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, loser.KeepAll(ctx))
	loser.Remove("a")
	require.NoError(t, loser.PutBytes(ctx, "d", []byte("loser")))
	require.NoError(t, loser.EnableRebase(commit.Rebase{}))

	winner, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, winner.KeepAll(ctx))
	winner.Remove("c")
	require.NoError(t, winner.PutBytes(ctx, "b", []byte("winner")))
	require.NoError(t, winner.PutBytes(ctx, "e", []byte("winner")))
	_, err = winner.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)

	_, err = loser.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"b": "winner", "d": "loser", "e": "winner"}, contents(t, d))

	// Without KeepAll a Tx removes every file it does not stage, and
	// those removals are applied too; a file the winner added stays.
	replacer, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, replacer.PutBytes(ctx, "f", []byte("replacer")))
	require.NoError(t, replacer.EnableRebase(commit.Rebase{}))
	winner, err = d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, winner.KeepAll(ctx))
	require.NoError(t, winner.PutBytes(ctx, "g", []byte("winner")))
	_, err = winner.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	_, err = replacer.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, 1, replacer.Rebased())
	assert.Equal(t, map[string]string{"f": "replacer", "g": "winner"}, contents(t, d))
}

// TestRebaseReads: a Tx that read a path loses when the winner changed it,
// even if it left the path as the base had it: a file uploaded unchanged
// (PutFile's reuse), and, once BaseSnapshot was read, any path.
func TestRebaseReads(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	local := filepath.Join(t.TempDir(), "r")
	require.NoError(t, os.WriteFile(local, []byte("same"), 0o644))
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutFile(ctx, "r", local))
	require.NoError(t, tx.PutBytes(ctx, "other", []byte("0")))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)

	// r is staged again unchanged: the same entry as the base's.
	reuser, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, reuser.KeepAll(ctx))
	require.NoError(t, reuser.PutFile(ctx, "r", local))
	require.True(t, reuser.Reuses("r"))
	require.NoError(t, reuser.EnableRebase(commit.Rebase{}))

	reader, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, reader.KeepAll(ctx))
	_, err = reader.BaseSnapshot(ctx)
	require.NoError(t, err)
	require.NoError(t, reader.PutBytes(ctx, "derived", []byte("x")))
	require.NoError(t, reader.EnableRebase(commit.Rebase{}))

	_, err = publish(t, d, map[string]string{"r": "winner", "other": "1"}, commit.CommitOptions{})
	require.NoError(t, err)

	_, err = reuser.Commit(ctx, commit.CommitOptions{})
	var ce *commit.ConflictError
	require.ErrorAs(t, err, &ce, "the reuser wrote r as it was; the winner changed it")
	assert.Equal(t, []string{"r"}, ce.Overlap)
	_, err = reader.Commit(ctx, commit.CommitOptions{})
	require.ErrorAs(t, err, &ce, "the reader read the base; anything changed is a conflict")
	assert.Equal(t, []string{"other", "r"}, ce.Overlap)
	assert.Equal(t, map[string]string{"r": "winner", "other": "1"}, contents(t, d))
}

// TestRebaseLostResponse: the response of the rebased compare-and-swap is
// lost, or its SDK retry meets its own write: the read-back settles it as
// committed, on every driver.
func TestRebaseLostResponse(t *testing.T) {
	for _, kind := range []faults.Kind{faults.Lost, faults.Retried} {
		t.Run(kind.String(), func(t *testing.T) {
			testenv.EachStore(t, func(t *testing.T, s store.Store) {
				ctx := context.Background()
				fs := faults.NewStore(s)
				d := commit.New(fs)
				other := commit.New(s)
				_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
				require.NoError(t, err)
				tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
				fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
					// The winner commits while our first CAS is in flight;
					// the next pointer write, the rebased one, loses its
					// response.
					_, err := publish(t, other, map[string]string{"seed": "0", "theirs": "t"}, commit.CommitOptions{})
					require.NoError(t, err)
					fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: kind, Times: 1})
				}})
				p, err := tx.Commit(ctx, commit.CommitOptions{})
				require.NoError(t, err)
				assert.Equal(t, 1, tx.Rebased())
				assert.Equal(t, p.Generation, readPointer(t, s).Generation)
				assert.EqualValues(t, 3, p.Seq)
				assert.Equal(t, map[string]string{"seed": "0", "theirs": "t", "mine/f": "mine"}, contents(t, d))
			})
		})
	}
}

// TestRebaseSettled: after a rebase, a compare-and-swap that fails on a
// pointer rewritten without a commit (a fence registered) is not applied
// and sent again; one whose response is lost while another writer commits
// on top is settled as ours by the walk down the chain.
func TestRebaseSettled(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		fs := faults.NewStore(s)
		d := commit.New(fs)
		other := commit.New(s)
		_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
		require.NoError(t, err)

		alone := commit.Rebase{NoGroup: true} // the rebased CAS itself, not a group's
		tx := partitionWith(t, d, "mine/", map[string]string{"f": "mine"}, alone)
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			_, err := publish(t, other, map[string]string{"seed": "1"}, commit.CommitOptions{})
			require.NoError(t, err)
			fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
				require.NoError(t, other.RegisterFence(ctx, "mem://x/_lease/l", 1))
			}})
		}})
		p, err := tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		assert.Equal(t, 1, tx.Rebased())
		assert.Equal(t, p.Generation, readPointer(t, s).Generation)
		assert.Equal(t, map[string]string{"seed": "1", "mine/f": "mine"}, contents(t, d))

		tx = partitionWith(t, d, "again/", map[string]string{"f": "again"}, alone)
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			p := partitionWith(t, other, "theirs/", map[string]string{"f": "t"}, alone)
			_, err := p.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
			fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Lost, Times: 1, Then: func() {
				p := partition(t, other, "top/", map[string]string{"f": "top"})
				_, err := p.Commit(ctx, commit.CommitOptions{})
				require.NoError(t, err)
			}})
		}})
		p, err = tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err, "our rebased write landed, and another built on it")
		assert.Equal(t, 1, tx.Rebased())
		assert.Equal(t, readPointer(t, s).Parent, p.Generation)
		assert.Equal(t, map[string]string{"seed": "1", "mine/f": "mine", "again/f": "again", "theirs/f": "t", "top/f": "top"}, contents(t, d))
	})
}

// TestRebaseUnknownFirst: an ambiguous response of the first CAS that
// cannot be settled is unknown, not rebased, and deletes nothing.
func TestRebaseUnknownFirst(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fs := faults.NewStore(s)
	d := commit.New(fs, commit.WithRetry(commit.Retry{Attempts: 1, Base: time.Millisecond, Max: time.Millisecond}))
	_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Refused})
	fs.Add(faults.Rule{Op: store.OpGet, Key: pointer.Key, Kind: faults.Refused})
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrCommitUnknown)
	assert.Zero(t, tx.Rebased())
	assert.NotEmpty(t, keysUnder(t, s, generation.Prefix(tx.Generation())), "nothing deleted")
}

// TestRebaseFenced: the fence is checked again against the head a commit
// rebases on: a higher token of its lease registered meanwhile refuses it,
// and the pointer keeps the fences of the head.
func TestRebaseFenced(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		const lease, other = "mem://x/_lease/job", "mem://x/_lease/other"
		fs := faults.NewStore(s)
		d := commit.New(fs)
		direct := commit.New(s)
		_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
		require.NoError(t, err)

		// A higher token of our lease is registered as another writer
		// commits: refused.
		tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			_, err := publish(t, direct, map[string]string{"seed": "1"}, commit.CommitOptions{})
			require.NoError(t, err)
			require.NoError(t, direct.RegisterFence(ctx, lease, 6))
		}})
		_, err = tx.Commit(ctx, commit.CommitOptions{Fence: 5, FenceLease: lease})
		require.ErrorIs(t, err, commit.ErrFenced)
		assert.Equal(t, 1, tx.Rebased())
		assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
		assert.Equal(t, map[string]string{"seed": "1"}, contents(t, d))

		// Another lease's fence registered meanwhile: the rebased commit
		// carries it, and raises ours.
		tx = partition(t, d, "mine/", map[string]string{"f": "mine"})
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			_, err := publish(t, direct, map[string]string{"seed": "2"}, commit.CommitOptions{})
			require.NoError(t, err)
			require.NoError(t, direct.RegisterFence(ctx, other, 3))
		}})
		_, err = tx.Commit(ctx, commit.CommitOptions{Fence: 6, FenceLease: lease})
		require.NoError(t, err)
		assert.Equal(t, 1, tx.Rebased())
		assert.Equal(t, map[string]uint64{lease: 6, other: 3}, readPointer(t, s).Fences)
		assert.Equal(t, map[string]string{"seed": "2", "mine/f": "mine"}, contents(t, d))
	})
}

// TestRebaseHorizon: the collector's horizon is held against the Tx's
// staging start, not the time of the rebase: a horizon published at it
// while the commit was losing refuses the rebased commit; and the
// collector keeps the objects of a rebased generation, which sit under
// the Tx's own id, outside the chain. On every driver; the staging start
// is the Date of the Tx's pointer GET, as TestHorizonSameSecond reads it.
func TestRebaseHorizon(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		seen := &pointerTimes{Store: s}
		fs := faults.NewStore(seen)
		d := commit.New(fs)
		direct := commit.New(s)
		_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
		require.NoError(t, err)

		tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
		start := seen.last()
		require.False(t, start.IsZero())
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			_, err := publish(t, direct, map[string]string{"seed": "1"}, commit.CommitOptions{})
			require.NoError(t, err)
			cur, attrs, err := pointer.Read(ctx, s)
			require.NoError(t, err)
			cur.GCHorizon = start
			_, err = pointer.Write(ctx, s, cur, attrs.ETag)
			require.NoError(t, err)
		}})
		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.ErrorIs(t, err, commit.ErrStale)
		assert.Equal(t, 1, tx.Rebased())
		assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
		assert.Equal(t, map[string]string{"seed": "1"}, contents(t, d))

		// A rebased commit, then a collection that takes everything it
		// can: no kept ancestors, no grace, no orphan age. It begins once
		// the store's clock (whole seconds on S3) has passed the horizon.
		for deadline := time.Now().Add(10 * time.Second); ; {
			_, attrs, err := pointer.Read(ctx, s)
			require.NoError(t, err)
			if attrs.ServerTime.After(start) {
				break
			}
			require.True(t, time.Now().Before(deadline), "the store's clock stands at %s", attrs.ServerTime)
			time.Sleep(50 * time.Millisecond)
		}
		tx = partition(t, d, "mine/", map[string]string{"f": "mine", "g": "mine"})
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			_, err := publish(t, direct, map[string]string{"seed": "2"}, commit.CommitOptions{})
			require.NoError(t, err)
		}})
		p, err := tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		require.Equal(t, 1, tx.Rebased())
		_, err = gc.Run(ctx, s, gc.Options{Keep: -1, Grace: -1, OrphanAge: -1})
		require.NoError(t, err)
		assert.Equal(t, p.Generation, checkComplete(t, d).Generation())
		assert.Equal(t, map[string]string{"seed": "2", "mine/f": "mine", "mine/g": "mine"}, contents(t, d))
		left := keysUnder(t, s, generation.Prefix(tx.Generation()))
		assert.Subset(t, left, []string{generation.DataKey(tx.Generation(), "mine/f"), generation.DataKey(tx.Generation(), "mine/g")},
			"the rebased generation's objects stay")
	})
}

// TestRebaseHorizonCollected: with the store's clock controlled, the
// collector, run past the orphan age, deletes the superseded first
// manifest of a rebased commit and keeps its objects.
func TestRebaseHorizonCollected(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	s := mem.New(mem.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	fs := faults.NewStore(s)
	d := commit.New(fs)
	direct := commit.New(s)
	_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	tx := partition(t, d, "mine/", map[string]string{"f": "mine", "g": "mine"})
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		_, err := publish(t, direct, map[string]string{"seed": "2"}, commit.CommitOptions{})
		require.NoError(t, err)
	}})
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, tx.Rebased())
	advance(time.Hour)
	rep, err := gc.Run(ctx, s, gc.Options{Keep: -1, Grace: -1, OrphanAge: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, p.Generation, checkComplete(t, d).Generation())
	assert.Equal(t, map[string]string{"seed": "2", "mine/f": "mine", "mine/g": "mine"}, contents(t, d))
	left := keysUnder(t, s, generation.Prefix(tx.Generation()))
	assert.ElementsMatch(t, []string{generation.DataKey(tx.Generation(), "mine/f"), generation.DataKey(tx.Generation(), "mine/g")}, left,
		"the objects stay; the superseded first manifest goes: %+v", rep.Orphans)
}

// TestRebaseReproof: an object a rebased commit references outside its
// own generation, which the head does not reference, is proven again: a
// file kept from an older snapshot (KeepFrom) that is gone by then fails
// the commit instead of committing a dangling reference.
func TestRebaseReproof(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fs := faults.NewStore(s)
	d := commit.New(fs)
	direct := commit.New(s)
	_, err := publish(t, d, map[string]string{"old": "o"}, commit.CommitOptions{})
	require.NoError(t, err)
	old := checkComplete(t, d)
	_, err = publish(t, d, map[string]string{"new": "n"}, commit.CommitOptions{})
	require.NoError(t, err)

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.KeepAll(ctx))
	tx.KeepFrom(old)
	require.NoError(t, tx.EnableRebase(commit.Rebase{}))
	e, ok := old.Manifest.Find("old")
	require.True(t, ok)
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		_, err := publish(t, direct, map[string]string{"new": "n", "more": "m"}, commit.CommitOptions{})
		require.NoError(t, err)
		require.NoError(t, s.Delete(ctx, e.Key, store.DeleteOptions{}))
	}})
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrMissingObject)
	require.ErrorIs(t, err, commit.ErrConflict)
	assert.Contains(t, err.Error(), e.Key)
	assert.Equal(t, map[string]string{"new": "n", "more": "m"}, contents(t, d))
}

// TestRebaseBounds: the attempts bound is kept, and a rebase that finds
// nothing changed for what it read still reaches it.
func TestRebaseBounds(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fs := faults.NewStore(s)
	d := commit.New(fs)
	direct := commit.New(s)
	_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	tx := partition(t, d, "mine/", map[string]string{"f": "mine"})
	require.NoError(t, tx.EnableRebase(commit.Rebase{Scope: "mine/", MaxAttempts: 2}))
	n := 0
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 3, Then: func() {
		n++
		_, err := publish(t, direct, map[string]string{"seed": fmt.Sprint(n)}, commit.CommitOptions{})
		require.NoError(t, err)
	}})
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	var ce *commit.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "after 2 rebases")
	assert.Equal(t, 2, tx.Rebased())
	assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
	assert.Equal(t, map[string]string{"seed": "3"}, contents(t, d))

	bad, err := d.Begin(ctx)
	require.NoError(t, err)
	for _, scope := range []string{"p", "/p/", "a/../b/", "-x"} {
		if scope == "-x" {
			assert.Error(t, bad.EnableRebase(commit.Rebase{MaxAttempts: -1}))
			continue
		}
		assert.Error(t, bad.EnableRebase(commit.Rebase{Scope: scope}), scope)
	}
	require.NoError(t, bad.Discard(ctx))
}

// TestUpdateDoesNotRebase: the Tx of Update refuses EnableRebase, so a
// writer of another path that wins meanwhile makes fn run again, even when
// fn read nothing through BaseSnapshot.
func TestUpdateDoesNotRebase(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	runs := 0
	_, err = d.Update(ctx, commit.CommitOptions{}, func(ctx context.Context, tx *commit.Tx) error {
		runs++
		assert.ErrorIs(t, tx.EnableRebase(commit.Rebase{}), commit.ErrUpdateNoRebase)
		if runs == 1 {
			other, err := d.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, other.KeepAll(ctx))
			require.NoError(t, other.PutBytes(ctx, "other", []byte("o")))
			_, err = other.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
		}
		return tx.PutBytes(ctx, "mine", []byte(fmt.Sprint(runs)))
	})
	require.NoError(t, err)
	assert.Equal(t, 2, runs, "fn ran again after the other writer won")
	assert.Equal(t, map[string]string{"seed": "0", "other": "o", "mine": "2"}, contents(t, d))
}
