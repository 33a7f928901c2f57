package commit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/internal/strictjson"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// IntentDir holds the intents of group commit: _intent/<head>/<id> is the
// change of one Tx, which any writer may apply in the commit that replaces
// the pointer value whose write id is head, and in no other. The id is a
// UUIDv7 taken when the intent is written, so the listing shows the
// round's intents in the order they were published.
const IntentDir = "_intent/"

const (
	intentFormat = 1
	// maxIntentSize bounds an intent a carrier reads.
	maxIntentSize = 1 << 20
	// maxCarried bounds the writers one commit carries besides its own.
	maxCarried = 64
	// followerPatience is how long, in multiples of the time it took to
	// publish and list, a writer that is not the first of its round
	// waits for the pointer to move before it carries the round itself.
	followerPatience = 12
	// aheadTakeover is how often a writer bound ahead that is not the
	// first of its round reads the announced value before it carries the
	// round itself.
	aheadTakeover = 8
)

// IntentClose begins the name of the marker that closes a round:
// _intent/<head>/~<write id> announces the write id of the compare-and-swap
// with which the round's carrier replaces head. It sorts after every
// intent id.
const IntentClose = "~"

// intent is what a rebasing writer publishes for one round: every path it
// read with the entry the head has there (Base, nil if none) and its own
// (Set, nil to remove), and what the guards need. It is bound to one
// pointer value (Head, its write id) and so to one seq.
type intent struct {
	Format       int          `json:"format"`
	Generation   string       `json:"generation"`
	Head         string       `json:"head"`
	Seq          uint64       `json:"seq"`
	Writer       string       `json:"writer,omitempty"`
	StagingStart time.Time    `json:"staging_start"`
	Fence        uint64       `json:"fence,omitempty"`
	FenceLease   string       `json:"fence_lease,omitempty"`
	Scope        string       `json:"scope,omitempty"`
	Reads        []intentRead `json:"reads"`
}

type intentRead struct {
	Path string            `json:"path"`
	Base *generation.Entry `json:"base,omitempty"`
	Set  *generation.Entry `json:"set,omitempty"`
}

func intentKey(head, id string) string { return IntentDir + head + "/" + id }

// member is one writer of a group commit, as far as overlap goes: the
// paths it read one by one and the subtree it owns as a whole.
type member struct {
	reads map[string]bool
	scope string
}

func (m *member) covers(p string) bool {
	return m.reads[p] || (m.scope != "" && strings.HasPrefix(p, m.scope))
}

// conflicts reports whether two writers read a common path, or own nested
// subtrees: then they cannot be applied in one commit.
func (m *member) conflicts(o *member) bool {
	if m.scope != "" && o.scope != "" && (strings.HasPrefix(m.scope, o.scope) || strings.HasPrefix(o.scope, m.scope)) {
		return true
	}
	for p := range m.reads {
		if o.covers(p) {
			return true
		}
	}
	for p := range o.reads {
		if m.covers(p) {
			return true
		}
	}
	return false
}

// head is the pointer value a round builds on, with its manifest.
type head struct {
	ptr   *pointer.Pointer
	attrs store.Attrs
	// entries and keys are the manifest's entries by path, and the keys
	// they reference.
	entries map[string]generation.Entry
	keys    map[string]bool
}

// newHead returns the head p, with attrs, whose manifest has entries.
func newHead(p *pointer.Pointer, attrs store.Attrs, entries []generation.Entry) *head {
	h := &head{ptr: p, attrs: attrs, entries: make(map[string]generation.Entry, len(entries)), keys: make(map[string]bool, len(entries))}
	for _, e := range entries {
		h.entries[e.Path] = e
		h.keys[e.Key] = true
	}
	return h
}

// fenceToken is a fence a group commit raises for a writer it carries.
type fenceToken struct {
	lease string
	token uint64
}

// groupable reports whether this Tx may take part in a group commit: it
// did not read the whole base (any change would conflict with it), keeps
// nothing from another snapshot (its guards need the pin and the floor),
// and every object its changes reference is its own or referenced by the
// head, so a carrier has nothing to prove present.
func (tx *Tx) groupable(rs *rebaseState, h *head) bool {
	if tx.rebase.NoGroup || rs.all || tx.refSeq != 0 || h.ptr.WriteID == "" {
		return false
	}
	own := generation.Prefix(tx.gen)
	for p := range rs.read {
		if e, ok := rs.mine[p]; ok && !strings.HasPrefix(e.Key, own) && !h.keys[e.Key] {
			return false
		}
	}
	return true
}

// intentFor returns this Tx's intent on the head, which has none of the
// changes it read (rebaseHead, or Begin for a first compare-and-swap,
// checked that).
func (tx *Tx) intentFor(rs *rebaseState, h *head, opts CommitOptions) *intent {
	in := &intent{
		Format:       intentFormat,
		Generation:   tx.gen,
		Head:         h.ptr.WriteID,
		Seq:          h.ptr.Seq + 1,
		Writer:       tx.d.writer,
		StagingStart: tx.stagingStart,
		Fence:        opts.Fence,
		FenceLease:   opts.FenceLease,
		Scope:        tx.rebase.Scope,
	}
	if opts.Fence == 0 {
		in.FenceLease = ""
	}
	paths := map[string]bool{}
	for p := range rs.read {
		paths[p] = true
	}
	if in.Scope != "" {
		for p := range h.entries {
			if strings.HasPrefix(p, in.Scope) {
				paths[p] = true
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		r := intentRead{Path: p}
		if e, ok := h.entries[p]; ok {
			r.Base = &e
		}
		switch e, ok := rs.mine[p]; {
		case rs.read[p] && ok:
			r.Set = &e
		case !rs.read[p]:
			r.Set = r.Base // under the scope, unchanged
		}
		in.Reads = append(in.Reads, r)
	}
	return in
}

// publishIntent writes the intent and returns its key. A write whose
// outcome is not known is taken as written: the intent may be carried
// either way.
func (tx *Tx) publishIntent(ctx context.Context, in *intent) string {
	id, err := generation.New()
	if err != nil {
		return ""
	}
	key := intentKey(in.Head, id)
	b, err := json.Marshal(in)
	if err != nil {
		return ""
	}
	tx.mu.Lock()
	tx.staged = append(tx.staged, key)
	tx.intents = append(tx.intents, key)
	tx.liveIntent, tx.liveKey, tx.liveVia = in, key, ""
	tx.mu.Unlock()
	_, err = tx.d.s.Put(ctx, key, bytes.NewReader(b), store.PutOptions{IfNoneMatch: true, Size: int64(len(b)), ContentType: "application/json"})
	if err != nil && !errors.Is(err, store.ErrPrecondition) {
		tx.d.log.Debug("intent write failed; taken as written", "key", key, "error", err)
	}
	return key
}

// readIntent reads and checks the intent at key against the head it is
// bound to; nil means it is missing or unusable, and is skipped.
func (d *Dataset) readIntent(ctx context.Context, key string, h *head) *intent {
	rc, _, err := d.s.Get(ctx, key)
	if err != nil {
		return nil
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxIntentSize+1))
	if err != nil || len(b) > maxIntentSize {
		return nil
	}
	var in intent
	if err := strictjson.Decode(b, []int{intentFormat}, &in); err != nil {
		d.log.Debug("intent unreadable; skipped", "key", key, "error", err)
		return nil
	}
	if generation.Valid(in.Generation) != nil || in.Head != h.ptr.WriteID || in.Seq != h.ptr.Seq+1 || in.StagingStart.IsZero() {
		return nil
	}
	return &in
}

// admit reports whether the intent can be applied on the head, with the
// guards the writer's own commit would face there: the collector's
// horizon against its staging start, and its lease's fence.
func admit(in *intent, h *head) (*member, bool) {
	cur := h.ptr
	if !cur.GCHorizon.IsZero() && !cur.GCHorizon.Before(in.StagingStart) {
		return nil, false
	}
	if checkFence(cur, in.Fence, in.FenceLease) != nil {
		return nil, false
	}
	if in.Scope != "" && (!strings.HasSuffix(in.Scope, "/") || generation.CheckPath(strings.TrimSuffix(in.Scope, "/")) != nil) {
		return nil, false
	}
	m := &member{reads: make(map[string]bool, len(in.Reads)), scope: in.Scope}
	own := generation.Prefix(in.Generation)
	for _, r := range in.Reads {
		if generation.CheckPath(r.Path) != nil || m.reads[r.Path] {
			return nil, false
		}
		m.reads[r.Path] = true
		e, ok := h.entries[r.Path]
		if ok != (r.Base != nil) || (ok && !sameEntry(e, *r.Base)) {
			return nil, false // changed since the writer's base
		}
		if r.Set != nil && (r.Set.Path != r.Path || (!strings.HasPrefix(r.Set.Key, own) && !h.keys[r.Set.Key])) {
			return nil, false
		}
		if r.Set != nil && !validEntry(in.Generation, *r.Set) {
			return nil, false // would make the carrier's manifest invalid
		}
	}
	if in.Scope != "" {
		for p := range h.entries {
			if strings.HasPrefix(p, in.Scope) && !m.reads[p] {
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

// gather reads the intents at keys of the other writers of the round,
// at most maxCarried, all at once, in the order they were published.
// Those in read, read before from an earlier listing of the round, are
// not read again: an intent is written once.
func (tx *Tx) gather(ctx context.Context, keys []string, h *head, read map[string]*intent) []*intent {
	out := tx.readIntents(ctx, tx.othersOf(keys), h, read)
	seen := map[string]bool{tx.gen: true}
	return slices.DeleteFunc(out, func(in *intent) bool {
		if in == nil || seen[in.Generation] {
			return true
		}
		seen[in.Generation] = true
		return false
	})
}

// othersOf returns the keys, of those given, of the other writers'
// intents, at most maxCarried.
func (tx *Tx) othersOf(keys []string) []string {
	tx.mu.Lock()
	mine := slices.Clone(tx.intents)
	tx.mu.Unlock()
	var want []string
	for _, k := range keys {
		if !slices.Contains(mine, k) && len(want) < maxCarried {
			want = append(want, k)
		}
	}
	return want
}

// readAhead reads, all at once, the intents of the other writers at
// keys, at most maxCarried, and returns those it could read by key, for
// gather.
func (tx *Tx) readAhead(ctx context.Context, keys []string, h *head) map[string]*intent {
	want := tx.othersOf(keys)
	out := tx.readIntents(ctx, want, h, nil)
	read := make(map[string]*intent, len(want))
	for i, in := range out {
		if in != nil {
			read[want[i]] = in
		}
	}
	return read
}

// readIntents reads the intents at keys all at once, but for those in
// read; nil stands for one it could not read or use.
func (tx *Tx) readIntents(ctx context.Context, keys []string, h *head, read map[string]*intent) []*intent {
	out := make([]*intent, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		if in := read[k]; in != nil {
			out[i] = in
			continue
		}
		wg.Go(func() { out[i] = tx.d.readIntent(ctx, k, h) })
	}
	wg.Wait()
	return out
}

// listIntents returns the keys of the intents bound to the pointer value
// with write id head, sorted, and the write id its carrier announced when
// it closed the round ("" while the round is open).
func (tx *Tx) listIntents(ctx context.Context, head string) (keys []string, next string, err error) {
	r := roundListing{dir: IntentDir + head + "/"}
	for o, err := range store.List(ctx, tx.d.s, r.dir, "", "") {
		if err != nil {
			return nil, "", err
		}
		if r.add(o.Key) {
			break
		}
	}
	keys, next = r.result()
	return keys, next, nil
}

// roundListing collects a round's intents and its marker from a listing
// of its directory.
type roundListing struct {
	dir  string
	keys []string
	next string
}

// add takes a key under the round's directory; it reports whether the
// round has more intents than a carrier would read.
func (r *roundListing) add(key string) (full bool) {
	if id, ok := strings.CutPrefix(strings.TrimPrefix(key, r.dir), IntentClose); ok {
		if uuid.Validate(id) == nil && (r.next == "" || id < r.next) {
			r.next = id
		}
		return false
	}
	r.keys = append(r.keys, key)
	return len(r.keys) > 4*maxCarried
}

// result returns the round's intents, sorted, and its marker's write id.
func (r *roundListing) result() ([]string, string) {
	slices.Sort(r.keys)
	return r.keys, r.next
}

// busyWindow is how long before the base was committed an intent on
// another value may have been written for scanIntents to take it as a
// sign of writers at work: intents are deleted when their commits end,
// and older ones are a crashed writer's, left to the collector.
const busyWindow = 10 * time.Second

// scanIntents lists the whole intent directory in one page and returns
// what listIntents returns for h's round, and whether intents on other
// values show other writers at work (written, by the store's clock, at
// most busyWindow before h was committed): writers that lost to h and
// have not published on it yet, or that are bound ahead. (A writer that
// commits alone, back to back, would otherwise never see the writers
// it keeps beating: each time they publish on the value it has just
// replaced.) Markers are left out: the last round of a burst keeps one.
// announced is the key of a marker that announced h, if the listing
// shows one: a Tx that commits on h deletes it (see dropIntents). When
// the directory holds more than a page, it lists h's round alone.
func (tx *Tx) scanIntents(ctx context.Context, h *head) (keys []string, next string, busy bool, announced string, err error) {
	page, err := tx.d.s.List(ctx, store.ListRequest{Prefix: IntentDir})
	if err != nil {
		return nil, "", false, "", err
	}
	if page.Next != "" {
		keys, next, err := tx.listIntents(ctx, h.ptr.WriteID)
		return keys, next, false, "", err
	}
	r := roundListing{dir: IntentDir + h.ptr.WriteID + "/"}
	since := h.attrs.LastModified.Add(-busyWindow)
	for _, o := range page.Objects {
		if strings.HasPrefix(o.Key, r.dir) {
			if r.add(o.Key) {
				break
			}
			continue
		}
		_, id, ok := strings.Cut(strings.TrimPrefix(o.Key, IntentDir), "/")
		switch {
		case !ok:
		case id == IntentClose+h.ptr.WriteID:
			announced = o.Key
		case !strings.HasPrefix(id, IntentClose) && !o.LastModified.Before(since):
			busy = true
		}
	}
	keys, next = r.result()
	return keys, next, busy, announced, nil
}

// closeRound closes the round on h, which this Tx carries: it announces
// the write id of its compare-and-swap on h, and returns it. A writer that
// lists the round from now on binds its intent to that value instead
// (roundAhead). The id is this Tx's to use once, whether or not the
// marker was written. A marker to keep (see dropIntents) replaces the one
// kept before, which is dropped with the intents.
func (tx *Tx) closeRound(ctx context.Context, h *head, keep bool) string {
	id := pointer.NewWriteID()
	key := IntentDir + h.ptr.WriteID + "/" + IntentClose + id
	tx.mu.Lock()
	tx.staged = append(tx.staged, key)
	if keep {
		if tx.keptMarker != "" {
			tx.intents = append(tx.intents, tx.keptMarker)
		}
		tx.keptMarker, tx.keptMarkerID = key, id
	} else {
		tx.intents = append(tx.intents, key)
	}
	tx.mu.Unlock()
	if _, err := tx.d.s.Put(ctx, key, bytes.NewReader(nil), store.PutOptions{IfNoneMatch: true}); err != nil {
		tx.d.log.Debug("round not closed; later writers may miss it", "key", key, "error", err)
	}
	return id
}

// group is what a round decided to send: the entries, the writers carried
// and the fences they raise, and the write id its carrier announced for
// its first compare-and-swap ("" for a fresh one).
type group struct {
	entries []generation.Entry
	carried []generation.Carried
	fences  []fenceToken
	writeID string
}

// carry adds to this Tx's rebased entries every intent that applies on the
// head, conflicts with no writer already in, and whose fence the pointer
// can take. Intents are taken in the order they were published.
func (tx *Tx) carry(rs *rebaseState, h *head, own []generation.Entry, ins []*intent, opts CommitOptions) group {
	g := group{entries: own}
	if len(ins) == 0 {
		return g
	}
	self := &member{reads: rs.read, scope: tx.rebase.Scope}
	members := []*member{self}
	leases := map[string]bool{}
	if opts.Fence != 0 {
		leases[opts.FenceLease] = true
	}
	// probe is next as it will be sent, as long as it can be, to check
	// that the fences of the writers carried fit.
	probe := *h.ptr
	probe.Seq, probe.Parent, probe.Writer, probe.Message, probe.Meta = h.ptr.Seq+1, h.ptr.Generation, tx.d.writer, opts.Message, opts.Meta
	probe.CommittedAt = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	if opts.Fence != 0 {
		probe.RaiseFence(opts.FenceLease, opts.Fence)
	}
	out := make(map[string]generation.Entry, len(own))
	for _, e := range own {
		out[e.Path] = e
	}
	for _, in := range ins {
		m, ok := admit(in, h)
		if !ok || slices.ContainsFunc(members, m.conflicts) {
			continue
		}
		if in.Fence != 0 {
			if leases[in.FenceLease] || probe.CheckFence(in.FenceLease) != nil {
				continue
			}
			next := probe
			next.RaiseFence(in.FenceLease, in.Fence)
			if encodes(&next) != nil {
				continue
			}
			probe = next
			leases[in.FenceLease] = true
			g.fences = append(g.fences, fenceToken{in.FenceLease, in.Fence})
		}
		members = append(members, m)
		for _, r := range in.Reads {
			if r.Set != nil {
				out[r.Path] = *r.Set
			} else {
				delete(out, r.Path)
			}
		}
		g.carried = append(g.carried, generation.Carried{Generation: in.Generation, Writer: in.Writer})
	}
	if len(g.carried) == 0 {
		return g
	}
	es := make([]generation.Entry, 0, len(out))
	for _, e := range out {
		es = append(es, e)
	}
	if file, _ := generation.Clash(es); file != "" {
		// Disjoint paths, but a file where another writer makes a
		// directory: carry nobody this round.
		return group{entries: own}
	}
	g.entries = es
	return g
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

// carryFirst runs the first compare-and-swap of a commit with rebase as a
// group-commit round when other writers' intents wait on its base, or
// when contention is likely: it joins or opens the round. It returns what
// round returns, and what the Tx read; a nil rebaseState means it does not
// take part, and the commit goes on alone. It costs one LIST (two when
// the intent directory holds more than a page); a round, when it joins
// one, its requests.
func (tx *Tx) carryFirst(ctx context.Context, entries []generation.Entry, opts CommitOptions) (group, *head, *moved, *rebaseState, error) {
	tx.mu.Lock()
	bm := tx.baseManifest
	ok := tx.joinable()
	tx.mu.Unlock()
	if !ok {
		return group{}, nil, nil, nil, nil
	}
	h := newHead(tx.base, store.Attrs{ETag: tx.baseETag, LastModified: tx.baseCommittedAt}, bm.Entries)
	keys, next, busy, announced, err := tx.scanIntents(ctx, h)
	tx.mu.Lock()
	tx.baseMarker = announced
	tx.mu.Unlock()
	// With no round on the base, the commit goes alone unless contention
	// is likely: this Dataset met it, or the store shows it to a new
	// process too: the base is a group commit (its manifest carried
	// others), or writers have intents on other values.
	if err != nil || (len(keys) == 0 && next == "" && !tx.d.contended.Load() && len(bm.Carried) == 0 && !busy) {
		return group{}, nil, nil, nil, nil
	}
	rs, err := tx.prepareRebase(ctx, entries)
	if err != nil || !tx.groupable(rs, h) {
		return group{}, nil, nil, nil, nil
	}
	if err := tx.guard(ctx, tx.base, opts.Fence, opts.FenceLease); err != nil {
		return group{}, nil, nil, nil, nil // the commit refuses it on its own
	}
	g, on, mv, err := tx.round(ctx, rs, h, entries, opts, &listing{keys, next})
	return g, on, mv, rs, err
}

// listing is what a LIST of a round's intents showed.
type listing struct {
	keys []string
	next string
}

// round is one group-commit round on a head. Listed, when not nil, is the
// round's listing as the caller read it; round lists it otherwise. A
// closed round (its carrier announced its write id) is joined ahead, on
// the value it will write (roundAhead). Otherwise the Tx publishes its
// intent on h and either waits for the writer that published first to
// carry it, or, being that writer, waits for the others of the round,
// closes it and carries them. It returns the
// group to send and the head it is built on, or, when the pointer moved
// while it waited, the pointer read (the intent is then settled: carried
// or dead).
func (tx *Tx) round(ctx context.Context, rs *rebaseState, h *head, own []generation.Entry, opts CommitOptions, listed *listing) (group, *head, *moved, error) {
	t0 := time.Now()
	if listed == nil {
		keys, next, err := tx.listIntents(ctx, h.ptr.WriteID)
		if err != nil {
			return group{entries: own}, h, nil, nil // carry nobody
		}
		listed = &listing{keys, next}
	}
	if listed.next != "" {
		return tx.roundAhead(ctx, rs, h, listed.next, opts, t0)
	}
	key := tx.publishIntent(ctx, tx.intentFor(rs, h, opts))
	tx.bindIntent(h.ptr, nil)
	keys, first := listed.keys, false
	if len(keys) == 0 {
		// Nobody waited: whoever published first leads. (Writers that
		// start together all find nobody; had each of them led, each
		// would have closed a round of its own, and all of those rounds
		// but one would have failed.)
		again, _, err := tx.listIntents(ctx, h.ptr.WriteID)
		if err != nil {
			return group{entries: own}, h, nil, nil // carry nobody
		}
		keys, first = again, len(again) == 0 || again[0] == key
	}
	// The others of the round publish and list about as fast as this
	// writer did.
	rtt := max(time.Since(t0), time.Millisecond)
	if first {
		// While the others publish, read the intents listed already:
		// only those published since are left to read once the round
		// is closed. A Tx whose context ends waits neither for the
		// others nor for these reads (they end on their own).
		early := make(chan map[string]*intent, 1)
		go func() { early <- tx.readAhead(ctx, keys, h) }()
		wait := time.NewTimer(rtt)
		defer wait.Stop()
		var read map[string]*intent
		for range 2 {
			select {
			case <-wait.C:
			case read = <-early:
			case <-ctx.Done():
				return group{}, nil, nil, ctx.Err()
			}
		}
		return tx.closeAndCarry(ctx, rs, h, own, opts, keys, false, read), h, nil, nil
	}
	// The first writer carries the round: it waits about as long as
	// this writer took, then closes, lists, reads and writes the round
	// in a few requests more. Wait that long, then read the pointer at
	// this writer's pace, so as to learn the round's outcome soon after
	// it lands; carry the round only if the pointer has not moved after
	// followerPatience times that pace.
	wait := 2 * rtt
	for waited := time.Duration(0); waited < followerPatience*rtt; {
		d := wait/2 + rand.N(wait/2+1)
		if err := ctxtime.Sleep(ctx, d); err != nil {
			return group{}, nil, nil, err
		}
		waited, wait = waited+d, rtt
		p, attrs, err := pointer.Read(ctx, tx.d.s)
		if err != nil || p.WriteID == h.ptr.WriteID {
			continue
		}
		mv, err := tx.settleMoved(ctx, p, attrs)
		return group{}, nil, mv, err
	}
	return tx.closeAndCarry(ctx, rs, h, own, opts, keys, false, nil), h, nil, nil
}

// closeAndCarry closes the round on h and carries every intent listed
// then (or, if that LIST fails, those listed before); those in read it
// read already. The group's compare-and-swap on h is to use the write id
// announced. keep keeps the marker past the commit (see dropIntents).
func (tx *Tx) closeAndCarry(ctx context.Context, rs *rebaseState, h *head, own []generation.Entry, opts CommitOptions, keys []string, keep bool, read map[string]*intent) group {
	id := tx.closeRound(ctx, h, keep)
	if again, _, err := tx.listIntents(ctx, h.ptr.WriteID); err == nil {
		keys = again
	}
	g := tx.carry(rs, h, own, tx.gather(ctx, keys, h, read), opts)
	g.writeID = id
	tx.mu.Lock()
	for _, k := range keys {
		if !slices.Contains(tx.intents, k) {
			tx.othersCarried = append(tx.othersCarried, k)
		}
	}
	tx.mu.Unlock()
	return g
}

// roundAhead joins the round after the closed one on h: the Tx binds its
// intent to next, the value h's carrier announced it will write, before
// that value exists. Its reads take the entries h has; a carrier on next
// checks them against next, as it checks every intent against its head.
// The writer that published first on next leads its round: it waits for
// next to replace h, rebases on it, closes its round and carries it. The
// others wait for the pointer to move past next, and carry the round
// themselves only if it does not. When the pointer moves anywhere else,
// the intent is settled (it is dead: next can no longer be written); when
// h stays for long (its carrier may have died), the writer withdraws the
// intent by rewriting h, after which next can never be written either.
func (tx *Tx) roundAhead(ctx context.Context, rs *rebaseState, h *head, next string, opts CommitOptions, t0 time.Time) (group, *head, *moved, error) {
	bound := &pointer.Pointer{WriteID: next, Seq: h.ptr.Seq + 1}
	in := tx.intentFor(rs, h, opts)
	in.Head, in.Seq = next, bound.Seq+1
	key := tx.publishIntent(ctx, in)
	tx.bindIntent(bound, h.ptr)
	tx.mu.Lock()
	tx.liveVia = IntentDir + h.ptr.WriteID + "/" + IntentClose + next
	tx.boundVia = append(tx.boundVia, tx.liveVia)
	tx.mu.Unlock()
	keys, _, err := tx.listIntents(ctx, next)
	first := err == nil && (len(keys) == 0 || keys[0] == key)
	rtt := max(time.Since(t0), time.Millisecond)
	wait, seen := rtt, 0
	for waited := time.Duration(0); ; {
		d := wait/2 + rand.N(wait/2+1)
		if first {
			d = rtt / 2
		}
		if err := ctxtime.Sleep(ctx, d); err != nil {
			return group{}, nil, nil, err
		}
		waited += d
		if seen == 0 {
			wait = min(2*wait, 4*rtt)
		} else {
			// The round on next is under way, and lands within a few
			// requests: read the pointer at the pace this writer
			// published and listed, so as to learn its outcome soon
			// after.
			wait = rtt
		}
		p, attrs, err := pointer.Read(ctx, tx.d.s)
		switch {
		case err != nil:
			if waited > aheadPatience*rtt {
				return group{}, nil, nil, fmt.Errorf("group commit: read the pointer: %w", err)
			}
		case p.Seq == h.ptr.Seq:
			// next has not replaced the value at h's seq. Its write is
			// conditioned on one such value: h, as the marker's place
			// says, but a marker can be forged, and h may have been
			// rewritten since. While one is there, next may come.
			if waited > aheadPatience*rtt {
				mv, err := tx.withdrawAhead(ctx)
				return group{}, nil, mv, err
			}
		case p.WriteID == next:
			tx.bindIntent(p, nil)
			if seen++; first || seen > aheadTakeover {
				return tx.leadAhead(ctx, rs, p, attrs, opts)
			}
		default:
			mv, err := tx.settleMoved(ctx, p, attrs)
			return group{}, nil, mv, err
		}
	}
}

// aheadPatience bounds, in multiples of the time it took to publish and
// list, how long a writer bound ahead waits for the announced value to
// replace its head: longer than the followers of that head's round wait
// before they carry it themselves.
const aheadPatience = 32

// leadAhead carries the round on p, the value this Tx's intent is bound
// to, which it bound ahead: it rebases on p, then closes and carries the
// round. An error ends the commit; its intent is then live on p.
func (tx *Tx) leadAhead(ctx context.Context, rs *rebaseState, p *pointer.Pointer, attrs store.Attrs, opts CommitOptions) (group, *head, *moved, error) {
	h, own, err := tx.rebaseHead(ctx, rs, p, attrs, &ConflictError{Winner: p.Generation, Seq: p.Seq})
	if err != nil {
		return group{}, nil, nil, err
	}
	if !tx.groupable(rs, h) {
		return group{entries: own}, h, nil, nil
	}
	if err := tx.guard(ctx, p, opts.Fence, opts.FenceLease); err != nil {
		return group{}, nil, nil, err
	}
	return tx.closeAndCarry(ctx, rs, h, own, opts, nil, true, nil), h, nil, nil
}

// withdrawAhead withdraws an intent bound ahead whose announced value did
// not come, and returns the pointer value that carried it (it may have,
// meanwhile) or the pointer to go on from.
func (tx *Tx) withdrawAhead(ctx context.Context) (*moved, error) {
	landed, err := tx.settle(ctx)
	if err != nil {
		return nil, err
	}
	if landed != nil {
		return &moved{landed: landed}, nil
	}
	p, attrs, err := pointer.Read(ctx, tx.d.s)
	if err != nil {
		return nil, fmt.Errorf("group commit: read the pointer: %w", err)
	}
	return &moved{got: p, attrs: attrs}, nil
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
	ih := tx.intentHead
	tx.mu.Unlock()
	mv := &moved{got: p, attrs: attrs}
	if ih == nil || p.Seq <= ih.Seq {
		// Replaced without a commit, or, for an intent bound ahead, by
		// another value than the one announced (whose write was
		// conditioned on the value replaced): no commit can be built on
		// the value the intent is bound to any more.
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
		mv.landed = carriedPointer(p, m, sum)
		return mv, nil
	}
	tx.mu.Lock()
	tx.winner = m.Generation
	if m.Generation == p.Generation && sum == p.ManifestSHA256 {
		tx.settledOn, tx.settledOnSHA = m, sum
	}
	tx.mu.Unlock()
	tx.clearIntent()
	return mv, nil
}

// appliedIn checks that m, which names this Tx as carried, holds its
// changes: every path it read set as it has it, and under its scope
// exactly the files it has, those it kept untouched too. A manifest that
// claims the Tx without them was not written by a carrier that followed
// the rules; the Tx cannot tell what landed.
func (tx *Tx) appliedIn(m *generation.Manifest) error {
	tx.mu.Lock()
	rs := tx.reads
	tx.mu.Unlock()
	if rs == nil {
		return fmt.Errorf("%w: generation %s names generation %s as carried, which published no intent", generation.ErrCorrupt, m.Generation, tx.gen)
	}
	bad := func(p string) error {
		return fmt.Errorf("%w: generation %s names generation %s as carried but does not hold its change of %q", generation.ErrCorrupt, m.Generation, tx.gen, p)
	}
	for p := range rs.read {
		e, ok := m.Find(p)
		mine, has := rs.mine[p]
		if ok != has || (ok && !sameEntry(e, mine)) {
			return bad(p)
		}
	}
	if scope := tx.rebase.Scope; scope != "" {
		for _, e := range m.Entries {
			if mine, ok := rs.mine[e.Path]; strings.HasPrefix(e.Path, scope) && (!ok || !sameEntry(e, mine)) {
				return bad(e.Path)
			}
		}
		for p := range rs.mine {
			if _, ok := m.Find(p); strings.HasPrefix(p, scope) && !ok {
				return bad(p)
			}
		}
	}
	return nil
}

func (tx *Tx) clearIntent() {
	tx.bindIntent(nil, nil)
}

// bindIntent records the pointer value the live intent is bound to, and,
// for one bound ahead to a value not yet seen, the value it is to replace.
func (tx *Tx) bindIntent(to, after *pointer.Pointer) {
	tx.mu.Lock()
	tx.intentHead, tx.intentAfter = to, after
	tx.mu.Unlock()
}

// carriedPointer returns the pointer value of the commit m that carried
// this Tx, given p, a pointer at or past it: p itself when it is that
// commit, otherwise the fields the manifest tells, with no write id.
func carriedPointer(p *pointer.Pointer, m *generation.Manifest, sum string) *pointer.Pointer {
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
			m, err = d.loadManifest(ctx, gen, sum)
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
	ih, after, in := tx.intentHead, tx.intentAfter, tx.liveIntent
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
		// An intent bound ahead is withdrawn by rewriting the value at
		// the seq of the one the announced value was to replace: its
		// write was conditioned on a value at that seq, this one or one
		// gone before it.
		if p.WriteID != ih.WriteID && (after == nil || p.Seq != after.Seq) {
			mv, err := tx.settleMoved(rctx, p, attrs)
			if err != nil {
				return nil, err
			}
			return mv.landed, nil
		}
		if p.WriteID == ih.WriteID && in != nil && !tx.d.admissibleOn(rctx, in, p, attrs) {
			// A writer that followed a kept marker to a value already
			// there, and lost on it (an overlap, a fence): no carrier on
			// p takes the intent, and p is another writer's commit, not
			// this one's to rewrite (its lease may be gone, too).
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
			ctxtime.Sleep(rctx, tx.d.retry.backoff(attempt))
		}
	}
	return nil, fmt.Errorf("could not withdraw the intent: %w", werr)
}

// admissibleOn reports whether a carrier on p could take the intent in:
// whether admit takes it against p and p's manifest. When that cannot be
// told (the manifest unread, or the intent not bound to p), it answers
// true: the intent may be live.
func (d *Dataset) admissibleOn(ctx context.Context, in *intent, p *pointer.Pointer, attrs store.Attrs) bool {
	var m *generation.Manifest
	err := retryRead(ctx, d.retry, func() (err error) {
		m, err = d.loadManifest(ctx, p.Generation, p.ManifestSHA256)
		return err
	})
	if err != nil || m.Seq != p.Seq || in.Head != p.WriteID || in.Seq != p.Seq+1 {
		return true
	}
	_, ok := admit(in, newHead(p, attrs, m.Entries))
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
	tx.d.contended.Store(true)
	tx.mu.Lock()
	tx.carriedBy = p.Generation
	tx.intentHead = nil
	tx.mu.Unlock()
	tx.d.log.Debug("carried", "generation", tx.gen, "by", p.Generation, "seq", p.Seq)
}

// CarriedBy returns the generation of the commit that applied this Tx's
// changes as one of a group (see Rebase), or "" if it committed itself
// or did not commit.
func (tx *Tx) CarriedBy() string {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.carriedBy
}

// dropIntents deletes the intents this Tx wrote, once its outcome is
// known (landed is the pointer value that committed it, or nil); what a
// failure leaves, the collector sweeps.
//
// A Tx whose own commit landed also deletes the other writers' intents
// it listed in the rounds it carried: each is bound to a value that is
// gone now, so it is dead, whether it was carried or not. So a carried Tx
// leaves to its carrier its live intent, which the carrier listed, and
// the marker it bound that intent through, which the carrier bound its
// own through too (when it led the round ahead): one DeleteMany for the
// round instead of one per writer. A carrier that was not bound through
// that marker (it began on the value the marker announced) saw it in
// the LIST that found its round (scanIntents), and deletes it too.
//
// A round's marker is kept past its commit when that round was led ahead:
// writers keep coming to that round's value, V, after its commit W has
// landed (they began on V and took a while to commit), and the marker
// sends them on to W's round, which its leader closes as soon as W lands,
// rather than to an intent on V that nothing will carry. The writers that
// bound their intents to W through it delete it with their own, W's round
// being over for them then; the collector deletes what is left (the last
// round of a burst leaves its marker). A marker whose value did not land
// is deleted at once.
func (tx *Tx) dropIntents(ctx context.Context, landed *pointer.Pointer) {
	tx.mu.Lock()
	keys := append(slices.Clone(tx.intents), tx.boundVia...)
	if tx.keptMarker != "" && (landed == nil || landed.WriteID != tx.keptMarkerID) {
		keys = append(keys, tx.keptMarker)
	}
	switch {
	case landed != nil && tx.carriedBy == "":
		keys = append(keys, tx.othersCarried...)
		if tx.baseMarker != "" && !slices.Contains(keys, tx.baseMarker) {
			keys = append(keys, tx.baseMarker)
		}
	case landed != nil:
		keys = slices.DeleteFunc(keys, func(k string) bool { return k == tx.liveKey || k == tx.liveVia })
	}
	tx.intents, tx.boundVia, tx.keptMarker, tx.keptMarkerID, tx.othersCarried, tx.baseMarker = nil, nil, "", "", nil, ""
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
