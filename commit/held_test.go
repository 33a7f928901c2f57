package commit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// replaceManifest overwrites the manifest p names with a valid manifest of
// the same generation that holds only its first entry: it decodes, but no
// longer matches the sha256 that p recorded.
func replaceManifest(t *testing.T, s store.Store, p *pointer.Pointer) {
	t.Helper()
	ctx := context.Background()
	rc, _, err := s.Get(ctx, p.Manifest)
	require.NoError(t, err)
	b, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	m, err := generation.Decode(b)
	require.NoError(t, err)
	require.Greater(t, len(m.Entries), 1)
	m.Entries = m.Entries[:1]
	forged, err := generation.Encode(m)
	require.NoError(t, err)
	_, err = s.Put(ctx, p.Manifest, bytes.NewReader(forged), store.PutOptions{})
	require.NoError(t, err)
}

// TestWriterRefusesBaseManifestReplacedAfterCommit: a manifest replaced
// after its commit no longer matches the sha256 its pointer recorded. A
// writer that reads it as its base fails with ErrCorrupt and writes
// nothing. The Dataset that committed it, which holds the bytes it wrote,
// may build on those (they are the ones the pointer names), but never on
// the replacement.
func TestWriterRefusesBaseManifestReplacedAfterCommit(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	p, err := publish(t, d, map[string]string{"a": "1", "b": "2"}, commit.CommitOptions{})
	require.NoError(t, err)
	replaceManifest(t, s, p)

	c := store.Count(s)
	_, err = commit.New(c).Update(ctx, commit.CommitOptions{}, func(ctx context.Context, tx *commit.Tx) error {
		return tx.KeepAll(ctx)
	})
	require.ErrorIs(t, err, generation.ErrCorrupt, "a writer must not build on a manifest its pointer does not name")
	n := c.Counts()
	assert.Zero(t, n[store.OpPut]+n[store.OpDelete]+n[store.OpDeleteMany], "no writes: %s", n)

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	if err := tx.KeepAll(ctx); err != nil {
		require.ErrorIs(t, err, generation.ErrCorrupt)
		return
	}
	assert.ElementsMatch(t, []string{"a", "b"}, tx.Files(), "the entries of the manifest the pointer names")
	require.NoError(t, tx.Discard(ctx))
}

// TestRebaseRefusesHeadWhoseManifestWasReplaced: the Tx loses its
// compare-and-swap to a commit whose manifest was then replaced (it no
// longer matches the pointer's sha256). The rebase must not build on the
// replacement: the commit loses, with an error that names the mismatch,
// the pointer is left as it is and the Tx's objects are deleted.
func TestRebaseRefusesHeadWhoseManifestWasReplaced(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	fs := faults.NewStore(s)
	d := commit.New(fs)
	_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	tx := partitionWith(t, d, "mine/", map[string]string{"f": "mine"}, commit.Rebase{NoGroup: true})
	var head *pointer.Pointer
	fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
		var err error
		head, err = publish(t, commit.New(s), map[string]string{"seed": "0", "other/x": "x"}, commit.CommitOptions{})
		require.NoError(t, err)
		replaceManifest(t, s, head)
	}})
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	var lost *commit.ConflictError
	require.ErrorAs(t, err, &lost)
	assert.Contains(t, err.Error(), "does not match the sha256")
	assert.ErrorIs(t, err, generation.ErrCorrupt, "the head's manifest is corrupt")
	assert.False(t, errors.Is(err, commit.ErrCommitUnknown), "%v", err)
	assert.Equal(t, head, readPointer(t, s), "nothing built on it")
	assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
}

// TestWritersOnOneDatasetAllLand: writers that share one Dataset, each
// reading its base and changing its own subtree, all commit, by rebase or
// by group commit, while the Dataset holds the manifest one of them wrote
// or read last (run with -race: they share it).
func TestWritersOnOneDatasetAllLand(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	_, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	const writers = 8
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			errs[w] = func() error {
				tx, err := d.Begin(ctx)
				if err != nil {
					return err
				}
				if err := tx.KeepAll(ctx); err != nil {
					return err
				}
				prefix := fmt.Sprintf("w%d/", w)
				if err := tx.PutBytes(ctx, prefix+"f", []byte(prefix)); err != nil {
					return err
				}
				if err := tx.EnableRebase(commit.Rebase{Scope: prefix}); err != nil {
					return err
				}
				_, err = tx.Commit(ctx, commit.CommitOptions{})
				return err
			}()
		})
	}
	wg.Wait()
	want := map[string]string{"seed": "0"}
	for w, err := range errs {
		require.NoError(t, err, "writer %d", w)
		want[fmt.Sprintf("w%d/f", w)] = fmt.Sprintf("w%d/", w)
	}
	assert.Equal(t, want, contents(t, d))
}
