package commit

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
)

// Property tests of the pure rules of group commit (admit, conflicts,
// carry, appliedIn) over random heads and random sets of intents, honest
// or spoiled. Paths come from a small set, so that writers often meet.

var propPaths = []string{"a/1", "a/2", "a/b", "a/b/3", "b/1", "b/2", "c/1", "c/d/2", "e"}

var propScopes = []string{"a/", "a/b/", "b/", "c/", "c/d/"}

const propLeases = 3

type propWorld struct {
	r *rand.Rand
	h *head
}

func entryOf(gen, path string, r *rand.Rand) generation.Entry {
	return generation.Entry{Path: path, Key: generation.DataKey(gen, path), Size: 1 + r.Int64N(9),
		SHA256: strings.Repeat(fmt.Sprintf("%x", r.IntN(16)), 64)}
}

func newPropWorld(t *testing.T, r *rand.Rand) *propWorld {
	hg := propGen(t)
	h := &head{
		ptr: &pointer.Pointer{Format: pointer.Format, Seq: 7, Generation: hg, Manifest: generation.ManifestKey(hg),
			ManifestSHA256: strings.Repeat("0", 64), WriteID: "w7"},
		entries: map[string]generation.Entry{},
		keys:    map[string]bool{},
	}
	for _, p := range propPaths {
		if r.IntN(3) > 0 {
			e := entryOf(hg, p, r)
			h.entries[p], h.keys[e.Key] = e, true
		}
	}
	if _, ok := h.entries["a/b/3"]; ok {
		// A head is a valid manifest: no file where a path needs a
		// directory. Writers may still try to put one there.
		delete(h.keys, h.entries["a/b"].Key)
		delete(h.entries, "a/b")
	}
	if r.IntN(2) == 0 {
		h.ptr.Fences = map[string]uint64{}
		for l := range propLeases {
			if r.IntN(2) == 0 {
				h.ptr.Fences[propLease(l)] = 1 + r.Uint64N(5)
			}
		}
	}
	return &propWorld{r: r, h: h}
}

func propLease(l int) string { return fmt.Sprintf("mem://x/_lease/l%d", l) }

// propRand returns a random source seeded from the clock, logging the seed
// so that a failure can be replayed.
func propRand(t *testing.T, stream uint64) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, stream))
}

// sortedManifest returns a manifest of entries, sorted by path as a
// manifest's are.
func sortedManifest(entries []generation.Entry) *generation.Manifest {
	m := &generation.Manifest{Entries: slices.Clone(entries)}
	slices.SortFunc(m.Entries, func(a, b generation.Entry) int { return strings.Compare(a.Path, b.Path) })
	return m
}

// propGen returns a fresh generation id.
func propGen(t *testing.T) string {
	t.Helper()
	g, err := generation.New()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// intent returns a random intent on the world's head: honest (it matches
// the head), or spoiled in one random way.
func (w *propWorld) intent(t *testing.T) *intent {
	r, h := w.r, w.h
	gen := propGen(t)
	in := &intent{Format: intentFormat, Generation: gen, Head: h.ptr.WriteID, Seq: h.ptr.Seq + 1,
		StagingStart: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	if r.IntN(3) == 0 {
		l := r.IntN(propLeases)
		in.Fence, in.FenceLease = 1+r.Uint64N(6), propLease(l)
	}
	paths := map[string]bool{}
	if r.IntN(3) == 0 {
		in.Scope = propScopes[r.IntN(len(propScopes))]
		for p := range h.entries {
			if strings.HasPrefix(p, in.Scope) {
				paths[p] = true
			}
		}
	}
	for range 1 + r.IntN(2) {
		paths[propPaths[r.IntN(len(propPaths))]] = true
	}
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range paths {
			if !yield(p) {
				return
			}
		}
	}) {
		rd := intentRead{Path: p}
		if e, ok := h.entries[p]; ok {
			rd.Base = &e
		}
		switch r.IntN(3) {
		case 0: // remove
		case 1:
			e := entryOf(gen, p, r)
			rd.Set = &e
		case 2:
			rd.Set = rd.Base // unchanged
		}
		in.Reads = append(in.Reads, rd)
	}
	if in.Scope != "" && r.IntN(4) == 0 {
		// Spoil the scope: a file the head has under it is not listed,
		// as if added since the writer read its base.
		for i, rd := range in.Reads {
			if rd.Base != nil && strings.HasPrefix(rd.Path, in.Scope) {
				in.Reads = slices.Delete(in.Reads, i, i+1)
				break
			}
		}
	}
	if r.IntN(4) == 0 && len(in.Reads) > 0 {
		// Spoil the base: the writer read another state of the path.
		rd := &in.Reads[r.IntN(len(in.Reads))]
		if rd.Base == nil {
			e := entryOf(propGen(t), rd.Path, r)
			rd.Base = &e
		} else {
			rd.Base = nil
		}
	}
	return in
}

// applied returns the entries of own with the intent's reads applied.
func applied(own map[string]generation.Entry, in *intent) {
	for _, rd := range in.Reads {
		if rd.Set != nil {
			own[rd.Path] = *rd.Set
		} else {
			delete(own, rd.Path)
		}
	}
}

// TestCarryProperties checks, over random heads and intents, that a
// carrier's group:
//   - carries only intents that admit takes on the head, and no two
//     writers (the carrier included) that conflict;
//   - holds every carried writer's change exactly, and, at every path no
//     carried writer read or owns, exactly the carrier's own entry (so it
//     keeps every file outside every writer's changes);
//   - raises at most one token per lease, none of the carrier's lease,
//     none below the head's fence for that lease;
//   - is accepted, for each carried writer, by appliedIn;
//   - is a valid manifest (no file where a path needs a directory).
func TestCarryProperties(t *testing.T) {
	r := propRand(t, 0x9e3779b97f4a7c15)
	for iter := range 2000 {
		w := newPropWorld(t, r)
		h := w.h
		mine := propGen(t)
		carrierScope := ""
		if r.IntN(2) == 0 {
			carrierScope = "m/"
		}
		tx := &Tx{d: New(nil), gen: mine, rebase: &Rebase{Scope: carrierScope}}
		rs := &rebaseState{read: map[string]bool{"m/x": true}, mine: map[string]generation.Entry{}}
		ownMap := map[string]generation.Entry{}
		for p, e := range h.entries {
			ownMap[p] = e
		}
		mx := entryOf(mine, "m/x", r)
		ownMap["m/x"], rs.mine["m/x"] = mx, mx
		if r.IntN(3) == 0 {
			// The carrier also reads a path others may read.
			p := propPaths[r.IntN(len(propPaths))]
			rs.read[p] = true
			e := entryOf(mine, p, r)
			ownMap[p], rs.mine[p] = e, e
			if file, _ := generation.Clash(slices.Collect(maps.Values(ownMap))); file != "" {
				continue // the carrier's own commit refuses that (Commit checks it first)
			}
		}
		own := make([]generation.Entry, 0, len(ownMap))
		for _, e := range ownMap {
			own = append(own, e)
		}
		var opts CommitOptions
		if r.IntN(3) == 0 {
			opts = CommitOptions{Fence: 1 + r.Uint64N(6), FenceLease: propLease(r.IntN(propLeases))}
			if opts.Fence < h.ptr.FenceOf(opts.FenceLease) {
				opts.Fence = h.ptr.FenceOf(opts.FenceLease)
			}
		}
		var ins []*intent
		for range r.IntN(6) {
			ins = append(ins, w.intent(t))
		}
		g := tx.carry(rs, h, own, ins, opts)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("iteration %d: "+format, append([]any{iter}, args...)...)
		}

		carried := map[string]*intent{}
		for _, c := range g.carried {
			for _, in := range ins {
				if in.Generation == c.Generation {
					carried[c.Generation] = in
				}
			}
		}
		if len(carried) != len(g.carried) {
			fail("a writer is carried twice or carried without an intent: %v", g.carried)
		}
		self := &member{reads: rs.read, scope: carrierScope}
		members := []*member{self}
		want := map[string]generation.Entry{}
		for p, e := range ownMap {
			want[p] = e
		}
		for _, in := range ins { // in the order carry takes them
			if carried[in.Generation] == nil {
				continue
			}
			m, ok := admit(in, h)
			if !ok {
				fail("carried an intent admit refuses: %+v", in)
			}
			for _, o := range members {
				if o.conflicts(m) {
					fail("carried writers that conflict: %v and %v", o, m)
				}
			}
			members = append(members, m)
			applied(want, in)
		}
		got := map[string]generation.Entry{}
		for _, e := range g.entries {
			got[e.Path] = e
		}
		if len(g.carried) == 0 {
			want = ownMap
		}
		if len(got) != len(want) {
			fail("the group has %d entries, want %d", len(got), len(want))
		}
		for p, e := range want {
			if ge, ok := got[p]; !ok || !sameEntry(ge, e) {
				fail("entry %q is %+v, want %+v", p, got[p], e)
			}
		}
		if file, _ := generation.Clash(g.entries); file != "" {
			fail("the group puts a file at %q where a path needs a directory", file)
		}
		leases := map[string]bool{}
		if opts.Fence != 0 {
			leases[opts.FenceLease] = true
		}
		for _, f := range g.fences {
			if leases[f.lease] {
				fail("two tokens of lease %q in one commit", f.lease)
			}
			leases[f.lease] = true
			if f.token < h.ptr.FenceOf(f.lease) {
				fail("lease %q's fence lowered from %d to %d", f.lease, h.ptr.FenceOf(f.lease), f.token)
			}
		}
		m := sortedManifest(g.entries)
		for _, in := range carried {
			ctx := &Tx{gen: in.Generation, rebase: &Rebase{Scope: in.Scope}, reads: intentState(in)}
			if err := ctx.appliedIn(m); err != nil {
				fail("appliedIn refuses the group that carried %s: %v", in.Generation, err)
			}
		}
	}
}

// intentState is the rebaseState of the writer of in, as its intent
// describes it.
func intentState(in *intent) *rebaseState {
	rs := &rebaseState{read: map[string]bool{}, mine: map[string]generation.Entry{}}
	for _, rd := range in.Reads {
		rs.read[rd.Path] = true
		if rd.Set != nil {
			rs.mine[rd.Path] = *rd.Set
		}
	}
	return rs
}

// TestAppliedInProperties checks, over random writers and manifests, that
// appliedIn accepts a manifest that holds the writer's every change (each
// path it read as it set it, or absent; under its scope exactly its
// files), and refuses it once one of those paths is changed.
func TestAppliedInProperties(t *testing.T) {
	r := propRand(t, 0x2545f4914f6cdd1d)
	for iter := range 3000 {
		w := newPropWorld(t, r)
		in := w.intent(t)
		rs := intentState(in)
		tx := &Tx{gen: in.Generation, rebase: &Rebase{Scope: in.Scope}, reads: rs}
		// Other writers' files anywhere but where this writer reads or owns.
		entries := map[string]generation.Entry{}
		for _, p := range propPaths {
			if r.IntN(2) == 0 && !rs.read[p] && (in.Scope == "" || !strings.HasPrefix(p, in.Scope)) {
				entries[p] = entryOf(w.h.ptr.Generation, p, r)
			}
		}
		for p, e := range rs.mine {
			entries[p] = e
		}
		manifest := func() *generation.Manifest { return sortedManifest(slices.Collect(maps.Values(entries))) }
		if err := tx.appliedIn(manifest()); err != nil {
			t.Fatalf("iteration %d: appliedIn refuses a manifest that holds the change: %v", iter, err)
		}
		// One random change at one path.
		p := propPaths[r.IntN(len(propPaths))]
		before, had := entries[p]
		if r.IntN(2) == 0 {
			delete(entries, p)
		} else {
			entries[p] = entryOf(propGen(t), p, r)
		}
		after, has := entries[p]
		changed := had != has || (had && !sameEntry(before, after))
		mineHere := rs.read[p] || (in.Scope != "" && strings.HasPrefix(p, in.Scope))
		err := tx.appliedIn(manifest())
		if want := changed && mineHere; want != (err != nil) {
			t.Fatalf("iteration %d: %q changed (%v) and the writer's (%v), appliedIn: %v", iter, p, changed, mineHere, err)
		}
	}
}

// TestGroupableProperties: a writer that read its whole base, keeps files
// from another snapshot, asked for no group, or whose base was not
// written by a commit, is never groupable, whatever else holds.
func TestGroupableProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		w := newPropWorld(t, r)
		tx := &Tx{d: New(nil), gen: propGen(t), rebase: &Rebase{NoGroup: r.IntN(2) == 0}}
		if r.IntN(2) == 0 {
			tx.refSeq = 1 + r.Uint64N(5)
		}
		rs := &rebaseState{read: map[string]bool{}, mine: map[string]generation.Entry{}, all: r.IntN(2) == 0}
		if r.IntN(4) == 0 {
			w.h.ptr.WriteID = ""
		}
		refused := tx.rebase.NoGroup || tx.refSeq != 0 || rs.all || w.h.ptr.WriteID == ""
		if refused && tx.groupable(rs, w.h) {
			t.Fatalf("groupable: NoGroup %v, refSeq %d, all %v, write id %q", tx.rebase.NoGroup, tx.refSeq, rs.all, w.h.ptr.WriteID)
		}
	}
}
