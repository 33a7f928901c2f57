package commit_test

// Refusals: each test checks that one guard refuses what it must (a
// rollback below the floor, a
// manifest that cannot be written or is not ours, broken seq links, a size
// that does not match what was staged).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// TestRollbackJustBelowFloor: a rollback to the generation right below the
// collector's floor is refused; only the floor and above may be referenced.
func TestRollbackJustBelowFloor(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	for _, x := range []string{"1", "2", "3"} {
		_, err := publish(t, d, map[string]string{"x": x}, commit.CommitOptions{})
		require.NoError(t, err)
	}
	cur, attrs, err := pointer.Read(ctx, s)
	require.NoError(t, err)
	cur.GCFloor = 2
	_, err = pointer.Write(ctx, s, cur, attrs.ETag)
	require.NoError(t, err)

	old, err := d.OpenAt(ctx, "1")
	require.NoError(t, err)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	tx.KeepFrom(old)
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrStale)
	assert.EqualValues(t, 3, checkComplete(t, d).Seq(), "the refused rollback changed nothing")
}

// TestManifestWriteFailsCommitFails: when the manifest cannot be written,
// the commit fails and the pointer stays where it was (I1).
func TestManifestWriteFailsCommitFails(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	fs := faults.NewStore(m)
	d := commit.New(fs, commit.WithRetry(commit.Retry{Attempts: 1, Base: time.Millisecond, Max: time.Millisecond}))
	_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	fs.Add(faults.Rule{Op: store.OpPut, Key: generation.Dir, Kind: faults.Refused})
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.KeepAll(ctx))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, faults.ErrInjected)
	fs.Clear()
	assert.EqualValues(t, 1, checkComplete(t, d).Seq())
}

// TestForeignManifestAtOurKey: a 412 on the manifest PUT is ours only if the
// manifest there is byte for byte ours. Another one there fails the commit,
// and the pointer does not move to it.
func TestForeignManifestAtOurKey(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutBytes(ctx, "x", []byte("2")))
	foreign, err := generation.Encode(&generation.Manifest{Format: generation.Format, Generation: tx.Generation(), Seq: 9, StagingStart: time.Now().UTC()})
	require.NoError(t, err)
	_, err = s.Put(ctx, generation.ManifestKey(tx.Generation()), bytes.NewReader(foreign), store.PutOptions{IfNoneMatch: true})
	require.NoError(t, err)

	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, store.ErrPrecondition)
	assert.Contains(t, err.Error(), "another manifest")
	assert.EqualValues(t, 1, checkComplete(t, d).Seq())
}

// TestPointerManifestSeqMismatch: a pointer whose seq differs from its
// manifest's is corrupt, and Open says so rather than read the generation.
func TestPointerManifestSeqMismatch(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	cur, attrs, err := pointer.Read(ctx, s)
	require.NoError(t, err)
	cur.Seq = 2
	_, err = pointer.Write(ctx, s, cur, attrs.ETag)
	require.NoError(t, err)
	_, err = d.Open(ctx)
	require.ErrorIs(t, err, generation.ErrCorrupt)
	assert.Contains(t, err.Error(), "manifest seq 1")
}

// TestHistoryBrokenSeqLink: a parent whose seq is not one below its
// child's breaks the history; History reports it as corrupt instead of
// walking on.
func TestHistoryBrokenSeqLink(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	p1, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	// A child of generation 1 that claims seq 3, written by hand.
	gen, err := generation.New()
	require.NoError(t, err)
	body := []byte("2")
	sum := sha256.Sum256(body)
	_, err = s.Put(ctx, generation.DataKey(gen, "x"), bytes.NewReader(body), store.PutOptions{})
	require.NoError(t, err)
	stored, err := generation.Encode(&generation.Manifest{
		Format: generation.Format, Generation: gen, Parent: p1.Generation, ParentManifestSHA256: p1.ManifestSHA256,
		Seq: 3, StagingStart: time.Now().UTC(),
		Entries: []generation.Entry{{Path: "x", Key: generation.DataKey(gen, "x"), Size: 1, SHA256: hex.EncodeToString(sum[:])}},
	})
	require.NoError(t, err)
	_, err = s.Put(ctx, generation.ManifestKey(gen), bytes.NewReader(stored), store.PutOptions{})
	require.NoError(t, err)
	msum := sha256.Sum256(stored)
	_, attrs, err := pointer.Read(ctx, s)
	require.NoError(t, err)
	_, err = pointer.Write(ctx, s, &pointer.Pointer{Seq: 3, Generation: gen, Parent: p1.Generation,
		Manifest: generation.ManifestKey(gen), ManifestSHA256: hex.EncodeToString(msum[:])}, attrs.ETag)
	require.NoError(t, err)

	snap, err := d.Open(ctx)
	require.NoError(t, err)
	var last error
	n := 0
	for _, err := range d.History(ctx, snap) {
		if err != nil {
			last = err
			break
		}
		n++
	}
	require.ErrorIs(t, last, generation.ErrCorrupt)
	assert.Equal(t, 1, n, "the walk stopped at the broken link")
}

// TestStageSizeMismatch: a body whose length differs from the size given
// (a file that changed while it was published) is refused, not staged with
// whatever size it had.
func TestStageSizeMismatch(t *testing.T) {
	ctx := context.Background()
	// Uncompressed, the store refuses the body against its declared Size;
	// compressed, the store is told no size, and Put compares what it read.
	for _, compress := range []bool{false, true} {
		d := commit.New(mem.New(), commit.WithCompression(compress))
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		err = tx.Put(ctx, "x", strings.NewReader("abc"), 5)
		require.Error(t, err, "compress=%v", compress)
		assert.Contains(t, err.Error(), `stage "x"`)
		assert.Regexp(t, `expected 5|Size says 5`, err.Error())
		assert.Empty(t, tx.Files())
		require.NoError(t, tx.Discard(ctx))
	}
}

// TestCommitRefusesAFileThatIsAlsoADirectory: a generation that holds "p1"
// and "p1/x" cannot be written to any file system, so Commit refuses it
// with ErrFileDirClash, naming both paths, and the pointer stays where it
// was.
func TestCommitRefusesAFileThatIsAlsoADirectory(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	before, err := publish(t, d, map[string]string{"seed": "0"}, commit.CommitOptions{})
	require.NoError(t, err)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutBytes(ctx, "p1", []byte("file")))
	require.NoError(t, tx.PutBytes(ctx, "p1/x", []byte("below")))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrFileDirClash)
	assert.Contains(t, err.Error(), `"p1"`)
	assert.Contains(t, err.Error(), `"p1/x"`)
	after, _, err := pointer.Read(ctx, s)
	require.NoError(t, err)
	assert.Equal(t, before.WriteID, after.WriteID, "nothing was committed")
}
