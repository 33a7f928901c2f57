package commit_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/store/mem"
)

// TestAheadDiscardWhileThePointerIsRead: Discard while the GET is held
// deletes what was uploaded; a matching file waiting for the base then
// fails, and so does Commit; nothing is published.
func TestAheadDiscardWhileThePointerIsRead(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	held := &heldPointer{Store: s}
	d := commit.New(held)
	p1, err := publish(t, d, map[string]string{"x": "1", "y": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x"), []byte("2"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "y"), []byte("1"), 0o644))
	held.hold()
	tx, err := d.BeginAhead(ctx, p1.ManifestSHA256)
	require.NoError(t, err)
	<-held.started
	stageAhead(t, tx, "x", filepath.Join(dir, "x"))
	waiting := make(chan error, 1)
	go func() { waiting <- tx.PutFile(ctx, "y", filepath.Join(dir, "y")) }()
	require.NoError(t, tx.Discard(ctx))
	assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
	close(held.release)
	assert.Error(t, <-waiting, "a reuse after Discard")
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	assert.Error(t, err)
	assert.Equal(t, p1.Generation, checkComplete(t, d).Generation())
	assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
}

// TestAheadReplacedOnADoneContextFails: Replaced on a context that is done
// while the pointer is still being read reports the context's error, not
// that the put replaces nothing (which --max-delete would pass).
func TestAheadReplacedOnADoneContextFails(t *testing.T) {
	ctx := context.Background()
	held := &heldPointer{Store: mem.New()}
	d := commit.New(held)
	p1, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	held.hold()
	tx, err := d.BeginAhead(ctx, p1.ManifestSHA256)
	require.NoError(t, err)
	<-held.started
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = tx.Replaced(done)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = tx.Unchanged(done)
	assert.ErrorIs(t, err, context.Canceled)
	close(held.release)
	require.NoError(t, tx.Discard(ctx))
}
