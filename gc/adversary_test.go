package gc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
)

// TestCollectorOnAFullPointer (I7): the pointer keeps one fence per lease
// identity and never drops one, up to pointer.MaxSize. Once lease
// registrations have filled it, the collector's first compare-and-swap
// (which adds gc_horizon, gc_floor and gc_token) no longer encodes, so
// every run fails before deleting: the staged objects of a crashed writer
// are never removed.
func TestCollectorOnAFullPointer(t *testing.T) {
	ctx := context.Background()
	s := storeFor(t)
	d := dataset(s)
	publish(t, d, false, files(2, "first"))
	orphan := stage(t, d, 2).Generation() // a writer that crashed

	// Fill the pointer greedily: long identities until one no longer
	// fits, then shorter ones into what is left.
	n := 0
	for _, depth := range []int{400, 10, 0} {
		prefix := "s3://bucket/" + strings.Repeat("team/", depth) + "_lease/nightly-"
		var err error
		for err == nil && n < 1000 {
			if err = d.RegisterFence(ctx, fmt.Sprintf("%s%04d", prefix, n), 1); err == nil {
				n++
			}
		}
		require.Error(t, err, "the pointer did not fill up")
	}

	rep, err := gc.Run(ctx, s, strict())
	require.NoError(t, err, "collect after %d lease registrations", n)
	assert.Equal(t, []string{orphan}, genIDs(rep.Orphans))
	assert.Empty(t, keysUnder(t, s, generation.Prefix(orphan)), "the crashed writer's objects are gone")
}
