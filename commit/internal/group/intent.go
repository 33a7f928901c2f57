// Package group holds the pure rules of group commit: the intent a
// rebasing writer publishes, which intents a carrier admits on a pointer
// value, the manifest entries and fences a carrier writes, and whether a
// manifest applied a writer's change. It does no I/O and reads no clock;
// package commit talks to the store.
//
// The rule it serves: an intent is bound to one pointer value, and only
// the compare-and-swap on exactly that value can carry it.
package group

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/strictjson"
	"github.com/commitptr/commitptr/pointer"
)

// Dir holds the intents: Dir + head + "/" + id is the change of one
// writer, which a commit may apply only when it replaces the pointer
// value whose write id is head. The id is a UUIDv7 taken when the intent
// is written, so a listing shows a round's intents in the order they were
// published.
const Dir = "_intent/"

const (
	// Format is the intent format this package writes and reads.
	Format = 1
	// MaxSize bounds an intent a carrier reads.
	MaxSize = 1 << 20
	// MaxCarried bounds the writers one commit carries besides its own.
	MaxCarried = 64
)

// Key returns the key of the intent id bound to the value with write id
// head.
func Key(head, id string) string { return Dir + head + "/" + id }

// Intent is what a rebasing writer publishes for one round: every path it
// read with the entry the head has there (Base, nil if none) and its own
// (Set, nil to remove), and what the guards need. It is bound to one
// pointer value (Head, its write id) and so to one seq.
type Intent struct {
	Format       int       `json:"format"`
	Generation   string    `json:"generation"`
	Head         string    `json:"head"`
	Seq          uint64    `json:"seq"`
	Writer       string    `json:"writer,omitempty"`
	StagingStart time.Time `json:"staging_start"`
	Fence        uint64    `json:"fence,omitempty"`
	FenceLease   string    `json:"fence_lease,omitempty"`
	Scope        string    `json:"scope,omitempty"`
	Reads        []Read    `json:"reads"`
}

// Read is one path an intent read.
type Read struct {
	Path string            `json:"path"`
	Base *generation.Entry `json:"base,omitempty"`
	Set  *generation.Entry `json:"set,omitempty"`
}

// Decode parses an intent read from the store and checks that it is bound
// to h: a generation id, h's write id and the seq after h's, and a staging
// start.
func Decode(b []byte, h *Head) (*Intent, error) {
	if len(b) > MaxSize {
		return nil, fmt.Errorf("intent of %d bytes, more than %d", len(b), MaxSize)
	}
	var in Intent
	if err := strictjson.Decode(b, []int{Format}, &in); err != nil {
		return nil, err
	}
	switch {
	case generation.Valid(in.Generation) != nil:
		return nil, fmt.Errorf("intent of no generation (%q)", in.Generation)
	case in.Head != h.Ptr.WriteID || in.Seq != h.Ptr.Seq+1:
		return nil, fmt.Errorf("intent bound to %s at seq %d, not to %s at seq %d", in.Head, in.Seq, h.Ptr.WriteID, h.Ptr.Seq+1)
	case in.StagingStart.IsZero():
		return nil, fmt.Errorf("intent of generation %s has no staging start", in.Generation)
	}
	return &in, nil
}

// Openness says which pointer values are open, that is which values
// rounds are held on: those whose commit rebased at least Rebased times or
// carried at least Carried writers. The zero Openness opens every value.
type Openness struct{ Rebased, Carried int }

// Opens reports whether the value whose manifest is m is open.
func (o Openness) Opens(m *generation.Manifest) bool {
	return m.Rebased >= o.Rebased || len(m.Carried) >= o.Carried
}

// Head is the pointer value a round builds on, with its manifest.
type Head struct {
	Ptr *pointer.Pointer
	// Open is whether rounds may be held on it.
	Open bool
	// Entries and Keys are the manifest's entries by path, and the keys
	// they reference.
	Entries map[string]generation.Entry
	Keys    map[string]bool
}

// NewHead returns the head p, whose manifest is m, open as o says.
func NewHead(p *pointer.Pointer, m *generation.Manifest, o Openness) *Head {
	h := &Head{
		Ptr: p, Open: o.Opens(m),
		Entries: make(map[string]generation.Entry, len(m.Entries)), Keys: make(map[string]bool, len(m.Entries)),
	}
	for _, e := range m.Entries {
		h.Entries[e.Path] = e
		h.Keys[e.Key] = true
	}
	return h
}

// Change is one writer's change as rebase sees it: the entries it commits
// (Mine, by path), every path it read (Read), and the subtree it owns
// whole (Scope, "" for none).
type Change struct {
	Generation string
	Mine       map[string]generation.Entry
	Read       map[string]bool
	Scope      string
}

// ReferencesOwnOrHead reports whether every entry the change sets
// references an object of its own generation or one h references: a
// carrier then has nothing to prove present.
func (c *Change) ReferencesOwnOrHead(h *Head) bool {
	own := generation.Prefix(c.Generation)
	for p := range c.Read {
		if e, ok := c.Mine[p]; ok && !strings.HasPrefix(e.Key, own) && !h.Keys[e.Key] {
			return false
		}
	}
	return true
}

// Writer is what an intent says of its writer besides its change.
type Writer struct {
	Name         string
	StagingStart time.Time
	Fence        uint64
	FenceLease   string
}

// NewIntent returns the intent of c on h, which has none of the changes c
// read: every path c read, and under its scope every path h has, each
// with h's entry and c's (unchanged under the scope where c did not read
// it).
func NewIntent(c *Change, h *Head, w Writer) *Intent {
	in := &Intent{
		Format:       Format,
		Generation:   c.Generation,
		Head:         h.Ptr.WriteID,
		Seq:          h.Ptr.Seq + 1,
		Writer:       w.Name,
		StagingStart: w.StagingStart,
		Fence:        w.Fence,
		FenceLease:   w.FenceLease,
		Scope:        c.Scope,
	}
	if w.Fence == 0 {
		in.FenceLease = ""
	}
	paths := make(map[string]bool, len(c.Read))
	maps.Copy(paths, c.Read)
	if in.Scope != "" {
		for p := range h.Entries {
			if strings.HasPrefix(p, in.Scope) {
				paths[p] = true
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		r := Read{Path: p}
		if e, ok := h.Entries[p]; ok {
			r.Base = &e
		}
		switch e, ok := c.Mine[p]; {
		case c.Read[p] && ok:
			r.Set = &e
		case !c.Read[p]:
			r.Set = r.Base // under the scope, unchanged
		}
		in.Reads = append(in.Reads, r)
	}
	return in
}

// SameEntry reports whether two entries describe the same file in the
// same object.
func SameEntry(a, b generation.Entry) bool {
	return a.Path == b.Path && a.Key == b.Key && a.Size == b.Size && a.SHA256 == b.SHA256 &&
		a.Encoding == b.Encoding && a.Mode == b.Mode && a.MTime.Equal(b.MTime)
}
