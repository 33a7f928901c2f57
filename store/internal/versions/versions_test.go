package versions

import (
	"errors"
	"iter"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
)

func listing(vs ...Version) iter.Seq2[Version, error] {
	return func(yield func(Version, error) bool) {
		for _, v := range vs {
			if !yield(v, nil) {
				return
			}
		}
	}
}

func TestKeys(t *testing.T) {
	sorted, prefix := Keys([]string{"a/b/2", "a/b/1", "a/b/2", "a/c"})
	assert.Equal(t, []string{"a/b/1", "a/b/2", "a/c"}, sorted)
	assert.Equal(t, "a/", prefix)
	sorted, prefix = Keys([]string{"k"})
	assert.Equal(t, []string{"k"}, sorted)
	assert.Equal(t, "k", prefix)
	sorted, _ = Keys(nil)
	assert.Empty(t, sorted)
}

func TestCollect(t *testing.T) {
	v := func(key, id string, latest bool) Version { return Version{Key: key, ID: id, Latest: latest, Size: 1} }
	t.Run("only the keys, older apart, stops after the last", func(t *testing.T) {
		stop := false
		list := func(yield func(Version, error) bool) {
			for _, e := range []Version{v("k", "1", true), v("k1", "3", true), v("k1", "2", false), v("k10", "4", true), v("k2", "5", true)} {
				if !yield(e, nil) {
					return
				}
			}
			stop = true // read past the last key
		}
		p, err := Collect([]string{"k1"}, list)
		require.NoError(t, err)
		assert.Equal(t, []Version{v("k1", "3", true)}, p.Latest)
		assert.Equal(t, []Version{v("k1", "2", false)}, p.Older)
		assert.False(t, stop)
	})
	t.Run("the entry a page ended with, once", func(t *testing.T) {
		p, err := Collect([]string{"a", "b"}, listing(v("a", "1", true), v("a", "1", true), v("b", "2", true)))
		require.NoError(t, err)
		assert.Len(t, p.Latest, 2)
	})
	for name, vs := range map[string][]Version{
		"the same entry three times": {v("a", "1", true), v("a", "1", true), v("a", "1", true)},
		"a page again":               {v("a", "1", true), v("b", "2", true), v("a", "1", true)},
		"keys going back":            {v("b", "2", true), v("a", "1", true)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Collect([]string{"a", "b"}, listing(vs...))
			assert.True(t, errors.Is(err, store.ErrListingStuck), "got %v", err)
		})
	}
}

func TestTally(t *testing.T) {
	vs := []Version{{Key: "a", ID: "1", Size: 3}, {Key: "a", ID: "2", Marker: true}, {Key: "b", ID: "3", Size: 5}}
	f := Tally(vs, map[[2]string]bool{{"b", "3"}: true})
	assert.Equal(t, store.Freed{Versioned: true, Versions: 1, Markers: 1, Bytes: 3}, f)
}
