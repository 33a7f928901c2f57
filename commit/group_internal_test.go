package commit

import (
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

func testHead(t *testing.T) (*head, string) {
	t.Helper()
	hg, err := generation.New()
	require.NoError(t, err)
	h := &head{
		ptr: &pointer.Pointer{Format: pointer.Format, Seq: 7, Generation: hg, Manifest: generation.ManifestKey(hg),
			ManifestSHA256: strings.Repeat("0", 64), WriteID: "w7"},
		entries: map[string]generation.Entry{},
		keys:    map[string]bool{},
	}
	for _, p := range []string{"keep", "p/a"} {
		e := generation.Entry{Path: p, Key: generation.DataKey(hg, p), Size: 1, SHA256: strings.Repeat("a", 64)}
		h.entries[p], h.keys[e.Key] = e, true
	}
	gen, err := generation.New()
	require.NoError(t, err)
	return h, gen
}

// validIntent replaces the subtree p/ with p/b, staged under gen.
func validIntent(h *head, gen string) *intent {
	a := h.entries["p/a"]
	b := generation.Entry{Path: "p/b", Key: generation.DataKey(gen, "p/b"), Size: 1, SHA256: strings.Repeat("b", 64)}
	return &intent{
		Format: intentFormat, Generation: gen, Head: h.ptr.WriteID, Seq: h.ptr.Seq + 1,
		StagingStart: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Scope: "p/",
		Reads: []intentRead{{Path: "p/a", Base: &a}, {Path: "p/b", Set: &b}},
	}
}

func TestAdmit(t *testing.T) {
	h, gen := testHead(t)
	m, ok := admit(validIntent(h, gen), h)
	require.True(t, ok, "the valid intent is admitted")
	assert.Equal(t, map[string]bool{"p/a": true, "p/b": true}, m.reads)
	assert.Equal(t, "p/", m.scope)

	for name, spoil := range map[string]func(in *intent, h *head){
		"staged before the horizon": func(in *intent, h *head) { h.ptr.GCHorizon = in.StagingStart },
		"fenced by a higher token": func(in *intent, h *head) {
			in.Fence, in.FenceLease = 3, "l"
			h.ptr.Fences = map[string]uint64{"l": 4}
		},
		"no token where fenced writers only": func(in *intent, h *head) { h.ptr.FencedOnly = true },
		"a scope without a slash":            func(in *intent, h *head) { in.Scope = "p" },
		"a bad path":                         func(in *intent, h *head) { in.Reads[1].Path = "../x"; in.Reads[1].Set.Path = "../x" },
		"a path read twice":                  func(in *intent, h *head) { in.Reads = append(in.Reads, in.Reads[1]) },
		"a path changed since its base": func(in *intent, h *head) {
			e := h.entries["p/a"]
			e.Size = 2
			h.entries["p/a"] = e
		},
		"a path added since its base":   func(in *intent, h *head) { in.Reads[1].Base = in.Reads[1].Set },
		"a path removed since its base": func(in *intent, h *head) { delete(h.entries, "p/a") },
		"an entry for another path":     func(in *intent, h *head) { in.Reads[1].Set.Path = "p/c" },
		"an entry with a bad checksum":  func(in *intent, h *head) { in.Reads[1].Set.SHA256 = "x" },
		"an entry with a negative size": func(in *intent, h *head) { in.Reads[1].Set.Size = -1 },
		"an object neither its own nor the head's": func(in *intent, h *head) {
			other, _ := generation.New()
			in.Reads[1].Set.Key = generation.DataKey(other, "p/b")
		},
		"a path added under its scope, not read": func(in *intent, h *head) {
			e := h.entries["keep"]
			e.Path = "p/new"
			h.entries["p/new"] = e
		},
	} {
		t.Run(name, func(t *testing.T) {
			h, gen := testHead(t)
			in := validIntent(h, gen)
			spoil(in, h)
			_, ok := admit(in, h)
			assert.False(t, ok)
		})
	}

	t.Run("an object the head references", func(t *testing.T) {
		h, gen := testHead(t)
		in := validIntent(h, gen)
		in.Reads[1].Set.Key = h.entries["keep"].Key
		_, ok := admit(in, h)
		assert.True(t, ok, "kept alive by the head")
	})
}

func TestMemberConflicts(t *testing.T) {
	m := func(scope string, reads ...string) *member {
		r := map[string]bool{}
		for _, p := range reads {
			r[p] = true
		}
		return &member{reads: r, scope: scope}
	}
	for _, c := range []struct {
		a, b *member
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
		assert.Equal(t, c.want, c.a.conflicts(c.b), "%+v vs %+v", c.a, c.b)
	}
}

// TestCarryRules: carry takes each admitted intent that conflicts with no
// writer already in, raises fences, and never two tokens of one lease.
func TestCarryRules(t *testing.T) {
	h, gen := testHead(t)
	mine, err := generation.New()
	require.NoError(t, err)
	tx := &Tx{d: New(nil), gen: mine, rebase: &Rebase{Scope: "m/"}}
	rs := &rebaseState{read: map[string]bool{"m/x": true}}
	own := []generation.Entry{h.entries["keep"], h.entries["p/a"],
		{Path: "m/x", Key: generation.DataKey(mine, "m/x"), Size: 1, SHA256: strings.Repeat("c", 64)}}

	first := validIntent(h, gen)
	first.Fence, first.FenceLease = 5, "l"
	again, _ := generation.New()
	overlapping := validIntent(h, again) // the same subtree as first
	third, _ := generation.New()
	sameLease := validIntent(h, third)
	sameLease.Scope = "q/"
	sameLease.Reads = []intentRead{{Path: "q/z", Set: &generation.Entry{Path: "q/z", Key: generation.DataKey(third, "q/z"), Size: 1, SHA256: strings.Repeat("d", 64)}}}
	sameLease.Fence, sameLease.FenceLease = 6, "l"
	fourth, _ := generation.New()
	mineToo := validIntent(h, fourth) // writes under the carrier's scope
	mineToo.Scope = ""
	mineToo.Reads = []intentRead{{Path: "m/y", Set: &generation.Entry{Path: "m/y", Key: generation.DataKey(fourth, "m/y"), Size: 1, SHA256: strings.Repeat("e", 64)}}}

	g := tx.carry(rs, h, own, []*intent{first, overlapping, sameLease, mineToo}, CommitOptions{})
	require.Len(t, g.carried, 1, "only the first: the second overlaps it, the third shares its lease, the fourth the carrier's subtree")
	assert.Equal(t, gen, g.carried[0].Generation)
	assert.Equal(t, []fenceToken{{"l", 5}}, g.fences)
	paths := map[string]string{}
	for _, e := range g.entries {
		paths[e.Path] = e.Key
	}
	assert.Equal(t, map[string]string{
		"keep": h.entries["keep"].Key,
		"m/x":  generation.DataKey(mine, "m/x"),
		"p/b":  generation.DataKey(gen, "p/b"),
	}, paths, "the head's entries, the carrier's, and the carried writer's subtree replaced")

	// A carried file where another member makes a directory: nobody is
	// carried, and the carrier's own entries stand.
	clash, _ := generation.New()
	dir := validIntent(h, clash)
	dir.Scope = ""
	dir.Reads = []intentRead{{Path: "m", Set: &generation.Entry{Path: "m", Key: generation.DataKey(clash, "m"), Size: 1, SHA256: strings.Repeat("f", 64)}}}
	g = tx.carry(rs, h, own, []*intent{dir}, CommitOptions{})
	assert.Empty(t, g.carried)
	assert.Equal(t, own, g.entries)
}
