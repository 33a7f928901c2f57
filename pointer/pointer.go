// Package pointer reads and writes the commit pointer: the one small object
// per dataset, at _pointer, that names the current generation. It is only
// ever replaced by a conditional write, so its history is a sequence of
// compare-and-swaps.
//
// Every pointer body is unique: seq grows by one per commit and write_id is
// fresh per write. S3 ETags are MD5s of the body, so a repeated body would
// bring back an old ETag and let a stale compare-and-swap succeed (ABA).
package pointer

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/strictjson"
	"github.com/commitptr/commitptr/store"
)

// Key is the pointer's key within a dataset.
const Key = "_pointer"

// Format is the pointer format version this package writes and reads.
const Format = 1

// MaxSize is the largest pointer body accepted.
const MaxSize = 64 << 10

// MaxFences bounds the lease identities a pointer keeps a fence for, and
// MaxIdentity the length of one identity in bytes. Fences are never
// dropped by commits, so without a bound lease registrations would fill
// the pointer until neither a commit nor the collector's rewrite fits in
// MaxSize. At the bounds the fences take about 53 KiB, which leaves the
// rest of MaxSize to a commit's message and meta and to the collector's
// fields. A pointer that holds more (written before the bounds) still
// reads and is rewritten as is; only a new identity is refused
// (CheckFence). An operator makes room by forgetting fences
// (commit.Dataset.ForgetFence).
const (
	MaxFences   = 100
	MaxIdentity = 512
)

// ErrFenceLimit is matched by the error of CheckFence.
var ErrFenceLimit = errors.New("pointer: fence limit")

// ErrCorrupt is matched by every error about a malformed pointer.
var ErrCorrupt = errors.New("pointer: corrupt pointer")

// Pointer is the body of the commit pointer.
type Pointer struct {
	Format     int    `json:"format"`
	Seq        uint64 `json:"seq"`
	Generation string `json:"generation"`
	Parent     string `json:"parent,omitempty"`
	// Manifest is the key of the generation's manifest; ManifestSHA256 the
	// sha256 of its stored bytes.
	Manifest       string `json:"manifest"`
	ManifestSHA256 string `json:"manifest_sha256"`
	// WriteID is unique per pointer write.
	WriteID string `json:"write_id"`
	// Fence is the highest fencing token of the unnamed lease: tokens
	// given without a lease identity (CommitOptions.FenceLease empty). It is
	// the single fence of pointers written before fences were kept per
	// lease, which therefore read unchanged.
	Fence uint64 `json:"fence,omitempty"`
	// Fences holds, per lease identity (a stable name of the lease object:
	// its store without credentials plus its name), the highest token that
	// lease committed or registered. A commit carrying a lower token of the
	// same lease is refused; tokens of different leases are never compared.
	Fences map[string]uint64 `json:"fences,omitempty"`
	// FencedOnly refuses every commit that carries no fencing token. It is
	// an operator's setting, kept by every later pointer write.
	FencedOnly bool `json:"fenced_only,omitempty"`
	// GCHorizon is a server time set by the collector before it removes
	// orphans: a generation whose staging started at or before it may have
	// lost objects and can no longer be committed.
	GCHorizon time.Time `json:"gc_horizon,omitzero"`
	// GCFloor is the lowest seq of the chain the collector still retains
	// as a window from the current generation. Generations below it may be
	// collected, so a commit that references their objects (a rollback)
	// is refused.
	GCFloor uint64 `json:"gc_floor,omitempty"`
	// GCToken is the fencing token of the collector lease ("gc") of the
	// last collection that deleted anything, registered by that
	// collection's compare-and-swap of the pointer before its first
	// delete. A collector holding a lower token has lost its lease and
	// stops without writing the pointer. Commits carry it forward.
	GCToken uint64 `json:"gc_token,omitempty"`
	// GCCommittedAt is set only when the pointer is rewritten without a
	// commit (by the collector, or to register a fence): the store's time
	// at which this generation was committed, which the rewrite would
	// otherwise hide (a commit's own Last-Modified is that time). Commits
	// leave it zero.
	GCCommittedAt time.Time `json:"gc_committed_at,omitzero"`

	// Informational.
	CommittedAt time.Time         `json:"committed_at,omitzero"`
	Writer      string            `json:"writer,omitempty"`
	Message     string            `json:"message,omitempty"`
	Meta        map[string]string `json:"meta,omitempty"`
}

// Read returns the current pointer and the attributes of its object
// (ETag and server time). Its request, as Write's, goes ahead of a network
// store's queue of requests (store.Urgent). A missing pointer returns an error matching
// store.ErrNotExist.
func Read(ctx context.Context, s store.Store) (*Pointer, store.Attrs, error) {
	rc, attrs, err := s.Get(store.Urgent(ctx), Key)
	if err != nil {
		return nil, store.Attrs{}, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, MaxSize+1))
	if err != nil {
		return nil, store.Attrs{}, store.Wrap("get", Key, nil, err)
	}
	p, err := Decode(b)
	if err != nil {
		return nil, store.Attrs{}, err
	}
	return p, attrs, nil
}

// Write stores p with a fresh write id. If ifMatch is empty the write is a
// create-if-absent, else a compare-and-swap against that ETag. On error the
// pointer may or may not have been written: the caller resolves that by
// reading it back and comparing p.WriteID.
func Write(ctx context.Context, s store.Store, p *Pointer, ifMatch string) (store.Attrs, error) {
	p.Format = Format
	p.WriteID = uuid.NewString()
	b, err := Encode(p)
	if err != nil {
		return store.Attrs{}, err
	}
	return s.Put(store.Urgent(ctx), Key, bytes.NewReader(b), store.PutOptions{
		IfNoneMatch: ifMatch == "",
		IfMatch:     ifMatch,
		Size:        int64(len(b)),
		ContentType: "application/json",
	})
}

// Fits refuses a pointer that could not be written: it encodes p with a
// write id of the length Write gives and with the collector's fields set
// to their largest where they are not set, so that the collector can
// always rewrite a pointer that fits (see MaxFences).
func Fits(p *Pointer) error {
	c := *p
	c.Format, c.WriteID = Format, "00000000-0000-0000-0000-000000000000"
	far := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	if c.GCHorizon.IsZero() {
		c.GCHorizon = far
	}
	if c.GCCommittedAt.IsZero() {
		c.GCCommittedAt = far
	}
	c.GCFloor, c.GCToken = math.MaxUint64, math.MaxUint64
	_, err := Encode(&c)
	return err
}

// Encode validates p and returns its body.
func Encode(p *Pointer) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("pointer: encode: %w", err)
	}
	if len(b) > MaxSize {
		return nil, fmt.Errorf("pointer: encoded size %d exceeds %d (too much meta?)", len(b), MaxSize)
	}
	return append(b, '\n'), nil
}

// Decode parses and validates a pointer body.
func Decode(b []byte) (*Pointer, error) {
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrCorrupt, MaxSize)
	}
	var p Pointer
	if err := strictjson.Decode(b, []int{Format}, &p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Validate checks the pointer's fields.
func (p *Pointer) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	switch {
	case p.Format != Format:
		return bad("format %d", p.Format)
	case p.Seq == 0:
		return bad("seq 0")
	case generation.Valid(p.Generation) != nil:
		return bad("generation %q", p.Generation)
	case p.Parent != "" && generation.Valid(p.Parent) != nil:
		return bad("parent %q", p.Parent)
	case p.Manifest != generation.ManifestKey(p.Generation):
		return bad("manifest key %q does not belong to generation %q", p.Manifest, p.Generation)
	case len(p.ManifestSHA256) != 64 || strings.ToLower(p.ManifestSHA256) != p.ManifestSHA256:
		return bad("manifest sha256 %q", p.ManifestSHA256)
	case p.WriteID == "":
		return bad("empty write id")
	}
	for id, token := range p.Fences {
		if id == "" || token == 0 {
			return bad("fence %q: %d", id, token)
		}
	}
	if _, err := hex.DecodeString(p.ManifestSHA256); err != nil {
		return bad("manifest sha256 %q", p.ManifestSHA256)
	}
	return nil
}

// FenceOf returns the highest token registered or committed by the lease
// with this identity; the empty identity is the unnamed lease.
func (p *Pointer) FenceOf(lease string) uint64 {
	if lease == "" {
		return p.Fence
	}
	return p.Fences[lease]
}

// Admits reports whether a commit holding token of lease (0 for none) may
// replace p: its token is at least the lease's fence in p, and a commit
// without a token needs a p that does not take fenced writers only.
func (p *Pointer) Admits(token uint64, lease string) bool {
	if token == 0 {
		return !p.FencedOnly
	}
	return p.FenceOf(lease) <= token
}

// RaiseFence records token as the lease's highest, unless p has a higher
// one already: a pointer write never lowers a fence. It copies the fence
// map, so a pointer copied with a struct assignment keeps its own.
func (p *Pointer) RaiseFence(lease string, token uint64) {
	if token <= p.FenceOf(lease) {
		return
	}
	if lease == "" {
		p.Fence = token
		return
	}
	m := make(map[string]uint64, len(p.Fences)+1)
	maps.Copy(m, p.Fences)
	m[lease] = token
	p.Fences = m
}

// CheckFence refuses a fence for lease that p cannot take: an identity
// longer than MaxIdentity, or a new identity when p already keeps
// MaxFences. The unnamed lease ("") and a lease p already keeps pass.
func (p *Pointer) CheckFence(lease string) error {
	if len(lease) > MaxIdentity {
		return fmt.Errorf("%w: lease identity %.64q... has %d bytes, more than the %d a pointer takes", ErrFenceLimit, lease, len(lease), MaxIdentity)
	}
	if _, ok := p.Fences[lease]; lease == "" || ok || len(p.Fences) < MaxFences {
		return nil
	}
	return fmt.Errorf("%w: the pointer keeps fences of %d leases, the most it takes, so lease %q cannot be added; forget fences no longer in use (publish fences --forget)", ErrFenceLimit, len(p.Fences), lease)
}

// CommittedAtServer returns the store's time at which p's generation was
// committed, given the Last-Modified of the pointer object p was read from.
func (p *Pointer) CommittedAtServer(lastModified time.Time) time.Time {
	if !p.GCCommittedAt.IsZero() {
		return p.GCCommittedAt
	}
	return lastModified
}
