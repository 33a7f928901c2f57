package group

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
)

// Tests of the rules a carrier applies to another writer's intent: each
// refusal on its own, against a head that holds "keep" and "p/a".

func testHead(t *testing.T) (*Head, string) {
	t.Helper()
	hg, err := generation.New()
	require.NoError(t, err)
	h := &Head{
		Ptr: &pointer.Pointer{Format: pointer.Format, Seq: 7, Generation: hg, Manifest: generation.ManifestKey(hg),
			ManifestSHA256: strings.Repeat("0", 64), WriteID: "w7"},
		Entries: map[string]generation.Entry{},
		Keys:    map[string]bool{},
	}
	for _, p := range []string{"keep", "p/a"} {
		e := generation.Entry{Path: p, Key: generation.DataKey(hg, p), Size: 1, SHA256: strings.Repeat("a", 64)}
		h.Entries[p], h.Keys[e.Key] = e, true
	}
	gen, err := generation.New()
	require.NoError(t, err)
	return h, gen
}

// validIntent replaces the subtree p/ with p/b, staged under gen.
func validIntent(h *Head, gen string) *Intent {
	a := h.Entries["p/a"]
	b := generation.Entry{Path: "p/b", Key: generation.DataKey(gen, "p/b"), Size: 1, SHA256: strings.Repeat("b", 64)}
	return &Intent{
		Format: Format, Generation: gen, Head: h.Ptr.WriteID, Seq: h.Ptr.Seq + 1,
		StagingStart: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Scope: "p/",
		Reads: []Read{{Path: "p/a", Base: &a}, {Path: "p/b", Set: &b}},
	}
}

func TestAdmit(t *testing.T) {
	h, gen := testHead(t)
	m, ok := Admit(validIntent(h, gen), h)
	require.True(t, ok, "the valid intent is admitted")
	assert.Equal(t, map[string]bool{"p/a": true, "p/b": true}, m.Reads)
	assert.Equal(t, "p/", m.Scope)

	for name, spoil := range map[string]func(in *Intent, h *Head){
		"staged before the horizon": func(in *Intent, h *Head) { h.Ptr.GCHorizon = in.StagingStart },
		"fenced by a higher token": func(in *Intent, h *Head) {
			in.Fence, in.FenceLease = 3, "l"
			h.Ptr.Fences = map[string]uint64{"l": 4}
		},
		"no token where fenced writers only": func(in *Intent, h *Head) { h.Ptr.FencedOnly = true },
		"a scope without a slash":            func(in *Intent, h *Head) { in.Scope = "p" },
		"a bad path":                         func(in *Intent, h *Head) { in.Reads[1].Path = "../x"; in.Reads[1].Set.Path = "../x" },
		"a path read twice":                  func(in *Intent, h *Head) { in.Reads = append(in.Reads, in.Reads[1]) },
		"a path changed since its base": func(in *Intent, h *Head) {
			e := h.Entries["p/a"]
			e.Size = 2
			h.Entries["p/a"] = e
		},
		"a path added since its base":   func(in *Intent, h *Head) { in.Reads[1].Base = in.Reads[1].Set },
		"a path removed since its base": func(in *Intent, h *Head) { delete(h.Entries, "p/a") },
		"an entry for another path":     func(in *Intent, h *Head) { in.Reads[1].Set.Path = "p/c" },
		"an entry with a bad checksum":  func(in *Intent, h *Head) { in.Reads[1].Set.SHA256 = "x" },
		"an entry with a negative size": func(in *Intent, h *Head) { in.Reads[1].Set.Size = -1 },
		"an object neither its own nor the head's": func(in *Intent, h *Head) {
			other, _ := generation.New()
			in.Reads[1].Set.Key = generation.DataKey(other, "p/b")
		},
		"a path added under its scope, not read": func(in *Intent, h *Head) {
			e := h.Entries["keep"]
			e.Path = "p/new"
			h.Entries["p/new"] = e
		},
	} {
		t.Run(name, func(t *testing.T) {
			h, gen := testHead(t)
			in := validIntent(h, gen)
			spoil(in, h)
			_, ok := Admit(in, h)
			assert.False(t, ok)
		})
	}

	t.Run("an object the head references", func(t *testing.T) {
		h, gen := testHead(t)
		in := validIntent(h, gen)
		in.Reads[1].Set.Key = h.Entries["keep"].Key
		_, ok := Admit(in, h)
		assert.True(t, ok, "kept alive by the head")
	})
}

func TestMemberConflicts(t *testing.T) {
	m := func(scope string, reads ...string) *Member {
		r := map[string]bool{}
		for _, p := range reads {
			r[p] = true
		}
		return &Member{Reads: r, Scope: scope}
	}
	for _, c := range []struct {
		a, b *Member
		want bool
	}{
		{m("", "x"), m("", "y"), false},
		{m("", "x"), m("", "x"), true},
		{m("p/"), m("q/"), false},
		{m("p/"), m("p/"), true},
		{m("p/"), m("p/q/"), true},
		{m("p/q/"), m("p/"), true},
		{m("p/"), m("", "p/x"), true},
		{m("", "p/x"), m("p/"), true},
		{m("pq/"), m("", "p/x"), false},
		{m("p/", "p/a"), m("q/", "q/a"), false},
	} {
		assert.Equal(t, c.want, c.a.Conflicts(c.b), "%+v vs %+v", c.a, c.b)
	}
}

// TestCarryRules: Carry takes each admitted intent that conflicts with no
// writer already in, raises fences, and never two tokens of one lease.
func TestCarryRules(t *testing.T) {
	h, gen := testHead(t)
	mine, err := generation.New()
	require.NoError(t, err)
	c := Carrier{Change: &Change{Generation: mine, Read: map[string]bool{"m/x": true}, Scope: "m/"}}
	own := []generation.Entry{h.Entries["keep"], h.Entries["p/a"],
		{Path: "m/x", Key: generation.DataKey(mine, "m/x"), Size: 1, SHA256: strings.Repeat("c", 64)}}

	first := validIntent(h, gen)
	first.Fence, first.FenceLease = 5, "l"
	again, _ := generation.New()
	overlapping := validIntent(h, again) // the same subtree as first
	third, _ := generation.New()
	sameLease := validIntent(h, third)
	sameLease.Scope = "q/"
	sameLease.Reads = []Read{{Path: "q/z", Set: &generation.Entry{Path: "q/z", Key: generation.DataKey(third, "q/z"), Size: 1, SHA256: strings.Repeat("d", 64)}}}
	sameLease.Fence, sameLease.FenceLease = 6, "l"
	fourth, _ := generation.New()
	mineToo := validIntent(h, fourth) // writes under the carrier's scope
	mineToo.Scope = ""
	mineToo.Reads = []Read{{Path: "m/y", Set: &generation.Entry{Path: "m/y", Key: generation.DataKey(fourth, "m/y"), Size: 1, SHA256: strings.Repeat("e", 64)}}}

	g := Carry(c, h, own, []*Intent{first, overlapping, sameLease, mineToo})
	require.Len(t, g.Carried, 1, "only the first: the second overlaps it, the third shares its lease, the fourth the carrier's subtree")
	assert.Equal(t, gen, g.Carried[0].Generation)
	assert.Equal(t, []Fence{{"l", 5}}, g.Fences)
	paths := map[string]string{}
	for _, e := range g.Entries {
		paths[e.Path] = e.Key
	}
	assert.Equal(t, map[string]string{
		"keep": h.Entries["keep"].Key,
		"m/x":  generation.DataKey(mine, "m/x"),
		"p/b":  generation.DataKey(gen, "p/b"),
	}, paths, "the head's entries, the carrier's, and the carried writer's subtree replaced")

	// A carried file where another member makes a directory: nobody is
	// carried, and the carrier's own entries stand.
	clash, _ := generation.New()
	dir := validIntent(h, clash)
	dir.Scope = ""
	dir.Reads = []Read{{Path: "m", Set: &generation.Entry{Path: "m", Key: generation.DataKey(clash, "m"), Size: 1, SHA256: strings.Repeat("f", 64)}}}
	g = Carry(c, h, own, []*Intent{dir})
	assert.Empty(t, g.Carried)
	assert.Equal(t, own, g.Entries)
}

// leaseIntent returns an intent on h, staged under a fresh generation,
// that writes path and holds token of lease.
func leaseIntent(t *testing.T, h *Head, path, lease string, token uint64) *Intent {
	t.Helper()
	gen, err := generation.New()
	require.NoError(t, err)
	e := generation.Entry{Path: path, Key: generation.DataKey(gen, path), Size: 1, SHA256: strings.Repeat("e", 64)}
	return &Intent{Format: Format, Generation: gen, Head: h.Ptr.WriteID, Seq: h.Ptr.Seq + 1,
		StagingStart: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Fence: token, FenceLease: lease,
		Reads: []Read{{Path: path, Set: &e}}}
}

// carrierOn returns a carrier of the subtree "m/" on h and its entries.
func carrierOn(t *testing.T, h *Head) (Carrier, []generation.Entry) {
	t.Helper()
	mine, err := generation.New()
	require.NoError(t, err)
	c := Carrier{Change: &Change{Generation: mine, Read: map[string]bool{"m/x": true}, Scope: "m/"}, Writer: "carrier"}
	own := []generation.Entry{h.Entries["keep"], h.Entries["p/a"],
		{Path: "m/x", Key: generation.DataKey(mine, "m/x"), Size: 1, SHA256: strings.Repeat("c", 64)}}
	return c, own
}

func carriedGens(g Group) []string {
	var out []string
	for _, c := range g.Carried {
		out = append(out, c.Generation)
	}
	return out
}

// TestCarryLeavesNoLeaseBeyondTheFenceLimit: the pointer keeps the fences
// of at most pointer.MaxFences leases. A carrier whose own token is of a
// new lease, on a head that keeps MaxFences-2 of them, carries one writer
// of yet another new lease (the pointer then keeps MaxFences) and no
// second one, though each alone would fit: its commit could not raise
// their fences, and it would be refused. A writer of a lease the pointer
// keeps already still fits.
func TestCarryLeavesNoLeaseBeyondTheFenceLimit(t *testing.T) {
	h, _ := testHead(t)
	h.Ptr.Fences = map[string]uint64{}
	for i := range pointer.MaxFences - 2 {
		h.Ptr.Fences[fmt.Sprintf("l%d", i)] = 1
	}
	c, own := carrierOn(t, h)
	c.Fence, c.FenceLease = 1, "mine"
	first := leaseIntent(t, h, "a", "new-a", 1)
	second := leaseIntent(t, h, "b", "new-b", 1)
	known := leaseIntent(t, h, "c", "l0", 2)
	g := Carry(c, h, own, []*Intent{first, second, known})
	assert.Equal(t, []string{first.Generation, known.Generation}, carriedGens(g))
	assert.Equal(t, []Fence{{"new-a", 1}, {"l0", 2}}, g.Fences)
}

// TestCarryLeavesRoomInThePointer: a carried writer's fence must fit in
// the pointer the carrier sends, with the carrier's message and meta:
// near pointer.MaxSize, a writer with a long lease identity is left out
// (the carrier's commit would be refused, as one that does not fit), and
// one with a short identity still comes in.
func TestCarryLeavesRoomInThePointer(t *testing.T) {
	h, _ := testHead(t)
	c, own := carrierOn(t, h)
	// The largest meta value with which the pointer the carrier sends
	// still fits, less a margin that takes a short identity and not a
	// long one.
	opts := func(n int) Carrier {
		o := c
		o.Message, o.Meta = "m", map[string]string{"k": strings.Repeat("v", n)}
		return o
	}
	fits := func(n int) bool {
		p := *h.Ptr
		o := opts(n)
		p.Seq, p.Parent, p.Writer, p.Message, p.Meta = h.Ptr.Seq+1, h.Ptr.Generation, o.Writer, o.Message, o.Meta
		p.CommittedAt = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
		return pointer.Fits(&p) == nil
	}
	lo, hi := 0, pointer.MaxSize // fits(lo), !fits(hi)
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	n := lo - 100
	long := leaseIntent(t, h, "a", strings.Repeat("x", pointer.MaxIdentity), 1)
	short := leaseIntent(t, h, "b", "s", 1)
	g := Carry(opts(n), h, own, []*Intent{long, short})
	assert.Equal(t, []string{short.Generation}, carriedGens(g))
}
