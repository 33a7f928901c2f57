package commit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/commitptr/commitptr/commit/internal/group"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// Rebase configures what a commit does when it proves it lost the pointer
// compare-and-swap; see Tx.EnableRebase.
type Rebase struct {
	// Scope, if not empty, is a path prefix ending in "/" that the Tx owns
	// as a whole: a change by another writer to any path under it is a
	// conflict, whether or not this Tx changed that path. A publish that
	// replaces a subtree sets it, so that two writers of one subtree never
	// merge. Paths this Tx changed outside Scope are still checked one by
	// one.
	Scope string
	// MaxAttempts bounds the rebases of one commit; 0 means 32.
	MaxAttempts int
	// MaxTime bounds the time from the first rebase to the last; 0 means
	// one minute.
	MaxTime time.Duration
	// NoGroup keeps the commit out of group commits: it neither publishes
	// its change for other writers to carry nor carries theirs.
	NoGroup bool
}

const (
	defaultRebaseAttempts = 32
	defaultRebaseTime     = time.Minute
)

// EnableRebase makes Commit rebase the generation instead of losing, when
// the pointer compare-and-swap is proven lost (never on an unknown
// outcome, which is settled first exactly as without it) and the
// generations committed since the base did not change what this Tx read.
//
// What the Tx read is: every path it staged, reused or removed (Put,
// PutFile, Remove, KeepFrom), every path where its entries differ from the
// base's (a Tx without KeepAll removes what it does not stage), every path
// under Rebase.Scope, and, once BaseSnapshot was called, every path of the
// dataset: what fn derived from the snapshot is not known, so any change
// by another writer is a conflict. KeepAll alone reads nothing: the files
// it carried are taken from the new head instead.
//
// A rebase reads the new head's manifest and, when no path read changed
// between the base and the head, writes a new manifest under a fresh
// generation id: the head's entries with the entries this Tx changed put
// in and its removals applied, the head as parent, and the staging start
// of the Tx (the collector's horizon is still checked against it). It
// uploads no data: the new manifest references the objects staged under
// Generation. Then it sends the compare-and-swap again, from the head,
// with every guard checked again against it. When a path read did change,
// or the bounds are reached, the commit loses as without rebase: the staged
// objects are deleted and the error is a *ConflictError, whose Overlap
// names the paths.
//
// Group commit: a rebasing Tx publishes its change as an intent bound to
// the head it rebased on, and the commit of another writer on that head
// may apply it with its own, in one pointer write; a Tx that finds
// intents waiting on its base joins them. A carried Tx's Commit returns
// that commit's pointer value (CarriedBy names its generation); its staged
// objects stay, referenced by that commit's manifest. A Tx takes part
// unless Rebase.NoGroup is set, it called BaseSnapshot, it keeps files
// from another snapshot (KeepFrom), or its changes reference objects
// neither its own nor the head's. docs/PROTOCOL.md, "Group commit", has
// the rules.
//
// Dataset.Update does not rebase: its fn may read any file of the base,
// so EnableRebase on the Tx it passes to fn returns an error. Call
// EnableRebase before Commit; it returns an error for a Scope that is not
// a valid path prefix ending in "/".
func (tx *Tx) EnableRebase(r Rebase) error {
	if r.Scope != "" {
		if !strings.HasSuffix(r.Scope, "/") {
			return fmt.Errorf("commit: rebase scope %q must end in /", r.Scope)
		}
		if err := generation.CheckPath(strings.TrimSuffix(r.Scope, "/")); err != nil {
			return fmt.Errorf("commit: rebase scope %q: %w", r.Scope, err)
		}
	}
	if r.MaxAttempts < 0 || r.MaxTime < 0 {
		return fmt.Errorf("commit: rebase bounds must not be negative")
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = defaultRebaseAttempts
	}
	if r.MaxTime == 0 {
		r.MaxTime = defaultRebaseTime
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if err := tx.checkOpen(); err != nil {
		return err
	}
	if tx.noRebase {
		return ErrUpdateNoRebase
	}
	tx.rebase = &r
	return nil
}

// ErrUpdateNoRebase is what EnableRebase returns on the Tx of
// Dataset.Update.
var ErrUpdateNoRebase = errors.New("commit: the transaction of Update does not rebase: its function may have read any file of the base; use Begin and Commit")

// Rebased returns how many times Commit rebased the generation.
func (tx *Tx) Rebased() int {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.rebased
}

// Attempted returns a copy of the pointer value Commit sent last, or nil
// if it sent none. After ErrCommitUnknown it names the value that may
// still land: the generation (for a rebased commit, not Generation) and
// its seq and parent. Earlier values of a rebased commit were proven dead
// before it rebased.
func (tx *Tx) Attempted() *pointer.Pointer {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.lastSent == nil {
		return nil
	}
	p := *tx.lastSent
	return &p
}

// rebaseState is what a commit with rebase keeps from one rebase to the
// next.
type rebaseState struct {
	started time.Time
	// mine are the entries this Tx committed, by path; read is every path
	// it read (see EnableRebase), and all is set when it read them all.
	mine map[string]generation.Entry
	read map[string]bool
	all  bool
	base map[string]generation.Entry // the base's entries, by path
}

// prepareRebase computes what the Tx read, against its base, once the
// first compare-and-swap is proven lost.
func (tx *Tx) prepareRebase(ctx context.Context, entries []generation.Entry) (*rebaseState, error) {
	bm, err := tx.loadBase(ctx)
	if err != nil {
		return nil, err
	}
	rs := &rebaseState{started: time.Now(), mine: map[string]generation.Entry{}, read: map[string]bool{}, base: map[string]generation.Entry{}}
	for _, e := range entries {
		rs.mine[e.Path] = e
	}
	if bm != nil {
		for _, e := range bm.Entries {
			rs.base[e.Path] = e
		}
	}
	tx.mu.Lock()
	for p := range tx.touched {
		rs.read[p] = true
	}
	rs.all = tx.readBase
	tx.mu.Unlock()
	for p, e := range rs.mine {
		if b, ok := rs.base[p]; !ok || !group.SameEntry(b, e) {
			rs.read[p] = true
		}
	}
	for p := range rs.base {
		if _, ok := rs.mine[p]; !ok {
			rs.read[p] = true
		}
	}
	tx.mu.Lock()
	tx.reads = rs
	tx.mu.Unlock()
	return rs, nil
}

// overlap returns the paths the Tx read that differ between its base and
// the head's manifest, sorted.
func (rs *rebaseState) overlap(head map[string]generation.Entry, scope string) []string {
	var out []string
	changed := func(p string) bool {
		b, inBase := rs.base[p]
		h, inHead := head[p]
		return inBase != inHead || (inBase && !group.SameEntry(b, h))
	}
	reads := func(p string) bool {
		return rs.all || rs.read[p] || (scope != "" && strings.HasPrefix(p, scope))
	}
	for p := range rs.base {
		if changed(p) && reads(p) {
			out = append(out, p)
		}
	}
	for p := range head {
		if _, inBase := rs.base[p]; !inBase && reads(p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// merged returns the entries of the rebased generation: the head's, with
// every path this Tx read set as this Tx has it (put in, or removed).
func (rs *rebaseState) merged(head map[string]generation.Entry) []generation.Entry {
	out := make(map[string]generation.Entry, len(head)+len(rs.mine))
	for p, e := range head {
		out[p] = e
	}
	for p := range rs.read {
		if e, ok := rs.mine[p]; ok {
			out[p] = e
		} else {
			delete(out, p)
		}
	}
	es := make([]generation.Entry, 0, len(out))
	for _, e := range out {
		es = append(es, e)
	}
	return es
}

// maxOverlapNamed bounds the paths a ConflictError names.
const maxOverlapNamed = 100

// rebaseHead reads the manifest of head, the pointer read back after the
// compare-and-swap was proven lost, checks that no path the Tx read
// changed there, and returns it with the Tx's entries rebased on it. An
// error means the commit lost (all its pointer writes are proven dead).
func (tx *Tx) rebaseHead(ctx context.Context, rs *rebaseState, got *pointer.Pointer, attrs store.Attrs, lostTo *ConflictError) (*head, []generation.Entry, error) {
	tx.mu.Lock()
	n := tx.rebased
	tx.mu.Unlock()
	if n >= tx.rebase.MaxAttempts {
		return nil, nil, fmt.Errorf("%w (after %d rebases, the most allowed)", lostTo, n)
	}
	if n > 0 && time.Since(rs.started) > tx.rebase.MaxTime {
		return nil, nil, fmt.Errorf("%w (rebasing for %s, longer than the %s allowed)", lostTo, time.Since(rs.started).Round(time.Millisecond), tx.rebase.MaxTime)
	}
	var hm *generation.Manifest
	err := retryRead(ctx, tx.d.retry, func() (err error) {
		hm, err = tx.d.writerManifest(ctx, got.Generation, got.ManifestSHA256)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%w; rebase: read the manifest of the new head, generation %s: %w", lostTo, got.Generation, err)
	}
	if hm.Seq != got.Seq {
		return nil, nil, fmt.Errorf("%w; rebase: %w: generation %s has seq %d, the pointer says %d", lostTo, generation.ErrCorrupt, got.Generation, hm.Seq, got.Seq)
	}
	h := newHead(got, attrs, hm)
	if ov := rs.overlap(h.Entries, tx.rebase.Scope); len(ov) > 0 {
		if len(ov) > maxOverlapNamed {
			ov = ov[:maxOverlapNamed]
		}
		lostTo.Overlap = ov
		return nil, nil, lostTo
	}
	entries := rs.merged(h.Entries)
	if file, below := generation.Clash(entries); file != "" {
		// Each side alone is a tree, but not the two together: a file
		// where the other has a directory. That is an overlap too.
		lostTo.Overlap = []string{file, below}
		return nil, nil, lostTo
	}
	if err := tx.reprove(ctx, rs, h.Keys); err != nil {
		return nil, nil, fmt.Errorf("%w; rebase: %w", lostTo, err)
	}
	if tx.base != nil && got.Generation == tx.base.Generation {
		// The head is the base, rewritten without a commit: the rebased
		// manifest takes the files kept from the base, as a manifest of
		// the Tx's own on its base would, and no commit since proved
		// them. (Nobody won: a missing one fails the commit as it would
		// have failed that manifest.)
		if err := tx.proveKept(ctx); err != nil {
			return nil, nil, err
		}
	}
	tx.mu.Lock()
	tx.rebased++
	tx.mu.Unlock()
	return h, entries, nil
}

// writeRebased writes the manifest of the generation rebased on h, with
// the entries and carried writers of g, under a fresh generation id. It
// returns the manifest and its sha256.
func (tx *Tx) writeRebased(ctx context.Context, h *head, g group.Group, opts CommitOptions) (*generation.Manifest, string, error) {
	gen, err := generation.New()
	if err != nil {
		return nil, "", err
	}
	m := &generation.Manifest{
		Format:               generation.Format,
		Generation:           gen,
		Parent:               h.Ptr.Generation,
		ParentManifestSHA256: h.Ptr.ManifestSHA256,
		Seq:                  h.Ptr.Seq + 1,
		// The staging start stays the Tx's: its objects were written after
		// it, and the collector's horizon is held against it. Every
		// writer it carries was checked against the horizon on its own.
		StagingStart:    tx.stagingStart,
		BaseCommittedAt: h.Ptr.CommittedAtServer(h.attrs.LastModified).UTC(),
		Writer:          tx.d.writer,
		Message:         opts.Message,
		Meta:            opts.Meta,
		Carried:         g.Carried,
		Rebased:         tx.Rebased(),
		Entries:         g.Entries,
	}
	stored, err := generation.Encode(m)
	if err != nil {
		return nil, "", err
	}
	key := generation.ManifestKey(gen)
	tx.mu.Lock()
	tx.staged = append(tx.staged, key)
	tx.mu.Unlock()
	if err := tx.putManifest(ctx, key, stored); err != nil {
		return nil, "", fmt.Errorf("write manifest: %w", err)
	}
	sum := sha256.Sum256(stored)
	tx.d.remember(gen, hex.EncodeToString(sum[:]), stored)
	tx.d.log.Debug("rebased", "staged", tx.gen, "generation", gen, "parent", h.Ptr.Generation, "seq", m.Seq, "carried", len(g.Carried))
	return m, hex.EncodeToString(sum[:]), nil
}

// reprove proves again the objects that entries this Tx changed reference
// outside its own generation and that the head does not reference: the
// generations committed since the base may have let the collector remove
// them. (Objects the head references are kept with it.)
func (tx *Tx) reprove(ctx context.Context, rs *rebaseState, headKeys map[string]bool) error {
	own := generation.Prefix(tx.gen)
	want := map[string][]generation.Entry{}
	for p := range rs.read {
		e, ok := rs.mine[p]
		if !ok || strings.HasPrefix(e.Key, own) || headKeys[e.Key] {
			continue
		}
		want[e.Key] = append(want[e.Key], e)
	}
	if len(want) == 0 {
		return nil
	}
	stats, err := tx.d.statAll(ctx, slices.Collect(maps.Keys(want)))
	if err != nil {
		return fmt.Errorf("verify referenced objects: %w", err)
	}
	var bad []string
	for key, es := range want {
		st, found := stats[key]
		for _, e := range es {
			if why := unusable(e, st.size, found); why != "" {
				bad = append(bad, fmt.Sprintf("%s: object %s %s", e.Path, key, why))
			}
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("%w: %s", ErrMissingObject, strings.Join(bad, "; "))
	}
	return nil
}
