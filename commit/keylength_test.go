package commit_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// longestPath returns the longest path whose object key fits the store
// with prefix: segments of 200 bytes.
func longestPath(prefix string) string {
	n := store.MaxKeyBytes - len(prefix) - len(generation.DataKey("00000000-0000-0000-0000-000000000000", ""))
	b := []byte(strings.Repeat("p", n))
	for i := 200; i < n-1; i += 201 {
		b[i] = '/'
	}
	return string(b)
}

// TestPathTooLongForTheStoreIsRefusedBeforeAnyRequest: a path whose object
// key, with the store's prefix, is longer than object stores take is
// refused by Dataset.CheckPath and by staging, naming its length, before
// any request; the Tx commits its other files without a trace of it.
func TestPathTooLongForTheStoreIsRefusedBeforeAnyRequest(t *testing.T) {
	ctx := context.Background()
	counted := store.Count(store.WithPrefix(mem.New(), "team/daily/"))
	d := commit.New(counted)
	fits := longestPath("team/daily/")
	require.Len(t, generation.DataKey("00000000-0000-0000-0000-000000000000", fits), store.MaxKeyBytes-len("team/daily/"))
	long := fits + "p"
	require.NoError(t, generation.CheckPath(long), "the path itself is valid")

	require.NoError(t, d.CheckPath(fits))
	err := d.CheckPath(long)
	require.Error(t, err)
	assert.True(t, errors.Is(err, store.ErrInvalidKey), "%v", err)
	assert.Contains(t, err.Error(), "1025 bytes")

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	before := counted.Counts()
	err = tx.PutBytes(ctx, long, []byte("x"))
	require.Error(t, err)
	assert.True(t, errors.Is(err, store.ErrInvalidKey), "%v", err)
	assert.Equal(t, before, counted.Counts(), "a refused path sends no request")

	require.NoError(t, tx.PutBytes(ctx, fits, []byte("fits")))
	require.NoError(t, tx.PutBytes(ctx, "other", []byte("other")))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	var paths []string
	for _, e := range snap.Files() {
		paths = append(paths, e.Path)
	}
	assert.ElementsMatch(t, []string{fits, "other"}, paths)
}
