package commit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// noDeletes is a store whose deletes are denied, as for credentials
// without s3:DeleteObject.
type noDeletes struct{ store.Store }

func (s noDeletes) DeleteMany(_ context.Context, keys []string) error {
	return store.Wrap("delete-many", keys[0], store.ErrAccess, nil)
}

// TestLeftoverSaysWhatCouldNotBeDeleted: a Tx whose staged objects could
// not be deleted, by Discard or by a Commit that lost, says which and why;
// one whose objects were deleted says nothing.
func TestLeftoverSaysWhatCouldNotBeDeleted(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(noDeletes{s})
	_, err := publish(t, d, map[string]string{"a": "1"}, commit.CommitOptions{})
	require.NoError(t, err)

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutBytes(ctx, "b", []byte("2")))
	assert.Nil(t, tx.Leftover(), "nothing was deleted yet")
	require.Error(t, tx.Discard(ctx))
	left := tx.Leftover()
	require.NotNil(t, left)
	assert.Equal(t, tx.Generation(), left.Generation)
	assert.Equal(t, []string{generation.Prefix(tx.Generation()) + "b"}, left.Keys)
	assert.ErrorIs(t, left.Err, store.ErrAccess)

	loser, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, loser.PutBytes(ctx, "c", []byte("3")))
	_, err = publish(t, d, map[string]string{"a": "4"}, commit.CommitOptions{})
	require.NoError(t, err)
	_, err = loser.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrConflict)
	left = loser.Leftover()
	require.NotNil(t, left, "the loser could not delete what it staged")
	assert.Equal(t, loser.Generation(), left.Generation)
	assert.ElementsMatch(t, keysUnder(t, s, generation.Prefix(loser.Generation())), left.Keys)
	assert.ErrorIs(t, left.Err, store.ErrAccess)

	d = commit.New(s)
	for i := range 2 {
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.PutBytes(ctx, "d", []byte("5")))
		if i == 0 {
			require.NoError(t, tx.Discard(ctx))
		} else {
			_, err = publish(t, d, map[string]string{"a": fmt.Sprint(6 + i)}, commit.CommitOptions{})
			require.NoError(t, err)
			_, err = tx.Commit(ctx, commit.CommitOptions{})
			require.True(t, errors.Is(err, commit.ErrConflict), "%v", err)
		}
		assert.Nil(t, tx.Leftover())
		assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
	}
}

// oneUndeletable is a store whose DeleteMany deletes every key but the
// first, as a batch does whose one key is under an object lock, and says
// which it could not delete.
type oneUndeletable struct{ store.Store }

func (s oneUndeletable) DeleteMany(ctx context.Context, keys []string) error {
	if err := s.Store.DeleteMany(ctx, keys[1:]); err != nil {
		return err
	}
	return store.Wrap("delete-many", keys[0], store.ErrAccess, fmt.Errorf("1 keys not deleted (%s)", store.KeyList(keys[:1])))
}

// TestLeftoverIsWhatIsLeft: a discard that deleted all but one of the
// staged objects says that one is left, not all it tried to delete.
func TestLeftoverIsWhatIsLeft(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(oneUndeletable{s})
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	for _, p := range []string{"a", "b", "c"} {
		require.NoError(t, tx.PutBytes(ctx, p, []byte(p)))
	}
	require.Error(t, tx.Discard(ctx))
	left := tx.Leftover()
	require.NotNil(t, left)
	remaining := keysUnder(t, s, generation.Prefix(tx.Generation()))
	require.Len(t, remaining, 1)
	assert.Equal(t, remaining, left.Keys, "Leftover names what is left")
}

// unlistable is oneUndeletable that cannot list either.
type unlistable struct{ oneUndeletable }

func (s unlistable) List(context.Context, store.ListRequest) (store.ListPage, error) {
	return store.ListPage{}, store.Wrap("list", "", store.ErrAccess, nil)
}

// TestLeftoverWithoutAListingIsAllItTried: when what a failed delete left
// cannot be listed, Leftover names every key it tried: any may be left.
func TestLeftoverWithoutAListingIsAllItTried(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	tx, err := commit.New(unlistable{oneUndeletable{s}}).Begin(ctx)
	require.NoError(t, err)
	for _, p := range []string{"a", "b"} {
		require.NoError(t, tx.PutBytes(ctx, p, []byte(p)))
	}
	require.Error(t, tx.Discard(ctx))
	left := tx.Leftover()
	require.NotNil(t, left)
	assert.ElementsMatch(t, []string{generation.Prefix(tx.Generation()) + "a", generation.Prefix(tx.Generation()) + "b"}, left.Keys)
}

// failsOnce is a store whose first DeleteMany fails without deleting.
type failsOnce struct {
	store.Store
	failed *bool
}

func (s failsOnce) DeleteMany(ctx context.Context, keys []string) error {
	if !*s.failed {
		*s.failed = true
		return store.Wrap("delete-many", keys[0], nil, errors.New("connection reset"))
	}
	return s.Store.DeleteMany(ctx, keys)
}

// TestLeftoverClearedByADiscardThatWorks: a Discard tried again after one
// that failed, and that deleted everything, leaves no Leftover.
func TestLeftoverClearedByADiscardThatWorks(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	tx, err := commit.New(failsOnce{s, new(bool)}).Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutBytes(ctx, "a", []byte("a")))
	require.Error(t, tx.Discard(ctx))
	require.NotNil(t, tx.Leftover())
	require.NoError(t, tx.Discard(ctx))
	assert.Nil(t, tx.Leftover(), "nothing is left")
	assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
}
