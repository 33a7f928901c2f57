package group

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
)

// Member is one writer of a group commit, as far as overlap goes: the
// paths it read one by one and the subtree it owns whole.
type Member struct {
	Reads map[string]bool
	Scope string
}

func (m *Member) covers(p string) bool {
	return m.Reads[p] || (m.Scope != "" && strings.HasPrefix(p, m.Scope))
}

// Conflicts reports whether two writers read a common path, or own nested
// subtrees: then they cannot be applied in one commit.
func (m *Member) Conflicts(o *Member) bool {
	if m.Scope != "" && o.Scope != "" && (strings.HasPrefix(m.Scope, o.Scope) || strings.HasPrefix(o.Scope, m.Scope)) {
		return true
	}
	for p := range m.Reads {
		if o.covers(p) {
			return true
		}
	}
	for p := range o.Reads {
		if m.covers(p) {
			return true
		}
	}
	return false
}

// Admit reports whether the intent can be applied on h, with the guards
// the writer's own commit would face there (the collector's horizon
// against its staging start, and its lease's fence), and returns the
// writer as a member of the group. Every path it read must be as it read
// it, every entry it sets must be valid and reference its own objects or
// h's, and it must list every path h has under its scope.
func Admit(in *Intent, h *Head) (*Member, bool) {
	cur := h.Ptr
	if !cur.GCHorizon.IsZero() && !cur.GCHorizon.Before(in.StagingStart) {
		return nil, false
	}
	if !cur.Admits(in.Fence, in.FenceLease) {
		return nil, false
	}
	if in.Scope != "" && (!strings.HasSuffix(in.Scope, "/") || generation.CheckPath(strings.TrimSuffix(in.Scope, "/")) != nil) {
		return nil, false
	}
	m := &Member{Reads: make(map[string]bool, len(in.Reads)), Scope: in.Scope}
	own := generation.Prefix(in.Generation)
	for _, r := range in.Reads {
		if generation.CheckPath(r.Path) != nil || m.Reads[r.Path] {
			return nil, false
		}
		m.Reads[r.Path] = true
		e, ok := h.Entries[r.Path]
		if ok != (r.Base != nil) || (ok && !SameEntry(e, *r.Base)) {
			return nil, false // changed since the writer's base
		}
		if r.Set != nil && (r.Set.Path != r.Path || (!strings.HasPrefix(r.Set.Key, own) && !h.Keys[r.Set.Key])) {
			return nil, false
		}
		if r.Set != nil && !validEntry(in.Generation, *r.Set) {
			return nil, false // would make the carrier's manifest invalid
		}
	}
	if in.Scope != "" {
		for p := range h.Entries {
			if strings.HasPrefix(p, in.Scope) && !m.Reads[p] {
				return nil, false // added under the scope since
			}
		}
	}
	return m, true
}

// validEntry reports whether e could stand in a manifest: a valid key,
// size, checksum, encoding and mode.
func validEntry(gen string, e generation.Entry) bool {
	m := generation.Manifest{Format: generation.Format, Generation: gen, Seq: 1, Entries: []generation.Entry{e}}
	return m.Validate() == nil
}

// Carrier is the writer that sends the commit: its change and what its
// pointer write will say.
type Carrier struct {
	Change     *Change
	Writer     string
	Message    string
	Meta       map[string]string
	Fence      uint64
	FenceLease string
}

// Fence is a fence a group commit raises for a writer it carries.
type Fence struct {
	Lease string
	Token uint64
}

// Group is what a carrier sends: the entries, and the writers carried and
// the fences they raise.
type Group struct {
	Entries []generation.Entry
	Carried []generation.Carried
	Fences  []Fence
}

// Carry adds to the carrier's rebased entries (own) every intent that
// Admit takes on h, that conflicts with no writer already in (the carrier
// first), and whose fence the pointer can take: one token per lease, the
// carrier's lease excluded, and a pointer that still encodes. Intents are
// taken in the order given. If the result would put a file where another
// writer makes a directory, nobody is carried.
func Carry(c Carrier, h *Head, own []generation.Entry, ins []*Intent) Group {
	g := Group{Entries: own}
	if len(ins) == 0 {
		return g
	}
	members := []*Member{{Reads: c.Change.Read, Scope: c.Change.Scope}}
	leases := map[string]bool{}
	if c.Fence != 0 {
		leases[c.FenceLease] = true
	}
	// probe is the next pointer as it will be sent, as far as it can be
	// known, to check that the fences of the writers carried fit.
	probe := *h.Ptr
	probe.Seq, probe.Parent, probe.Writer, probe.Message, probe.Meta = h.Ptr.Seq+1, h.Ptr.Generation, c.Writer, c.Message, c.Meta
	probe.CommittedAt = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	if c.Fence != 0 {
		probe.RaiseFence(c.FenceLease, c.Fence)
	}
	out := make(map[string]generation.Entry, len(own))
	for _, e := range own {
		out[e.Path] = e
	}
	for _, in := range ins {
		m, ok := Admit(in, h)
		if !ok || slices.ContainsFunc(members, m.Conflicts) {
			continue
		}
		if in.Fence != 0 {
			if leases[in.FenceLease] || probe.CheckFence(in.FenceLease) != nil {
				continue
			}
			next := probe
			next.RaiseFence(in.FenceLease, in.Fence)
			if pointer.Fits(&next) != nil {
				continue
			}
			probe = next
			leases[in.FenceLease] = true
			g.Fences = append(g.Fences, Fence{in.FenceLease, in.Fence})
		}
		members = append(members, m)
		for _, r := range in.Reads {
			if r.Set != nil {
				out[r.Path] = *r.Set
			} else {
				delete(out, r.Path)
			}
		}
		g.Carried = append(g.Carried, generation.Carried{Generation: in.Generation, Writer: in.Writer})
	}
	if len(g.Carried) == 0 {
		return g
	}
	es := make([]generation.Entry, 0, len(out))
	for _, e := range out {
		es = append(es, e)
	}
	if file, _ := generation.Clash(es); file != "" {
		return Group{Entries: own}
	}
	g.Entries = es
	return g
}

// AppliedIn checks that m, which names the writer of c as carried, holds
// its change: every path it read set as it has it, and under its scope
// exactly the files it has, those it kept untouched too. A manifest that
// claims the writer without them is corrupt (generation.ErrCorrupt): no
// carrier that follows the rules wrote it.
func AppliedIn(c *Change, m *generation.Manifest) error {
	bad := func(p string) error {
		return fmt.Errorf("%w: generation %s names generation %s as carried but does not hold its change of %q", generation.ErrCorrupt, m.Generation, c.Generation, p)
	}
	for p := range c.Read {
		e, ok := m.Find(p)
		mine, has := c.Mine[p]
		if ok != has || (ok && !SameEntry(e, mine)) {
			return bad(p)
		}
	}
	if c.Scope != "" {
		for _, e := range m.Entries {
			if mine, ok := c.Mine[e.Path]; strings.HasPrefix(e.Path, c.Scope) && (!ok || !SameEntry(e, mine)) {
				return bad(e.Path)
			}
		}
		for p := range c.Mine {
			if _, ok := m.Find(p); strings.HasPrefix(p, c.Scope) && !ok {
				return bad(p)
			}
		}
	}
	return nil
}

// CarriedPointer returns the pointer value of the commit m that carried a
// writer, given p, a pointer at or past it: p itself when it is that
// commit, otherwise the fields the manifest tells, with no write id. sum
// is m's sha256.
func CarriedPointer(p *pointer.Pointer, m *generation.Manifest, sum string) *pointer.Pointer {
	if p.Seq == m.Seq && p.Generation == m.Generation {
		return p
	}
	return &pointer.Pointer{
		Format:         pointer.Format,
		Seq:            m.Seq,
		Generation:     m.Generation,
		Parent:         m.Parent,
		Manifest:       generation.ManifestKey(m.Generation),
		ManifestSHA256: sum,
		Writer:         m.Writer,
		Message:        m.Message,
		Meta:           m.Meta,
	}
}
