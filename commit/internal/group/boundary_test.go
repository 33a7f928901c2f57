package group

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
)

// Tests of the rules at their boundaries: the exact size and binding an
// intent is read with, the head's keys and openness, which changes are
// groupable, the intent a change makes, tokens equal to a fence, the
// unnamed lease, the room a fence takes in the pointer, and the pointer
// value a carried writer learns.

// TestDecodeSizeBoundIsExact: an intent of exactly MaxSize bytes is read,
// one of MaxSize+1 (what a carrier's limited read returns of any larger
// one) is not.
func TestDecodeSizeBoundIsExact(t *testing.T) {
	h, gen := testHead(t)
	in := validIntent(h, gen)
	sized := func(n int) []byte {
		in.Writer = "w"
		b, err := json.Marshal(in)
		require.NoError(t, err)
		in.Writer = strings.Repeat("w", 1+n-len(b))
		b, err = json.Marshal(in)
		require.NoError(t, err)
		require.Equal(t, n, len(b))
		return b
	}
	_, err := Decode(sized(MaxSize), h)
	assert.NoError(t, err, "an intent of MaxSize bytes")
	_, err = Decode(sized(MaxSize+1), h)
	assert.Error(t, err, "an intent of MaxSize+1 bytes")
}

// TestDecodeRefusesEveryOtherBinding: an intent is read only when it names
// the head's write id and the seq after the head's, not a lower or higher
// seq and not the head's generation.
func TestDecodeRefusesEveryOtherBinding(t *testing.T) {
	h, gen := testHead(t)
	for name, spoil := range map[string]func(*Intent){
		"the head's seq":        func(in *Intent) { in.Seq = h.Ptr.Seq },
		"a lower seq":           func(in *Intent) { in.Seq = h.Ptr.Seq - 1 },
		"two seqs on":           func(in *Intent) { in.Seq = h.Ptr.Seq + 2 },
		"the head's generation": func(in *Intent) { in.Head = h.Ptr.Generation },
	} {
		in := validIntent(h, gen)
		spoil(in)
		b, err := json.Marshal(in)
		require.NoError(t, err)
		_, err = Decode(b, h)
		assert.Error(t, err, name)
	}
}

// TestNewHeadRecordsEveryEntryAndItsOpenness: a head maps each entry of
// its manifest by path and records each key it references; it is open
// exactly when its commit rebased at least o.Rebased times or carried at
// least o.Carried writers.
func TestNewHeadRecordsEveryEntryAndItsOpenness(t *testing.T) {
	h, _ := testHead(t)
	m := &generation.Manifest{Entries: slices.Collect(maps.Values(h.Entries))}
	carried := func(n int) []generation.Carried { return make([]generation.Carried, n) }
	three, one := Openness{Rebased: 3, Carried: 2}, Openness{Rebased: 1, Carried: 1}
	for _, c := range []struct {
		o                Openness
		rebased, carries int
		open             bool
	}{
		{three, 0, 0, false},
		{three, 2, 0, false},
		{three, 3, 0, true},
		{three, 4, 0, true},
		{three, 0, 1, false},
		{three, 2, 1, false},
		{three, 0, 2, true},
		{three, 0, 3, true},
		{one, 0, 0, false},
		{one, 1, 0, true},
		{one, 0, 1, true},
	} {
		m.Rebased, m.Carried = c.rebased, carried(c.carries)
		got := NewHead(h.Ptr, m, c.o)
		assert.Equal(t, c.open, got.Open, "%+v: rebased %d, carried %d", c.o, c.rebased, c.carries)
		assert.Equal(t, h.Entries, got.Entries)
		assert.Equal(t, h.Keys, got.Keys)
	}
}

// TestReferencesOwnOrHeadProperties checks, over random heads and
// changes, that a change is groupable exactly when every entry it sets at
// a path it read references an object of its own generation or one the
// head references; the files it kept and did not read do not count (a
// carrier takes those from its head), whatever they reference.
func TestReferencesOwnOrHeadProperties(t *testing.T) {
	r := propRand(t, 0xbf58476d1ce4e5b9)
	for iter := range 2000 {
		h := newPropWorld(t, r).h
		c := honestChange(t, r, h)
		other := propGen(t)
		want := true
		for p := range c.Mine {
			switch r.IntN(4) {
			case 0: // an object of another generation (a kept file the head no longer references, if not read)
				e := entryOf(other, p, r)
				c.Mine[p] = e
				if c.Read[p] {
					want = false
				}
			case 1: // one the head references, at another path
				for _, he := range h.Entries {
					e := c.Mine[p]
					e.Key = he.Key
					c.Mine[p] = e
					break
				}
			case 2: // its own
				c.Mine[p] = entryOf(c.Generation, p, r)
			}
		}
		if got := c.ReferencesOwnOrHead(h); got != want {
			t.Fatalf("iteration %d: ReferencesOwnOrHead is %v, want %v, for %+v", iter, got, want, c)
		}
	}
}

// TestNewIntentDescribesTheChangeOnItsHead checks, over random heads and
// changes, that the intent NewIntent makes is read by Decode on its head
// (bound to its write id and next seq), keeps the writer's token with its
// lease (and names no lease without a token), and lists every path read
// with the head's entry and the writer's, and every path the head has
// under the scope that the writer did not read with the head's entry
// unchanged, whatever the change holds there.
func TestNewIntentDescribesTheChangeOnItsHead(t *testing.T) {
	r := propRand(t, 0xd6e8feb86659fd93)
	for iter := range 2000 {
		h := newPropWorld(t, r).h
		c := honestChange(t, r, h)
		for p := range c.Mine {
			if !c.Read[p] && r.IntN(2) == 0 {
				c.Mine[p] = entryOf(c.Generation, p, r) // a stale kept file
			}
		}
		w := Writer{Name: "w", StagingStart: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
		if r.IntN(2) == 0 {
			w.Fence = 1 + r.Uint64N(9)
		}
		w.FenceLease = []string{"", propLease(0)}[r.IntN(2)]
		in := NewIntent(c, h, w)
		b, err := json.Marshal(in)
		require.NoError(t, err)
		if _, err := Decode(b, h); err != nil {
			t.Fatalf("iteration %d: the intent is not read on its head: %v", iter, err)
		}
		wantLease := w.FenceLease
		if w.Fence == 0 {
			wantLease = ""
		}
		if in.Fence != w.Fence || in.FenceLease != wantLease {
			t.Fatalf("iteration %d: token %d of lease %q, want %d of %q", iter, in.Fence, in.FenceLease, w.Fence, wantLease)
		}
		listed := map[string]Read{}
		for _, rd := range in.Reads {
			listed[rd.Path] = rd
		}
		for p := range h.Entries {
			if c.Scope != "" && strings.HasPrefix(p, c.Scope) && !c.Read[p] {
				rd, ok := listed[p]
				if !ok || rd.Base == nil || rd.Set == nil || !SameEntry(*rd.Base, h.Entries[p]) || !SameEntry(*rd.Set, h.Entries[p]) {
					t.Fatalf("iteration %d: %q under the scope, not read: %+v, want the head's entry kept", iter, p, rd)
				}
			}
		}
		for p := range c.Read {
			rd, ok := listed[p]
			he, inHead := h.Entries[p]
			me, inMine := c.Mine[p]
			if !ok || (rd.Base != nil) != inHead || (inHead && !SameEntry(*rd.Base, he)) ||
				(rd.Set != nil) != inMine || (inMine && !SameEntry(*rd.Set, me)) {
				t.Fatalf("iteration %d: %q read: %+v", iter, p, rd)
			}
		}
	}
}

// TestAdmitTakesATokenEqualToItsFence: a writer whose token equals its
// lease's fence (its lease committed with it before) passes its own
// commit's guard, and so a carrier's, for a named lease and the unnamed
// one alike.
func TestAdmitTakesATokenEqualToItsFence(t *testing.T) {
	for _, lease := range []string{"l", ""} {
		h, gen := testHead(t)
		in := validIntent(h, gen)
		in.Fence, in.FenceLease = 4, lease
		h.Ptr.Fences = map[string]uint64{"l": 4}
		h.Ptr.Fence = 4
		_, ok := Admit(in, h)
		assert.True(t, ok, "lease %q", lease)
	}
}

// TestCarryTakesTheUnnamedLease: a token given without a lease identity is
// of the unnamed lease; a carrier that holds no token carries a writer
// with one, raising that fence, and a carrier that holds one does not.
func TestCarryTakesTheUnnamedLease(t *testing.T) {
	h, _ := testHead(t)
	c, own := carrierOn(t, h)
	in := leaseIntent(t, h, "a", "", 3)
	g := Carry(c, h, own, []*Intent{in})
	assert.Equal(t, []string{in.Generation}, carriedGens(g))
	assert.Equal(t, []Fence{{"", 3}}, g.Fences)

	c.Fence = 3
	g = Carry(c, h, own, []*Intent{in})
	assert.Empty(t, g.Carried, "a second token of the carrier's own (unnamed) lease")
}

// TestCarryThatCarriesNobodyRaisesNoFence: when the result would put a
// file where a path needs a directory, nobody is carried, and no fence of
// a writer left out is raised.
func TestCarryThatCarriesNobodyRaisesNoFence(t *testing.T) {
	h, _ := testHead(t)
	c, own := carrierOn(t, h)
	fenced := leaseIntent(t, h, "q/z", "l", 5)
	dir := leaseIntent(t, h, "m", "", 0) // a file where the carrier has m/x
	g := Carry(c, h, own, []*Intent{fenced, dir})
	assert.Empty(t, g.Carried)
	assert.Empty(t, g.Fences)
	assert.Equal(t, own, g.Entries)
}

// TestCarryNamesEachWriterCarried: the group names each writer carried by
// its generation and its writer's name, in the order taken.
func TestCarryNamesEachWriterCarried(t *testing.T) {
	h, _ := testHead(t)
	c, own := carrierOn(t, h)
	a := leaseIntent(t, h, "a", "", 0)
	a.Writer = "alice"
	b := leaseIntent(t, h, "b", "", 0)
	b.Writer = "bob"
	g := Carry(c, h, own, []*Intent{a, b})
	assert.Equal(t, []generation.Carried{{Generation: a.Generation, Writer: "alice"}, {Generation: b.Generation, Writer: "bob"}}, g.Carried)
}

// TestCarryTakesAFenceExactlyWhenThePointerFits: a carried writer's fence
// is taken exactly when the pointer the carrier sends fits with it: the
// head's values, the next seq (here one digit longer), the head as parent,
// the carrier's writer, message, meta and token, a commit time, and the
// writer's token. Grown by one byte of meta past the largest that fits,
// the writer is left out.
func TestCarryTakesAFenceExactlyWhenThePointerFits(t *testing.T) {
	h, _ := testHead(t)
	h.Ptr.Seq = 9
	c, own := carrierOn(t, h)
	c.Writer, c.Fence, c.FenceLease = "carrier", 123456789, "mine"
	in := leaseIntent(t, h, "a", "theirs", 987654321)
	with := func(n int) Carrier {
		o := c
		o.Message, o.Meta = "m", map[string]string{"k": strings.Repeat("v", n)}
		return o
	}
	fits := func(n int) bool {
		o := with(n)
		p := *h.Ptr
		p.Seq, p.Parent, p.Writer, p.Message, p.Meta = 10, h.Ptr.Generation, o.Writer, o.Message, o.Meta
		p.CommittedAt = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC) // the longest
		p.RaiseFence(o.FenceLease, o.Fence)
		p.RaiseFence(in.FenceLease, in.Fence)
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
	assert.Equal(t, []string{in.Generation}, carriedGens(Carry(with(lo), h, own, []*Intent{in})), "the largest meta that fits")
	assert.Empty(t, Carry(with(lo+1), h, own, []*Intent{in}).Carried, "one byte more")
}

// TestCarriedPointerIsTheCarriersValue: the pointer value a carried writer
// learns is p when p is the carrier's commit (same seq and generation),
// and otherwise the carrier's commit as its manifest tells: its seq,
// generation, parent, manifest and sha256, writer and message, never a
// later value's, and no write id.
func TestCarriedPointerIsTheCarriersValue(t *testing.T) {
	gen, parent, later := propGen(t), propGen(t), propGen(t)
	m := &generation.Manifest{Seq: 8, Generation: gen, Parent: parent, Writer: "carrier", Message: "msg", Meta: map[string]string{"k": "v"}}
	sum := strings.Repeat("5", 64)
	self := &pointer.Pointer{Format: pointer.Format, Seq: 8, Generation: gen, Parent: parent, WriteID: "w8", ManifestSHA256: sum}
	assert.Same(t, self, CarriedPointer(self, m, sum))
	want := &pointer.Pointer{Format: pointer.Format, Seq: 8, Generation: gen, Parent: parent,
		Manifest: generation.ManifestKey(gen), ManifestSHA256: sum, Writer: "carrier", Message: "msg", Meta: map[string]string{"k": "v"}}
	for name, p := range map[string]*pointer.Pointer{
		"a later value":                  {Format: pointer.Format, Seq: 9, Generation: later, Parent: gen, WriteID: "w9"},
		"another generation at that seq": {Format: pointer.Format, Seq: 8, Generation: later, Parent: parent, WriteID: "x8"},
	} {
		assert.Equal(t, want, CarriedPointer(p, m, sum), name)
	}
}

// TestAppliedInSeesAKeptFileUnderTheScope: under its scope a writer has
// its kept files too; a manifest that names it as carried with another
// entry at such a path, or without it, does not hold its change.
func TestAppliedInSeesAKeptFileUnderTheScope(t *testing.T) {
	h, gen := testHead(t)
	kept := h.Entries["p/a"]
	b := generation.Entry{Path: "p/b", Key: generation.DataKey(gen, "p/b"), Size: 1, SHA256: strings.Repeat("b", 64)}
	c := &Change{Generation: gen, Scope: "p/", Read: map[string]bool{"p/b": true},
		Mine: map[string]generation.Entry{"keep": h.Entries["keep"], "p/a": kept, "p/b": b}}
	require.NoError(t, AppliedIn(c, sortedManifest([]generation.Entry{h.Entries["keep"], kept, b})))
	other := kept
	other.SHA256 = strings.Repeat("f", 64)
	assert.Error(t, AppliedIn(c, sortedManifest([]generation.Entry{h.Entries["keep"], other, b})), "another entry at the kept path")
	assert.Error(t, AppliedIn(c, sortedManifest([]generation.Entry{h.Entries["keep"], b})), "the kept path missing")
}

// TestCarryInvariantsDirectly checks, over random heads and intents (some
// of them with tokens of the unnamed lease), what a group may hold,
// without replaying Carry's own steps:
//   - every entry references an object of the carrier's generation, of a
//     writer carried, or one the head references;
//   - under a carried writer's scope, exactly the files that writer sets;
//     at each path it read, its entry or none;
//   - writers are carried in the order given, each at most once;
//   - each fence raised is a carried writer's token of its lease, and each
//     carried writer with a token has its fence raised;
//   - a second Carry of the same input gives the same group.
func TestCarryInvariantsDirectly(t *testing.T) {
	r := propRand(t, 0x8cb92ba72f3d8dd7)
	for iter := range 2000 {
		w := newPropWorld(t, r)
		h := w.h
		if r.IntN(2) == 0 {
			h.Ptr.Fence = 1 + r.Uint64N(5)
		}
		mine := propGen(t)
		c := Carrier{Change: &Change{Generation: mine, Read: map[string]bool{"m/x": true}, Mine: map[string]generation.Entry{}}, Writer: "carrier"}
		if r.IntN(2) == 0 {
			c.Change.Scope = "m/"
		}
		ownMap := maps.Clone(h.Entries)
		mx := entryOf(mine, "m/x", r)
		ownMap["m/x"], c.Change.Mine["m/x"] = mx, mx
		if r.IntN(3) == 0 {
			c.Fence, c.FenceLease = 6, []string{"", propLease(r.IntN(propLeases))}[r.IntN(2)]
		}
		own := slices.Collect(maps.Values(ownMap))
		var ins []*Intent
		for range r.IntN(6) {
			in := w.intent(t)
			if in.Fence != 0 && r.IntN(3) == 0 {
				in.FenceLease = "" // the unnamed lease
			}
			in.Writer = "w-" + in.Generation
			ins = append(ins, in)
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("iteration %d: "+format, append([]any{iter}, args...)...)
		}
		g := Carry(c, h, own, ins)

		prefixes := []string{generation.Prefix(mine)}
		byGen := map[string]*Intent{}
		next := 0
		for _, cd := range g.Carried {
			i := slices.IndexFunc(ins, func(in *Intent) bool { return in.Generation == cd.Generation })
			if i < next {
				fail("%s carried out of order or twice", cd.Generation)
			}
			next = i + 1
			if cd.Writer != ins[i].Writer {
				fail("%s carried as writer %q, want %q", cd.Generation, cd.Writer, ins[i].Writer)
			}
			byGen[cd.Generation] = ins[i]
			prefixes = append(prefixes, generation.Prefix(cd.Generation))
		}
		got := map[string]generation.Entry{}
		for _, e := range g.Entries {
			if _, dup := got[e.Path]; dup {
				fail("two entries at %q", e.Path)
			}
			got[e.Path] = e
			if !h.Keys[e.Key] && !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(e.Key, p) }) {
				fail("entry %q references %q, of no writer in the commit nor the head", e.Path, e.Key)
			}
		}
		for _, in := range byGen {
			sets := map[string]generation.Entry{}
			for _, rd := range in.Reads {
				e, ok := got[rd.Path]
				if ok != (rd.Set != nil) || (ok && !SameEntry(e, *rd.Set)) {
					fail("%s read %q: the group has %+v, want %+v", in.Generation, rd.Path, e, rd.Set)
				}
				if rd.Set != nil {
					sets[rd.Path] = *rd.Set
				}
			}
			if in.Scope == "" {
				continue
			}
			for p, e := range got {
				if s, ok := sets[p]; strings.HasPrefix(p, in.Scope) && (!ok || !SameEntry(s, e)) {
					fail("%q under %s's scope %q is not its file: %+v", p, in.Generation, in.Scope, e)
				}
			}
		}
		want := map[string]uint64{}
		for _, in := range byGen {
			if in.Fence != 0 {
				want[in.FenceLease] = in.Fence
			}
		}
		fences := map[string]uint64{}
		for _, f := range g.Fences {
			fences[f.Lease] = f.Token
		}
		if len(fences) != len(g.Fences) || !maps.Equal(fences, want) {
			fail("fences %v, want the carried writers' tokens %v", g.Fences, want)
		}
		if c.Fence != 0 {
			if _, ok := fences[c.FenceLease]; ok {
				fail("a token of the carrier's own lease %q raised", c.FenceLease)
			}
		}
		again := Carry(c, h, own, ins)
		sortEntries := func(es []generation.Entry) []generation.Entry {
			return sortedManifest(es).Entries
		}
		if !slices.Equal(again.Carried, g.Carried) || !slices.Equal(again.Fences, g.Fences) ||
			!slices.EqualFunc(sortEntries(again.Entries), sortEntries(g.Entries), SameEntry) {
			fail("a second Carry of the same input differs")
		}
	}
}
