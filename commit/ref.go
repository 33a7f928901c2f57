package commit

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/commitptr/commitptr/generation"
)

// RefKind says how a Ref names a snapshot.
type RefKind int

// The kinds of Ref.
const (
	// RefCurrent is the generation the pointer names now.
	RefCurrent RefKind = iota
	// RefSeq is the retained generation of one seq number.
	RefSeq
	// RefTag is the generation a tag names.
	RefTag
	// RefGen is one generation, by id.
	RefGen
)

// Ref names a snapshot of a dataset. Its text form is "current", "@SEQ",
// "tag:NAME" or "gen:ID" (ParseRef).
type Ref struct {
	Kind RefKind
	// Seq is the seq number of a RefSeq.
	Seq uint64
	// Name is the tag name of a RefTag or the generation id of a RefGen.
	Name string
}

// Current is the Ref of the current snapshot.
var Current = Ref{Kind: RefCurrent}

// SeqRef, TagRef and GenRef return the Ref of a seq number, a tag and a
// generation id.
func SeqRef(seq uint64) Ref  { return Ref{Kind: RefSeq, Seq: seq} }
func TagRef(name string) Ref { return Ref{Kind: RefTag, Name: name} }
func GenRef(gen string) Ref  { return Ref{Kind: RefGen, Name: gen} }

// Immutable reports whether r names the same generation for as long as it
// is retained: a seq number or a generation id, not the current snapshot
// nor a tag, which can move.
func (r Ref) Immutable() bool { return r.Kind == RefSeq || r.Kind == RefGen }

// String returns the text form of r, which ParseRef reads back.
func (r Ref) String() string {
	switch r.Kind {
	case RefSeq:
		return "@" + strconv.FormatUint(r.Seq, 10)
	case RefTag:
		return TagRefPrefix + r.Name
	case RefGen:
		return genRefPrefix + r.Name
	}
	return "current"
}

const genRefPrefix = "gen:"

// ParseRef reads a Ref: "current", "@SEQ", "tag:NAME" or "gen:ID". The
// bare forms the command line takes as arguments are accepted too: "" for
// the current snapshot, a seq number, and a generation id.
func ParseRef(s string) (Ref, error) {
	switch {
	case s == "" || s == "current":
		return Current, nil
	case strings.HasPrefix(s, TagRefPrefix):
		name := s[len(TagRefPrefix):]
		if err := ValidTagName(name); err != nil {
			return Ref{}, fmt.Errorf("commit: ref %q: %w", s, err)
		}
		return TagRef(name), nil
	case strings.HasPrefix(s, genRefPrefix):
		gen := s[len(genRefPrefix):]
		if err := generation.Valid(gen); err != nil {
			return Ref{}, fmt.Errorf("commit: ref %q: %w", s, err)
		}
		return GenRef(gen), nil
	}
	digits := strings.TrimPrefix(s, "@")
	if seq, err := strconv.ParseUint(digits, 10, 64); err == nil && digits[0] != '+' {
		return SeqRef(seq), nil
	}
	if generation.Valid(s) == nil {
		return GenRef(s), nil
	}
	return Ref{}, fmt.Errorf("commit: ref %q is none of current, @SEQ, tag:NAME and gen:ID", s)
}

// OpenRef opens the snapshot r names: Open for the current one, OpenAt for
// the others.
func (d *Dataset) OpenRef(ctx context.Context, r Ref) (*Snapshot, error) {
	switch r.Kind {
	case RefCurrent:
		return d.Open(ctx)
	case RefSeq:
		return d.OpenAt(ctx, strconv.FormatUint(r.Seq, 10))
	case RefTag:
		return d.OpenAt(ctx, TagRefPrefix+r.Name)
	case RefGen:
		return d.OpenAt(ctx, r.Name)
	}
	return nil, fmt.Errorf("commit: ref of unknown kind %d", r.Kind)
}
