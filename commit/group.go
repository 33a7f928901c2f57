package commit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/commitptr/commitptr/commit/internal/group"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// IntentDir holds the intents of group commit: _intent/<head>/<id> is the
// change of one Tx, which a commit may apply only when it replaces the
// pointer value whose write id is head (see package group).
const IntentDir = group.Dir

// groupState is what a Tx keeps of group commit, under tx.mu. Its live
// intent is the last one it published: bound to boundTo until that value
// is replaced without carrying it (the intent is dead) or a commit
// carries it (carried).
type groupState struct {
	written []string         // the keys of every intent the Tx wrote
	liveKey string           // the key of the live intent
	live    *group.Intent    // the live intent
	boundTo *pointer.Pointer // nil once the live intent is dead or carried
	// listed are the keys of the other writers' intents in the rounds the
	// Tx carried (see dropIntents); sending counts the writers the pointer
	// write being sent carries; carried is the commit that carried the Tx.
	listed  []string
	sending int
	carried *pointer.Pointer
}

// defaultOpenness opens to rounds the values whose commit met at least two
// other writers' commits: three rebases, or two carried. Two writers do
// better rebasing alone, since a round costs each of them an intent, a
// LIST and a wait.
var defaultOpenness = group.Openness{Rebased: 3, Carried: 2}

// openness is the rule Datasets open values by: defaultOpenness, unless a
// test sets another.
var openness = defaultOpenness

// head is a pointer value a commit builds on: what the rules of group
// commit see of it, and the attributes the store returned with it.
type head struct {
	*group.Head
	attrs store.Attrs
}

// newHead returns the head p, with attrs, whose manifest is m.
func newHead(p *pointer.Pointer, attrs store.Attrs, m *generation.Manifest) *head {
	return &head{Head: group.NewHead(p, m, openness), attrs: attrs}
}

// change returns the change of this Tx that rs describes.
func (tx *Tx) change(rs *rebaseState) *group.Change {
	return &group.Change{Generation: tx.gen, Mine: rs.mine, Read: rs.read, Scope: tx.rebase.Scope}
}

// groupable reports whether this Tx may take part in a round on h: h is
// open, the Tx did not read the whole base (any change would conflict
// with it), keeps nothing from another snapshot (its guards need the pin
// and the floor), and every object its changes reference is its own or
// referenced by the head, so a carrier has nothing to prove present.
func (tx *Tx) groupable(rs *rebaseState, h *head) bool {
	if !h.Open || tx.rebase.NoGroup || rs.all || tx.refSeq != 0 || h.Ptr.WriteID == "" {
		return false
	}
	return tx.change(rs).ReferencesOwnOrHead(h.Head)
}

// intentFor returns this Tx's intent on the head, which has none of the
// changes it read (rebaseHead, or Begin for a first compare-and-swap,
// checked that).
func (tx *Tx) intentFor(rs *rebaseState, h *head, opts CommitOptions) *group.Intent {
	return group.NewIntent(tx.change(rs), h.Head, group.Writer{
		Name: tx.d.writer, StagingStart: tx.stagingStart, Fence: opts.Fence, FenceLease: opts.FenceLease,
	})
}

// publishIntent writes the intent and returns its key. A write whose
// outcome is not known is taken as written: the intent may be carried
// either way.
func (tx *Tx) publishIntent(ctx context.Context, in *group.Intent) string {
	id, err := generation.New()
	if err != nil {
		return ""
	}
	key := group.Key(in.Head, id)
	b, err := json.Marshal(in)
	if err != nil {
		return ""
	}
	tx.mu.Lock()
	tx.staged = append(tx.staged, key)
	tx.grp.written = append(tx.grp.written, key)
	tx.grp.live, tx.grp.liveKey = in, key
	tx.mu.Unlock()
	_, err = tx.d.s.Put(ctx, key, bytes.NewReader(b), store.PutOptions{IfNoneMatch: true, Size: int64(len(b)), ContentType: "application/json"})
	if err != nil && !errors.Is(err, store.ErrPrecondition) {
		tx.d.log.Debug("intent write failed; taken as written", "key", key, "error", err)
	}
	return key
}

// readIntent reads and checks the intent at key against the head it is
// bound to; nil means it is missing or unusable, and is skipped.
func (d *Dataset) readIntent(ctx context.Context, key string, h *head) *group.Intent {
	rc, _, err := d.s.Get(ctx, key)
	if err != nil {
		return nil
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, group.MaxSize+1))
	if err != nil {
		return nil
	}
	in, err := group.Decode(b, h.Head)
	if err != nil {
		d.log.Debug("intent unusable; skipped", "key", key, "error", err)
		return nil
	}
	return in
}

// gather reads the intents at keys of the other writers of the round,
// at most group.MaxCarried, all at once, in the order they were published.
func (tx *Tx) gather(ctx context.Context, keys []string, h *head) []*group.Intent {
	tx.mu.Lock()
	mine := slices.Clone(tx.grp.written)
	tx.mu.Unlock()
	var want []string
	for _, k := range keys {
		if !slices.Contains(mine, k) && len(want) < group.MaxCarried {
			want = append(want, k)
		}
	}
	out := make([]*group.Intent, len(want))
	var wg sync.WaitGroup
	for i, k := range want {
		wg.Go(func() { out[i] = tx.d.readIntent(ctx, k, h) })
	}
	wg.Wait()
	seen := map[string]bool{tx.gen: true}
	return slices.DeleteFunc(out, func(in *group.Intent) bool {
		if in == nil || seen[in.Generation] {
			return true
		}
		seen[in.Generation] = true
		return false
	})
}

// listIntents returns the keys of the intents bound to the pointer value
// with write id head, sorted: in the order they were published. It stops
// past four times as many as a carrier reads.
func (tx *Tx) listIntents(ctx context.Context, head string) ([]string, error) {
	var keys []string
	for o, err := range store.List(ctx, tx.d.s, IntentDir+head+"/", "", "") {
		if err != nil {
			return nil, err
		}
		if keys = append(keys, o.Key); len(keys) > 4*group.MaxCarried {
			break
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// carry adds to this Tx's rebased entries every intent of ins it can
// carry on h (see group.Carry).
func (tx *Tx) carry(rs *rebaseState, h *head, own []generation.Entry, ins []*group.Intent, opts CommitOptions) group.Group {
	return group.Carry(group.Carrier{
		Change: tx.change(rs), Writer: tx.d.writer, Message: opts.Message, Meta: opts.Meta,
		Fence: opts.Fence, FenceLease: opts.FenceLease,
	}, h.Head, own, ins)
}

// keptFromBase returns, for a Tx that may join a group-commit round (see
// carryFirst), which of its entries are files kept from its base
// untouched: a commit that carries the Tx takes those paths from its head,
// whose references are the head's, so the Tx proves them only when it
// writes a manifest of its own on its base. (Such a Tx keeps files only by
// KeepAll: every other entry it has was set by Put, PutFile or Remove, and
// so touched.) It returns nil when the Tx cannot join a round.
func (tx *Tx) keptFromBase() func(generation.Entry) bool {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if !tx.joinable() {
		return nil
	}
	touched := maps.Clone(tx.touched)
	return func(e generation.Entry) bool { return !touched[e.Path] }
}

// joinable reports whether the Tx may join a group-commit round: it
// rebases, with group commit, and its base is one a round can be bound to.
// The caller holds tx.mu.
func (tx *Tx) joinable() bool {
	return tx.rebase != nil && !tx.rebase.NoGroup && !tx.readBase && tx.refSeq == 0 &&
		tx.baseManifest != nil && tx.base != nil && tx.base.WriteID != ""
}

// proveKept proves the files kept from the base whose proof keptFromBase
// left for later, if any: the Tx is about to write a manifest that takes
// them from its base.
func (tx *Tx) proveKept(ctx context.Context) error {
	tx.mu.Lock()
	kept := tx.keptPending
	tx.mu.Unlock()
	if kept == nil {
		return nil
	}
	if err := tx.verifyReferences(ctx, func(e generation.Entry) bool { return !kept(e) }); err != nil {
		return err
	}
	tx.mu.Lock()
	tx.keptPending = nil
	tx.mu.Unlock()
	return nil
}

// busyWindow is how long before the base was committed an intent on
// another value may have been written for othersAtWork to count it: older
// ones are a crashed writer's, left to the collector.
const busyWindow = 10 * time.Second

// othersAtWork reports whether one LIST of the intent directory shows
// other writers at work: an intent written at most busyWindow before the
// base was committed, or since (by the store's clock). That includes one
// bound to the base, and one on the value before it, of a writer that lost
// to the base and has not published on it yet: a writer that commits
// alone back to back would otherwise never see the writers it keeps
// beating. A directory of more than a page counts as busy.
func (tx *Tx) othersAtWork(ctx context.Context, h *head) (bool, error) {
	page, err := tx.d.s.List(ctx, store.ListRequest{Prefix: IntentDir})
	if err != nil {
		return false, err
	}
	since := h.attrs.LastModified.Add(-busyWindow)
	for _, o := range page.Objects {
		if !o.LastModified.Before(since) {
			return true, nil
		}
	}
	return page.Next != "", nil
}

// carryFirst runs the first compare-and-swap of a commit with rebase as a
// group-commit round when its base is open and others are likely at work
// on it: this Dataset's last commit was in a round, or othersAtWork sees
// writers at work (one LIST). It returns what round returns, and what the
// Tx read; a nil rebaseState means it does not take part, and the commit
// goes on alone.
func (tx *Tx) carryFirst(ctx context.Context, entries []generation.Entry, opts CommitOptions) (group.Group, *moved, *rebaseState, error) {
	tx.mu.Lock()
	bm := tx.baseManifest
	ok := tx.joinable()
	tx.mu.Unlock()
	if !ok {
		return group.Group{}, nil, nil, nil
	}
	h := newHead(tx.base, store.Attrs{ETag: tx.baseETag, LastModified: tx.baseCommittedAt}, bm)
	if !h.Open {
		return group.Group{}, nil, nil, nil
	}
	if !tx.d.grouped.Load() {
		if busy, err := tx.othersAtWork(ctx, h); err != nil || !busy {
			return group.Group{}, nil, nil, nil
		}
	}
	rs, err := tx.prepareRebase(ctx, entries)
	if err != nil || !tx.groupable(rs, h) {
		return group.Group{}, nil, nil, nil
	}
	if err := tx.guard(ctx, tx.base, opts.Fence, opts.FenceLease); err != nil {
		return group.Group{}, nil, nil, nil // the commit refuses it on its own
	}
	g, mv, err := tx.round(ctx, rs, h, entries, opts)
	return g, mv, rs, err
}

// round is one group-commit round on the head h. The Tx publishes its
// intent on h, lists the round, and then waits and acts as its
// roundTimer says: it carries the round, or polls the pointer, which,
// when it moved, settles the intent (carried or dead). It returns the
// group to send on h, or, when the pointer moved, the pointer read.
func (tx *Tx) round(ctx context.Context, rs *rebaseState, h *head, own []generation.Entry, opts CommitOptions) (group.Group, *moved, error) {
	clock := tx.d.clock
	t0 := clock.Now()
	key := tx.publishIntent(ctx, tx.intentFor(rs, h, opts))
	tx.bindIntent(h.Ptr)
	keys, err := tx.listIntents(ctx, h.Ptr.WriteID)
	if err != nil {
		return group.Group{Entries: own}, nil, nil // carry nobody
	}
	// A writer whose intent the LIST does not show follows: its round
	// may have been carried and deleted already.
	timer := newRoundTimer(max(clock.Now().Sub(t0), time.Millisecond), len(keys) > 0 && keys[0] == key)
	for {
		d, act := timer.next()
		if err := clock.Sleep(ctx, d); err != nil {
			return group.Group{}, nil, err
		}
		if act == actCarry {
			return tx.carryRound(ctx, rs, h, own, opts, keys)
		}
		p, attrs, err := pointer.Read(ctx, tx.d.s)
		if err != nil || p.WriteID == h.Ptr.WriteID {
			continue
		}
		mv, err := tx.settleMoved(ctx, p, attrs)
		return group.Group{}, mv, err
	}
}

// carryRound lists the round on h again and carries every intent it can
// (those listed before, if that LIST fails). When the LIST no longer
// shows this Tx's intent, the round may have been carried and its intents
// deleted: a pointer that moved settles it instead.
func (tx *Tx) carryRound(ctx context.Context, rs *rebaseState, h *head, own []generation.Entry, opts CommitOptions, keys []string) (group.Group, *moved, error) {
	if again, err := tx.listIntents(ctx, h.Ptr.WriteID); err == nil {
		keys = again
		tx.mu.Lock()
		gone := !slices.Contains(keys, tx.grp.liveKey)
		tx.mu.Unlock()
		if gone {
			if p, attrs, err := pointer.Read(ctx, tx.d.s); err == nil && p.WriteID != h.Ptr.WriteID {
				mv, err := tx.settleMoved(ctx, p, attrs)
				return group.Group{}, mv, err
			}
		}
	}
	g := tx.carry(rs, h, own, tx.gather(ctx, keys, h), opts)
	tx.mu.Lock()
	for _, k := range keys {
		if !slices.Contains(tx.grp.written, k) {
			tx.grp.listed = append(tx.grp.listed, k)
		}
	}
	tx.mu.Unlock()
	return g, nil, nil
}

// moved is a pointer value read after this Tx's intent was published that
// settles it: the intent was carried (landed is the pointer value that
// carried it), or it is dead and the Tx goes on from got.
type moved struct {
	got     *pointer.Pointer
	attrs   store.Attrs
	landed  *pointer.Pointer
	lostSeq uint64
}

// settleMoved settles the live intent against p, a pointer value other
// than the one it is bound to. An error means it cannot be told.
func (tx *Tx) settleMoved(ctx context.Context, p *pointer.Pointer, attrs store.Attrs) (*moved, error) {
	tx.mu.Lock()
	ih := tx.grp.boundTo
	tx.mu.Unlock()
	mv := &moved{got: p, attrs: attrs}
	if ih == nil || p.Seq <= ih.Seq {
		// Replaced without a commit: no commit can be built on the value
		// the intent is bound to any more.
		tx.clearIntent()
		return mv, nil
	}
	mv.lostSeq = ih.Seq + 1
	m, sum, err := tx.d.manifestAt(ctx, p, ih.Seq+1)
	if err != nil {
		return nil, fmt.Errorf("cannot tell whether seq %d carried generation %s: %w", ih.Seq+1, tx.gen, err)
	}
	if m.CarriedBy(tx.gen) {
		if err := tx.appliedIn(m); err != nil {
			return nil, err
		}
		mv.landed = group.CarriedPointer(p, m, sum)
		return mv, nil
	}
	tx.mu.Lock()
	tx.winner = m.Generation
	tx.mu.Unlock()
	tx.clearIntent()
	return mv, nil
}

// appliedIn checks that m, which names this Tx as carried, holds its
// changes (see group.AppliedIn). A Tx that published no intent cannot
// have been carried.
func (tx *Tx) appliedIn(m *generation.Manifest) error {
	tx.mu.Lock()
	rs := tx.reads
	tx.mu.Unlock()
	if rs == nil {
		return fmt.Errorf("%w: generation %s names generation %s as carried, which published no intent", generation.ErrCorrupt, m.Generation, tx.gen)
	}
	return group.AppliedIn(tx.change(rs), m)
}

func (tx *Tx) clearIntent() {
	tx.bindIntent(nil)
}

// bindIntent records the pointer value the live intent is bound to.
func (tx *Tx) bindIntent(to *pointer.Pointer) {
	tx.mu.Lock()
	tx.grp.boundTo = to
	tx.mu.Unlock()
}

// manifestAt walks the parent chain from p back to seq, checking each
// manifest against the sha256 its child recorded, and returns the manifest
// there and its sha256.
func (d *Dataset) manifestAt(ctx context.Context, p *pointer.Pointer, seq uint64) (*generation.Manifest, string, error) {
	if seq > p.Seq || seq == 0 {
		return nil, "", fmt.Errorf("%w: seq %d is not in the history of seq %d", ErrNotFound, seq, p.Seq)
	}
	gen, sum := p.Generation, p.ManifestSHA256
	for s := p.Seq; ; s-- {
		var m *generation.Manifest
		err := retryRead(ctx, d.retry, func() (err error) {
			m, err = d.writerManifest(ctx, gen, sum)
			return err
		})
		if err != nil {
			return nil, "", err
		}
		if m.Seq != s {
			return nil, "", fmt.Errorf("%w: generation %s has seq %d, its child expected %d", generation.ErrCorrupt, gen, m.Seq, s)
		}
		if s == seq {
			return m, sum, nil
		}
		if m.Parent == "" {
			return nil, "", fmt.Errorf("%w: seq %d is not in the history", ErrNotFound, seq)
		}
		gen, sum = m.Parent, m.ParentManifestSHA256
	}
}

// settle settles the live intent of a Tx that stops before its own
// compare-and-swap: if the pointer still has the value the intent is bound
// to, it rewrites that value unchanged (a new write id), after which no
// commit can carry the intent. It returns the pointer value that carried
// the Tx, nil when the intent is dead, or an error when neither can be
// proven. An intent that cannot be applied on the value it is bound to,
// there (a carrier admits it by the same rule, on that same value), is
// dead already: that value is left as it is.
func (tx *Tx) settle(ctx context.Context) (*pointer.Pointer, error) {
	tx.mu.Lock()
	ih, in := tx.grp.boundTo, tx.grp.live
	tx.mu.Unlock()
	if ih == nil {
		return nil, nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
	defer cancel()
	var werr error
	for attempt := 0; attempt <= maxCASRetries; attempt++ {
		var p *pointer.Pointer
		var attrs store.Attrs
		err := retryRead(rctx, tx.d.retry, func() (err error) {
			p, attrs, err = pointer.Read(rctx, tx.d.s)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("read the pointer: %w (last withdrawal: %v)", err, werr)
		}
		if p.WriteID != ih.WriteID {
			mv, err := tx.settleMoved(rctx, p, attrs)
			if err != nil {
				return nil, err
			}
			return mv.landed, nil
		}
		if p.WriteID == ih.WriteID && in != nil && !tx.d.admissibleOn(rctx, in, p, attrs) {
			// No carrier on p takes the intent, and p is another
			// writer's commit, not this one's to rewrite (its lease may
			// be gone, too).
			tx.d.log.Debug("intent cannot be applied on its value; dead", "generation", tx.gen, "seq", ih.Seq+1)
			tx.clearIntent()
			return nil, nil
		}
		next := *p
		next.GCCommittedAt = p.CommittedAtServer(attrs.LastModified)
		if _, werr = pointer.Write(rctx, tx.d.s, &next, attrs.ETag); werr == nil {
			tx.d.log.Debug("intent withdrawn", "generation", tx.gen, "seq", ih.Seq+1)
			tx.clearIntent()
			return nil, nil
		}
		if errors.Is(werr, store.ErrConflict) {
			if err := ctxtime.Sleep(rctx, tx.d.retry.Backoff(attempt)); err != nil {
				return nil, fmt.Errorf("could not withdraw the intent: %w (last withdrawal: %v)", err, werr)
			}
		}
	}
	return nil, fmt.Errorf("could not withdraw the intent: %w", werr)
}

// admissibleOn reports whether a carrier on p could take the intent in:
// whether group.Admit takes it against p and p's manifest. When that cannot be
// told (the manifest unread, or the intent not bound to p), it answers
// true: the intent may be live.
func (d *Dataset) admissibleOn(ctx context.Context, in *group.Intent, p *pointer.Pointer, attrs store.Attrs) bool {
	var m *generation.Manifest
	err := retryRead(ctx, d.retry, func() (err error) {
		m, err = d.writerManifest(ctx, p.Generation, p.ManifestSHA256)
		return err
	})
	if err != nil || m.Seq != p.Seq || in.Head != p.WriteID || in.Seq != p.Seq+1 {
		return true
	}
	_, ok := group.Admit(in, group.NewHead(p, m, openness))
	return ok
}

// lose ends a commit that failed with err while its intent may be live:
// the intent is settled first, and the staged objects are discarded only
// once it is dead. If a commit carried it, the Tx committed after all.
func (tx *Tx) lose(ctx context.Context, err error) (*pointer.Pointer, error) {
	landed, serr := tx.settle(ctx)
	switch {
	case serr != nil:
		return nil, fmt.Errorf("%w: generation %s may still be carried by another writer's commit (%v), after: %v", ErrCommitUnknown, tx.gen, serr, err)
	case landed != nil:
		tx.markCarried(landed)
		return landed, nil
	}
	return nil, tx.abort(ctx, err)
}

func (tx *Tx) markCarried(p *pointer.Pointer) {
	tx.d.grouped.Store(true)
	tx.mu.Lock()
	tx.grp.carried = p
	tx.grp.boundTo = nil
	tx.mu.Unlock()
	tx.d.log.Debug("carried", "generation", tx.gen, "by", p.Generation, "seq", p.Seq)
}

// CarriedBy returns the generation of the commit that applied this Tx's
// changes as one of a group (see Rebase), or "" if it committed itself
// or did not commit.
func (tx *Tx) CarriedBy() string {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.grp.carried == nil {
		return ""
	}
	return tx.grp.carried.Generation
}

// dropIntents deletes the intents this Tx wrote, once its outcome is
// known (landed is the pointer value that committed it, or nil); what a
// failure leaves, the collector sweeps. A Tx whose own commit landed also
// deletes the intents of the rounds it carried, each bound to a value
// that is gone now; a carried Tx leaves its live intent to its carrier.
func (tx *Tx) dropIntents(ctx context.Context, landed *pointer.Pointer) {
	tx.mu.Lock()
	keys := slices.Clone(tx.grp.written)
	switch {
	case landed != nil && tx.grp.carried == nil:
		keys = append(keys, tx.grp.listed...)
	case landed != nil:
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == tx.grp.liveKey })
	}
	tx.grp.written, tx.grp.listed = nil, nil
	tx.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resolveTimeout)
	defer cancel()
	if err := tx.d.s.DeleteMany(dctx, keys); err != nil {
		tx.d.log.Debug("intents not deleted; the collector will", "generation", tx.gen, "error", err)
	}
}
