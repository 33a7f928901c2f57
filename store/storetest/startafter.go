package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
)

// startAfterPage is the page size of ListStartAfterPages: small, so that a
// few dozen keys make many pages.
const startAfterPage = 4

// ListStartAfterPages checks that StartAfter holds on every page of a
// listing, not on the first alone: pages of a few entries, each continued
// with the token of the one before, list exactly the entries after
// StartAfter, in order and once each, over at least three pages, with and
// without a delimiter. Each listing is walked twice: with StartAfter kept
// beside the token, as store.List sends it, and with the token alone, which
// the contract allows. A driver that filters by StartAfter itself (because
// its service cannot) must carry the filter in its token.
func ListStartAfterPages(t *testing.T, s store.Store) {
	t.Run("flat", func(t *testing.T) { testListStartAfterPages(t, s) })
	t.Run("delimited", func(t *testing.T) { testListStartAfterDelimiterPages(t, s) })
}

// testListStartAfterPages is the half of ListStartAfterPages without a
// delimiter.
func testListStartAfterPages(t *testing.T, s store.Store) {
	key := func(i int) string { return fmt.Sprintf("sa/%02d", i) }
	const n = 40
	keys := []string{"s0", "sz"} // outside the prefix, on either side
	for i := range n {
		keys = append(keys, key(i))
	}
	putMany(t, s, len(keys), func(i int) string { return keys[i] })
	var want []string
	for i := 13; i < n; i++ {
		want = append(want, key(i))
	}
	checkStartAfter(t, s, store.ListRequest{Prefix: "sa/", StartAfter: key(12)}, want)
	t.Run("after-every-key", func(t *testing.T) {
		for _, keep := range []bool{true, false} {
			got, _ := walkPages(t, s, store.ListRequest{Prefix: "sa/", StartAfter: key(n)}, keep)
			assert.Empty(t, got, "keep StartAfter: %v", keep)
		}
	})
}

// testListStartAfterDelimiterPages is the half of ListStartAfterPages with
// a delimiter: the filter applies to common prefixes too.
func testListStartAfterDelimiterPages(t *testing.T, s store.Store) {
	dir := func(i int) string { return fmt.Sprintf("sd/%02d", i) }
	const n = 20
	// No key is both an object and a common prefix: a file system cannot
	// store that.
	keys := []string{"s0", "sz"}
	for i := range n {
		keys = append(keys, dir(i)+"-f", dir(i)+"/a", dir(i)+"/b")
	}
	putMany(t, s, len(keys), func(i int) string { return keys[i] })
	// "sd/07/" holds keys after "sd/07-f", which itself is not after it.
	want := []string{dir(7) + "/"}
	for i := 8; i < n; i++ {
		want = append(want, dir(i)+"-f", dir(i)+"/")
	}
	checkStartAfter(t, s, store.ListRequest{Prefix: "sd/", Delimiter: "/", StartAfter: dir(7) + "-f"}, want)
}

// checkStartAfter walks req in pages, with StartAfter kept beside the token
// and without, and through store.List, and expects want, over at least
// three pages with entries.
func checkStartAfter(t *testing.T, s store.Store, req store.ListRequest, want []string) {
	t.Helper()
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("keep-start-after=%v", keep), func(t *testing.T) {
			got, pages := walkPages(t, s, req, keep)
			assert.Equal(t, want, got, "entries after %q under %q", req.StartAfter, req.Prefix)
			assert.GreaterOrEqual(t, pages, 3, "pages with entries")
		})
	}
	// The iterator, which asks for full pages, agrees.
	assert.Equal(t, want, listAll(t, s, req.Prefix, req.Delimiter, req.StartAfter), "store.List")
}

// walkPages follows req through its pages of startAfterPage entries and
// returns their entries (objects and common prefixes, in key order) and
// how many pages had any. keep says whether each continuation carries
// req.StartAfter beside the token.
func walkPages(t *testing.T, s store.Store, req store.ListRequest, keep bool) ([]string, int) {
	t.Helper()
	req.MaxKeys = startAfterPage
	after := req.StartAfter
	var got []string
	pages := 0
	// A listing of the test's keys needs far fewer requests, even where
	// every page of the service is filtered away.
	for n := 1; n <= 100; n++ {
		p, err := s.List(context.Background(), req)
		require.NoError(t, err)
		require.LessOrEqualf(t, len(p.Objects)+len(p.Prefixes), startAfterPage, "page size: %q, %q", p.Objects, p.Prefixes)
		var entries []string
		for _, o := range p.Objects {
			entries = append(entries, o.Key)
		}
		entries = append(entries, p.Prefixes...)
		slices.Sort(entries)
		for _, e := range entries {
			require.Greaterf(t, e, after, "page %d (token %q) lists %q, not after StartAfter %q", n, req.Token, e, after)
		}
		if len(entries) > 0 {
			pages++
		}
		got = append(got, entries...)
		if p.Next == "" {
			return got, pages
		}
		require.NotEqual(t, req.Token, p.Next, "the token did not move")
		req.Token = p.Next
		if !keep {
			req.StartAfter = ""
		}
	}
	t.Fatalf("the listing did not end within 100 pages")
	return nil, 0
}
