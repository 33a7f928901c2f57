package group

import (
	"encoding/json"
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
// carry, AppliedIn) over random heads and random sets of intents, honest
// or spoiled. Paths come from a small set, so that writers often meet.

var propPaths = []string{"a/1", "a/2", "a/b", "a/b/3", "b/1", "b/2", "c/1", "c/d/2", "e"}

var propScopes = []string{"a/", "a/b/", "b/", "c/", "c/d/"}

const propLeases = 3

type propWorld struct {
	r *rand.Rand
	h *Head
}

func entryOf(gen, path string, r *rand.Rand) generation.Entry {
	return generation.Entry{Path: path, Key: generation.DataKey(gen, path), Size: 1 + r.Int64N(9),
		SHA256: strings.Repeat(fmt.Sprintf("%x", r.IntN(16)), 64)}
}

func newPropWorld(t *testing.T, r *rand.Rand) *propWorld {
	hg := propGen(t)
	h := &Head{
		Ptr: &pointer.Pointer{Format: pointer.Format, Seq: 7, Generation: hg, Manifest: generation.ManifestKey(hg),
			ManifestSHA256: strings.Repeat("0", 64), WriteID: "w7"},
		Entries: map[string]generation.Entry{},
		Keys:    map[string]bool{},
	}
	for _, p := range propPaths {
		if r.IntN(3) > 0 {
			e := entryOf(hg, p, r)
			h.Entries[p], h.Keys[e.Key] = e, true
		}
	}
	if _, ok := h.Entries["a/b/3"]; ok {
		// A head is a valid manifest: no file where a path needs a
		// directory. Writers may still try to put one there.
		delete(h.Keys, h.Entries["a/b"].Key)
		delete(h.Entries, "a/b")
	}
	if r.IntN(2) == 0 {
		h.Ptr.Fences = map[string]uint64{}
		for l := range propLeases {
			if r.IntN(2) == 0 {
				h.Ptr.Fences[propLease(l)] = 1 + r.Uint64N(5)
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
func (w *propWorld) intent(t *testing.T) *Intent {
	r, h := w.r, w.h
	gen := propGen(t)
	in := &Intent{Format: Format, Generation: gen, Head: h.Ptr.WriteID, Seq: h.Ptr.Seq + 1,
		StagingStart: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	if r.IntN(3) == 0 {
		l := r.IntN(propLeases)
		in.Fence, in.FenceLease = 1+r.Uint64N(6), propLease(l)
	}
	paths := map[string]bool{}
	if r.IntN(3) == 0 {
		in.Scope = propScopes[r.IntN(len(propScopes))]
		for p := range h.Entries {
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
		rd := Read{Path: p}
		if e, ok := h.Entries[p]; ok {
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
func applied(own map[string]generation.Entry, in *Intent) {
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
//   - is accepted, for each carried writer, by AppliedIn;
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
		rs := &Change{Generation: mine, Read: map[string]bool{"m/x": true}, Mine: map[string]generation.Entry{}, Scope: carrierScope}
		c := Carrier{Change: rs, Writer: "carrier"}
		ownMap := map[string]generation.Entry{}
		for p, e := range h.Entries {
			ownMap[p] = e
		}
		mx := entryOf(mine, "m/x", r)
		ownMap["m/x"], rs.Mine["m/x"] = mx, mx
		if r.IntN(3) == 0 {
			// The carrier also reads a path others may read.
			p := propPaths[r.IntN(len(propPaths))]
			rs.Read[p] = true
			e := entryOf(mine, p, r)
			ownMap[p], rs.Mine[p] = e, e
			if file, _ := generation.Clash(slices.Collect(maps.Values(ownMap))); file != "" {
				continue // the carrier's own commit refuses that (Commit checks it first)
			}
		}
		own := make([]generation.Entry, 0, len(ownMap))
		for _, e := range ownMap {
			own = append(own, e)
		}
		if r.IntN(3) == 0 {
			c.Fence, c.FenceLease = 1+r.Uint64N(6), propLease(r.IntN(propLeases))
			if c.Fence < h.Ptr.FenceOf(c.FenceLease) {
				c.Fence = h.Ptr.FenceOf(c.FenceLease)
			}
		}
		var ins []*Intent
		for range r.IntN(6) {
			ins = append(ins, w.intent(t))
		}
		g := Carry(c, h, own, ins)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("iteration %d: "+format, append([]any{iter}, args...)...)
		}

		carried := map[string]*Intent{}
		for _, c := range g.Carried {
			for _, in := range ins {
				if in.Generation == c.Generation {
					carried[c.Generation] = in
				}
			}
		}
		if len(carried) != len(g.Carried) {
			fail("a writer is carried twice or carried without an intent: %v", g.Carried)
		}
		self := &Member{Reads: rs.Read, Scope: carrierScope}
		members := []*Member{self}
		want := map[string]generation.Entry{}
		for p, e := range ownMap {
			want[p] = e
		}
		for _, in := range ins { // in the order carry takes them
			if carried[in.Generation] == nil {
				continue
			}
			m, ok := Admit(in, h)
			if !ok {
				fail("carried an intent Admit refuses: %+v", in)
			}
			for _, o := range members {
				if o.Conflicts(m) {
					fail("carried writers that conflict: %v and %v", o, m)
				}
			}
			members = append(members, m)
			applied(want, in)
		}
		got := map[string]generation.Entry{}
		for _, e := range g.Entries {
			got[e.Path] = e
		}
		if len(g.Carried) == 0 {
			want = ownMap
		}
		if len(got) != len(want) {
			fail("the group has %d entries, want %d", len(got), len(want))
		}
		for p, e := range want {
			if ge, ok := got[p]; !ok || !SameEntry(ge, e) {
				fail("entry %q is %+v, want %+v", p, got[p], e)
			}
		}
		if file, _ := generation.Clash(g.Entries); file != "" {
			fail("the group puts a file at %q where a path needs a directory", file)
		}
		leases := map[string]bool{}
		if c.Fence != 0 {
			leases[c.FenceLease] = true
		}
		for _, f := range g.Fences {
			if leases[f.Lease] {
				fail("two tokens of lease %q in one commit", f.Lease)
			}
			leases[f.Lease] = true
			if f.Token < h.Ptr.FenceOf(f.Lease) {
				fail("lease %q's fence lowered from %d to %d", f.Lease, h.Ptr.FenceOf(f.Lease), f.Token)
			}
		}
		m := sortedManifest(g.Entries)
		for _, in := range carried {
			if err := AppliedIn(intentChange(in), m); err != nil {
				fail("AppliedIn refuses the group that carried %s: %v", in.Generation, err)
			}
		}
	}
}

// intentChange is the change of the writer of in, as its intent
// describes it.
func intentChange(in *Intent) *Change {
	rs := &Change{Generation: in.Generation, Read: map[string]bool{}, Mine: map[string]generation.Entry{}, Scope: in.Scope}
	for _, rd := range in.Reads {
		rs.Read[rd.Path] = true
		if rd.Set != nil {
			rs.Mine[rd.Path] = *rd.Set
		}
	}
	return rs
}

// TestAppliedInProperties checks, over random writers and manifests, that
// AppliedIn accepts a manifest that holds the writer's every change (each
// path it read as it set it, or absent; under its scope exactly its
// files), and refuses it once one of those paths is changed.
func TestAppliedInProperties(t *testing.T) {
	r := propRand(t, 0x2545f4914f6cdd1d)
	for iter := range 3000 {
		w := newPropWorld(t, r)
		in := w.intent(t)
		rs := intentChange(in)
		// Other writers' files anywhere but where this writer reads or owns.
		entries := map[string]generation.Entry{}
		for _, p := range propPaths {
			if r.IntN(2) == 0 && !rs.Read[p] && (in.Scope == "" || !strings.HasPrefix(p, in.Scope)) {
				entries[p] = entryOf(w.h.Ptr.Generation, p, r)
			}
		}
		for p, e := range rs.Mine {
			entries[p] = e
		}
		manifest := func() *generation.Manifest { return sortedManifest(slices.Collect(maps.Values(entries))) }
		if err := AppliedIn(rs, manifest()); err != nil {
			t.Fatalf("iteration %d: AppliedIn refuses a manifest that holds the change: %v", iter, err)
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
		changed := had != has || (had && !SameEntry(before, after))
		mineHere := rs.Read[p] || (in.Scope != "" && strings.HasPrefix(p, in.Scope))
		err := AppliedIn(rs, manifest())
		if want := changed && mineHere; want != (err != nil) {
			t.Fatalf("iteration %d: %q changed (%v) and the writer's (%v), AppliedIn: %v", iter, p, changed, mineHere, err)
		}
	}
}

// honestChange returns a random change of a writer whose base is h: it
// sets or removes some paths it read, with objects of its own, and may own
// a subtree whose every path it read.
func honestChange(t *testing.T, r *rand.Rand, h *Head) *Change {
	gen := propGen(t)
	c := &Change{Generation: gen, Read: map[string]bool{}, Mine: map[string]generation.Entry{}}
	for p, e := range h.Entries {
		c.Mine[p] = e
	}
	if r.IntN(3) == 0 {
		c.Scope = propScopes[r.IntN(len(propScopes))]
	}
	for range 1 + r.IntN(3) {
		p := propPaths[r.IntN(len(propPaths))]
		c.Read[p] = true
		if r.IntN(3) == 0 {
			delete(c.Mine, p)
		} else {
			c.Mine[p] = entryOf(gen, p, r)
		}
	}
	return c
}

// TestHonestIntentIsAdmittedAndApplied: the intent of any writer whose
// base is the head and whose objects are its own is admitted there, and a
// carrier with no change of its own that carries it alone writes a
// manifest AppliedIn accepts for that writer (unless the result would
// put a file where a path needs a directory: then nobody is carried).
func TestHonestIntentIsAdmittedAndApplied(t *testing.T) {
	r := propRand(t, 0x94d049bb133111eb)
	for iter := range 2000 {
		h := newPropWorld(t, r).h
		c := honestChange(t, r, h)
		in := NewIntent(c, h, Writer{Name: "w", StagingStart: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)})
		if _, ok := Admit(in, h); !ok {
			t.Fatalf("iteration %d: the honest intent %+v is refused on its head", iter, in)
		}
		own := slices.Collect(maps.Values(h.Entries))
		carrier := Carrier{Change: &Change{Generation: propGen(t), Read: map[string]bool{}, Mine: map[string]generation.Entry{}}}
		g := Carry(carrier, h, own, []*Intent{in})
		if len(g.Carried) == 0 {
			if file, _ := generation.Clash(slices.Collect(maps.Values(c.Mine))); file == "" {
				t.Fatalf("iteration %d: the honest intent is not carried, and its tree is valid", iter)
			}
			continue
		}
		if err := AppliedIn(c, sortedManifest(g.Entries)); err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
	}
}

// TestDecodeBindsTheIntentToItsHead: an intent is read only when it is
// bound to the head it is read for, names a generation and has a staging
// start.
func TestDecodeBindsTheIntentToItsHead(t *testing.T) {
	h := newPropWorld(t, rand.New(rand.NewPCG(3, 4))).h
	good := func() *Intent {
		return &Intent{Format: Format, Generation: propGen(t), Head: h.Ptr.WriteID, Seq: h.Ptr.Seq + 1,
			StagingStart: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	}
	enc := func(in *Intent) []byte {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if _, err := Decode(enc(good()), h); err != nil {
		t.Fatalf("a good intent: %v", err)
	}
	for name, spoil := range map[string]func(*Intent){
		"another head":      func(in *Intent) { in.Head = "other" },
		"another seq":       func(in *Intent) { in.Seq++ },
		"no generation":     func(in *Intent) { in.Generation = "" },
		"no staging start":  func(in *Intent) { in.StagingStart = time.Time{} },
		"an unknown format": func(in *Intent) { in.Format = Format + 1 },
	} {
		in := good()
		spoil(in)
		if _, err := Decode(enc(in), h); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	big := good()
	big.Writer = strings.Repeat("w", MaxSize)
	if _, err := Decode(enc(big), h); err == nil {
		t.Error("an intent larger than MaxSize: decoded")
	}
	if _, err := Decode([]byte(`{"format":1,"unknown":true}`), h); err == nil {
		t.Error("an unknown field: decoded")
	}
}
