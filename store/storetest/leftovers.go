package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
)

// Leftovers checks a driver's store.LeftoverSweeper. leave makes, on s,
// what a writer killed in the middle of a Put of key leaves behind (a temp
// file, an incomplete multipart upload) and returns its size in bytes.
//
// The sweep must leave younger pieces alone, remove the older ones under
// its prefix and only those, with their count and size, through the
// wrappers a dataset's store has, and never touch an object.
func Leftovers(t *testing.T, s store.Store, leave func(t *testing.T, s store.Store, key string) int64) {
	ctx := context.Background()
	_, ok := s.(store.LeftoverSweeper)
	require.True(t, ok, "%T does not implement store.LeftoverSweeper", s)
	none, err := store.SweepLeftovers(ctx, s, "", 0)
	require.NoError(t, err, "a sweep where no upload was ever started")
	assert.Zero(t, none.Count, "a sweep where no upload was ever started")
	_, err = s.Put(ctx, "ds/obj", strings.NewReader("kept"), store.PutOptions{})
	require.NoError(t, err)
	want := leave(t, s, "ds/_gen/g1/a") + leave(t, s, "ds/_gen/g2/b")
	other := leave(t, s, "other/c")

	got, err := store.SweepLeftovers(ctx, s, "", time.Hour)
	require.NoError(t, err)
	assert.Zero(t, got.Count, "pieces younger than the age are left alone")

	// S3 Date headers have whole seconds and a server may cache one for up
	// to a second, so an age read from them can fall almost two seconds
	// short: wait past the 1 s age by more than that.
	time.Sleep(3500 * time.Millisecond)
	counted := store.Count(store.WithPrefix(s, "ds/"))
	got, err = store.SweepLeftovers(ctx, counted, "", time.Second)
	require.NoError(t, err)
	assert.Equal(t, 2, got.Count)
	assert.Equal(t, want, got.Bytes)
	assert.Equal(t, got.Requests, counted.Counts(), "the sweep's requests are counted")
	if got.Requests.Total() > 0 {
		assert.EqualValues(t, 2, got.Requests[store.OpDelete], "one abort per leftover")
	}
	got, err = store.SweepLeftovers(ctx, s, "ds/", 0)
	require.NoError(t, err)
	assert.Zero(t, got.Count, "a second sweep finds nothing")

	got, err = store.SweepLeftovers(ctx, s, "", time.Second)
	require.NoError(t, err)
	assert.Equal(t, store.Leftovers{Count: 1, Bytes: other, Requests: got.Requests}, got, "outside the prefix, left for a sweep of its own")

	var keys []string
	for o, err := range store.List(ctx, s, "", "", "") {
		require.NoError(t, err)
		keys = append(keys, o.Key)
	}
	assert.Equal(t, []string{"ds/obj"}, keys, "sweeps remove no object and publish nothing")
}
