package gc

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// manifestInfo is a manifest as read from the store.
type manifestInfo struct {
	m *generation.Manifest
	// sha is the sha256 of the stored bytes.
	sha string
	// modified is the manifest's Last-Modified: the time, in the store's
	// clock, just before its generation superseded its parent.
	modified time.Time
}

// listing is the listing of _gen/, grouped by generation.
type listing struct {
	gens map[string]*genObjects
	// stray counts keys under _gen/ that belong to no valid generation id.
	// The collector never deletes what it does not understand.
	stray int
}

// genObjects are the listed objects of one generation.
type genObjects struct {
	objs   []store.Object
	newest time.Time
	bytes  int64
}

// plan is what one collection intends to do, decided from one reading of
// the pointer.
type plan struct {
	ptr  *pointer.Pointer // nil when the dataset has no pointer
	etag string
	// now is the store's clock, from the pointer's GET.
	now time.Time
	// cutoff is the orphan cutoff: a generation outside the chain whose
	// newest object was modified at or before it is an orphan. It is the
	// horizon published before orphans are deleted.
	cutoff time.Time
	// needHorizon: the plan must publish its horizon and floor by a CAS
	// of the pointer before it deletes anything.
	needHorizon bool
	// horizon is the pointer's gc_horizon once the plan is carried out.
	horizon time.Time
	// committedAt is when the current generation was committed, in the
	// store's clock; the collector's pointer rewrite carries it.
	committedAt time.Time
	// floor is the lowest seq of the chain retained as a window from the
	// current generation; published as the pointer's gc_floor before a
	// chain generation is deleted, so that no rollback can reference it.
	floor uint64

	kept []GenInfo
	// victims are the generations the plan deletes from, in order: chain
	// generations oldest first, then orphans (see sweep for the order of
	// the requests).
	victims []*victim
	// left counts the objects a limit (Options.MaxDelete) leaves for a
	// later run.
	left        int
	expiredPins []string
	notes       []string
	// reusedPins: the plan judged an earlier plan's pin listing.
	reusedPins bool
	// oldJobs: a job's record is older than the orphan age, so the plan
	// publishes its horizon, after which the job can no longer commit and
	// its records go (see dropJobs).
	oldJobs bool
}

// victim is a generation the plan deletes from: its unmarked data objects
// and its manifest, which goes after them.
type victim struct {
	info  GenInfo
	chain bool
	data  []store.Object
	// manifest is the generation's manifest, nil when the listing showed
	// none.
	manifest *store.Object
}

// objects returns how many objects the plan deletes from v.
func (v *victim) objects() int {
	if v.manifest != nil {
		return len(v.data) + 1
	}
	return len(v.data)
}

// count recomputes the objects and bytes of v's report entry.
func (v *victim) count() {
	v.info.Objects, v.info.Bytes = v.objects(), 0
	for _, o := range v.data {
		v.info.Bytes += max(o.Size, 0)
	}
	if v.manifest != nil {
		v.info.Bytes += max(v.manifest.Size, 0)
	}
}

// objects returns how many objects the plan deletes.
func (p *plan) objects() int {
	n := 0
	for _, v := range p.victims {
		n += v.objects()
	}
	return n
}

// has reports whether the plan deletes from a chain generation (chain) or
// from an orphan (!chain).
func (p *plan) has(chain bool) bool {
	return slices.ContainsFunc(p.victims, func(v *victim) bool { return v.chain == chain })
}

// decideHorizon sets what the plan must publish before it deletes: the
// horizon at the orphan cutoff when it deletes orphans, the floor when it
// deletes chain generations, each only if the pointer has it lower.
func (p *plan) decideHorizon() {
	p.needHorizon, p.horizon = false, p.ptr.GCHorizon
	if (p.has(false) || p.oldJobs) && p.ptr.GCHorizon.Before(p.cutoff) {
		p.needHorizon = true
		p.horizon = p.cutoff
	}
	if p.has(true) && p.ptr.GCFloor < p.floor {
		p.needHorizon = true
	}
}

// refuse wraps an error that stops a run before anything is deleted.
func refuse(err error) error {
	return fmt.Errorf("%w: %w", ErrRefused, err)
}

// plan reads the pointer, the chain, the pins and the listing, and decides
// what to keep and what to delete. It writes nothing.
func (r *runner) plan(ctx context.Context) (*plan, error) {
	ptr, attrs, err := r.readPointer(ctx)
	if errors.Is(err, store.ErrNotExist) {
		return &plan{}, nil
	}
	if err != nil {
		return nil, refuse(fmt.Errorf("pointer %q: %w", pointer.Key, err))
	}
	if err := store.CheckServerTime(attrs.ServerTime, store.OpGet, pointer.Key, "grace, pin and orphan ages"); err != nil {
		return nil, refuse(err)
	}
	if err := r.fenced(ptr); err != nil {
		return nil, err
	}
	p := &plan{ptr: ptr, etag: attrs.ETag, now: attrs.ServerTime.UTC(), horizon: ptr.GCHorizon,
		committedAt: ptr.CommittedAtServer(attrs.LastModified)}
	p.cutoff = p.now.Add(-allowance(r.o.OrphanAge))

	if r.gens == nil {
		if r.gens, err = r.list(ctx); err != nil {
			return nil, refuse(err)
		}
		if r.gens.stray > 0 {
			p.notes = append(p.notes, fmt.Sprintf("%d keys under %s belong to no valid generation id and were left alone", r.gens.stray, generation.Dir))
		}
		if err := r.prefetch(ctx); err != nil {
			return nil, err
		}
		if r.jobs, err = r.listJobs(ctx); err != nil {
			return nil, refuse(err)
		}
	}
	p.oldJobs = r.jobs.olderThan(p.cutoff)
	chain, err := r.walk(ctx, ptr, p)
	if err != nil {
		return nil, refuse(err)
	}
	p.reusedPins = r.pins != nil
	pinned, err := r.listPins(ctx, p)
	if err != nil {
		return nil, refuse(err)
	}

	// Retention.
	type keptGen struct {
		reason string
		m      *generation.Manifest // nil if the manifest is gone
	}
	retained := map[string]keptGen{}
	inChain := map[string]*generation.Manifest{}
	supersededAt := map[string]time.Time{}
	for i, mi := range chain {
		gen := mi.m.Generation
		inChain[gen] = mi.m
		// When was chain[i] superseded, that is, when did chain[i-1]
		// commit? In the store's clock, and never earlier than it was (an
		// error that way could collect inside the grace): for the current
		// generation's parent, the pointer's Last-Modified; deeper, the
		// Last-Modified of the pointer naming chain[i-1] as chain[i-2]'s
		// writer read it, or failing that its staging start, which comes
		// after that read.
		switch {
		case i == 1:
			supersededAt[gen] = ptr.CommittedAtServer(attrs.LastModified)
		case i >= 2:
			supersededAt[gen] = cmp.Or(chain[i-2].m.BaseCommittedAt, chain[i-2].m.StagingStart)
		}
		var reason string
		switch {
		case i == 0:
			reason = "current"
		case i <= r.o.Keep:
			reason = fmt.Sprintf("ancestor %d of the %d kept", i, r.o.Keep)
		case r.o.Grace > 0 && p.now.Sub(supersededAt[gen]) < allowance(r.o.Grace):
			reason = fmt.Sprintf("superseded %s ago, within the %s grace", fmtAge(p.now.Sub(supersededAt[gen])), r.o.Grace)
		case pinned[gen] > 0:
			reason = r.holdReason(gen, pinned[gen])
		default:
			continue
		}
		retained[gen] = keptGen{reason, mi.m}
		if p.floor == 0 || p.floor == mi.m.Seq+1 {
			p.floor = mi.m.Seq // still contiguous from the current generation
		}
	}
	for _, gen := range slices.Sorted(maps.Keys(pinned)) {
		if _, ok := retained[gen]; ok {
			continue
		}
		// A pinned generation outside the walked chain: an old one beyond
		// a collected link. Its manifest names the keys to keep.
		kg := keptGen{reason: r.holdReason(gen, pinned[gen])}
		mi, err := r.manifest(ctx, gen, "", "its pin")
		switch {
		case errors.Is(err, store.ErrNotExist):
			p.notes = append(p.notes, fmt.Sprintf("generation %s is %s but its manifest is gone", gen, r.holdReason(gen, pinned[gen])))
		case err != nil:
			return nil, refuse(err)
		default:
			kg.m = mi.m
		}
		retained[gen] = kg
	}

	// Mark.
	marked := map[string]bool{}
	for _, kg := range retained {
		if kg.m != nil {
			for _, k := range kg.m.Keys() {
				marked[k] = true
			}
		}
	}

	// Sweep candidates.
	seqOf := func(gen string) uint64 {
		if kg := retained[gen]; kg.m != nil {
			return kg.m.Seq
		}
		if m := inChain[gen]; m != nil {
			return m.Seq
		}
		return 0
	}
	for gen, kg := range retained {
		g := r.gens.gens[gen]
		info := GenInfo{Generation: gen, Seq: seqOf(gen), Reason: kg.reason}
		if g != nil {
			info.Objects, info.Bytes = len(g.objs), g.bytes
		}
		p.kept = append(p.kept, info)
	}
	var chainCands, orphanCands []*victim
	for gen, g := range r.gens.gens {
		if _, ok := retained[gen]; ok {
			continue
		}
		m, isChain := inChain[gen]
		if !isChain && g.newest.After(p.cutoff) {
			p.kept = append(p.kept, GenInfo{
				Generation: gen, Objects: len(g.objs), Bytes: g.bytes,
				Reason: fmt.Sprintf("not committed; newest object %s old, younger than the %s orphan age", fmtAge(p.now.Sub(g.newest)), r.o.OrphanAge),
			})
			continue
		}
		c := &victim{info: GenInfo{Generation: gen}, chain: isChain}
		shared := 0
		for _, o := range g.objs {
			switch {
			case marked[o.Key]:
				shared++
			case isManifest(o.Key):
				// The manifest goes last, so that a crash leaves it to be
				// found.
				c.manifest = &o
			default:
				c.data = append(c.data, o)
			}
		}
		c.count()
		var why string
		if shared > 0 {
			why = fmt.Sprintf("; %d objects shared with retained generations kept", shared)
		}
		switch {
		case isChain:
			c.info.Seq = m.Seq
			c.info.Reason = fmt.Sprintf("superseded %s ago, outside the retention window", fmtAge(p.now.Sub(supersededAt[gen]))) + why
			chainCands = append(chainCands, c)
		case c.objects() == 0:
			p.kept = append(p.kept, GenInfo{
				Generation: gen, Objects: len(g.objs), Bytes: g.bytes,
				Reason: "collected; only objects shared with retained generations remain",
			})
		default:
			c.info.Reason = fmt.Sprintf("not in the chain; newest object %s old", fmtAge(p.now.Sub(g.newest))) + why
			orphanCands = append(orphanCands, c)
		}
	}
	// Oldest chain generations first: a crash then leaves the chain
	// walkable from the pointer down to the first half-deleted generation.
	slices.SortFunc(chainCands, func(a, b *victim) int { return cmp.Compare(a.info.Seq, b.info.Seq) })
	slices.SortFunc(orphanCands, func(a, b *victim) int { return strings.Compare(a.info.Generation, b.info.Generation) })
	p.victims = slices.Concat(chainCands, orphanCands)
	sortKept(p.kept)
	p.decideHorizon()
	return p, nil
}

// walk reads the manifests from the pointer down the parent chain, newest
// first, verifying every link. It stops at the first generation or at the
// first manifest that is gone, collected by an earlier run.
func (r *runner) walk(ctx context.Context, ptr *pointer.Pointer, p *plan) ([]*manifestInfo, error) {
	cur, err := r.checkPointer(ctx, ptr)
	if err != nil {
		return nil, err
	}
	chain := []*manifestInfo{cur}
	for child := cur.m; child.Parent != ""; {
		if err := r.refresh(ctx, "reading the history"); err != nil {
			return nil, err
		}
		mi, err := r.manifest(ctx, child.Parent, child.ParentManifestSHA256, "its child "+child.Generation)
		if errors.Is(err, store.ErrNotExist) {
			if len(chain) <= r.o.Keep {
				p.notes = append(p.notes, fmt.Sprintf("history ends after %d generations, inside the %d kept: generation %s (seq %d) was collected earlier",
					len(chain), r.o.Keep+1, child.Parent, child.Seq-1))
			}
			break
		}
		if err != nil {
			return nil, err
		}
		if mi.m.Seq+1 != child.Seq {
			return nil, fmt.Errorf("%w: generation %s has seq %d, its child %s has seq %d",
				generation.ErrCorrupt, mi.m.Generation, mi.m.Seq, child.Generation, child.Seq)
		}
		chain = append(chain, mi)
		child = mi.m
	}
	return chain, nil
}

// checkPointer checks ptr against the manifest it names and returns that
// manifest: the stored bytes must have the sha256 the pointer records, and
// the manifest the pointer's seq and parent. The collector writes nothing,
// its lease included, until the pointer passes (see run), so that a
// corrupt one is left as it was found. Its errors name the pointer's key.
func (r *runner) checkPointer(ctx context.Context, ptr *pointer.Pointer) (*manifestInfo, error) {
	key := generation.ManifestKey(ptr.Generation)
	cur, err := r.manifest(ctx, ptr.Generation, ptr.ManifestSHA256, "the pointer")
	if errors.Is(err, store.ErrNotExist) {
		return nil, fmt.Errorf("pointer %q: seq %d names generation %s, whose manifest is missing: %w", pointer.Key, ptr.Seq, ptr.Generation, err)
	}
	if err != nil {
		return nil, fmt.Errorf("pointer %q: %w", pointer.Key, err)
	}
	// The manifest is the one whose sha256 the pointer records, so where
	// they disagree it is the pointer that is corrupt.
	if cur.m.Seq != ptr.Seq || cur.m.Parent != ptr.Parent {
		var what []string
		if cur.m.Seq != ptr.Seq {
			what = append(what, fmt.Sprintf("seq %d does not match manifest %q (seq %d)", ptr.Seq, key, cur.m.Seq))
		}
		if cur.m.Parent != ptr.Parent {
			what = append(what, fmt.Sprintf("parent %s does not match manifest %q (parent %s)", orNone(ptr.Parent), key, orNone(cur.m.Parent)))
		}
		return nil, fmt.Errorf("pointer %q: %w: %s", pointer.Key, pointer.ErrCorrupt, strings.Join(what, "; "))
	}
	return cur, nil
}

// orNone names an empty parent.
func orNone(gen string) string { return cmp.Or(gen, "none") }

// manifest reads and validates the manifest of gen, once per run. If
// wantSHA is not empty the stored bytes must match it; who names where
// that checksum was recorded. A missing manifest matches store.ErrNotExist.
func (r *runner) manifest(ctx context.Context, gen, wantSHA, who string) (*manifestInfo, error) {
	key := generation.ManifestKey(gen)
	mi, ok := r.manifests[gen]
	if !ok {
		b, attrs, err := r.readRetrying(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("read manifest of generation %s: %w", gen, err)
		}
		sum := sha256.Sum256(b)
		if wantSHA != "" && hex.EncodeToString(sum[:]) != wantSHA {
			// Checked before decoding: bytes that are not what was
			// recorded are corrupt whatever they decode to.
			return nil, fmt.Errorf("%w: manifest %q does not match the sha256 recorded by %s", generation.ErrCorrupt, key, who)
		}
		if mi, err = decodeManifest(gen, b, attrs); err != nil {
			return nil, err
		}
		r.manifests[gen] = mi
	}
	if wantSHA != "" && mi.sha != wantSHA {
		return nil, fmt.Errorf("%w: manifest %q does not match the sha256 recorded by %s", generation.ErrCorrupt, key, who)
	}
	return mi, nil
}

// decodeManifest decodes and checks the stored manifest b of gen.
func decodeManifest(gen string, b []byte, attrs store.Attrs) (*manifestInfo, error) {
	key := generation.ManifestKey(gen)
	m, err := generation.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("manifest %q: %w", key, err)
	}
	if m.Generation != gen {
		return nil, fmt.Errorf("%w: manifest %q describes generation %s", generation.ErrCorrupt, key, m.Generation)
	}
	sum := sha256.Sum256(b)
	return &manifestInfo{m: m, sha: hex.EncodeToString(sum[:]), modified: attrs.LastModified}, nil
}

// prefetchParallel is how many manifests prefetch reads at once.
const prefetchParallel = 16

// prefetch reads the manifests that the listing of _gen/ shows, several at
// once, newest generation first, into the cache. The chain walk must go
// one link at a time, each parent named by its child; with the manifests
// cached, a deep backlog costs one round trip per prefetchParallel
// manifests instead of one per manifest. What fails to read or decode is
// left out: the walk reads it again, and reports it, if it needs it.
func (r *runner) prefetch(ctx context.Context) error {
	var gens []string
	for gen, g := range r.gens.gens {
		if _, cached := r.manifests[gen]; !cached && slices.ContainsFunc(g.objs, func(o store.Object) bool { return isManifest(o.Key) }) {
			gens = append(gens, gen)
		}
	}
	slices.SortFunc(gens, func(a, b string) int { return strings.Compare(b, a) }) // UUIDv7: newest first
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(prefetchParallel)
	for _, gen := range gens {
		if err := r.refresh(ctx, "reading manifests"); err != nil {
			_ = g.Wait() // the reads' errors matter no more: the refresh's is returned
			return err
		}
		g.Go(func() error {
			b, attrs, err := r.readRetrying(gctx, generation.ManifestKey(gen))
			if err != nil {
				return nil
			}
			if mi, err := decodeManifest(gen, b, attrs); err == nil {
				mu.Lock()
				r.manifests[gen] = mi
				mu.Unlock()
			}
			return nil
		})
	}
	return g.Wait()
}

// listPins lists _pin/, returning the number of unexpired pins and tags
// per generation and recording the expired pins in the plan. A pin expires
// when its age in the store's clock reaches its TTL; a tag holds its
// generation until it is deleted or moved. Tags are read with the pins
// (one LIST of _tag/ and one GET per tag).
//
// The listing is read once per run, and again after newPinOnCandidate
// drops it: a plan made again because a commit beat the horizon CAS reuses
// it, which keeps that plan's window short. Pins written since are caught
// after the CAS, when newPinOnCandidate lists again. A reused listing is
// judged at the time of the plan that read it, never later: a pin renewed
// since then must not look expired, and a pin expired by then can no
// longer be renewed (commit.Pin.Renew refuses).
func (r *runner) listPins(ctx context.Context, p *plan) (map[string]int, error) {
	if r.pins == nil {
		r.pinsAt = p.now
		r.pins = []store.Object{}
		for o, err := range store.List(ctx, r.s, commit.PinDir, "", "") {
			if err != nil {
				r.pins = nil
				return nil, fmt.Errorf("list pins: %w", err)
			}
			r.pins = append(r.pins, o)
		}
		tagged, err := commit.TaggedGenerations(ctx, r.s)
		if err != nil {
			r.pins = nil
			return nil, err
		}
		r.tagged = tagged
	}
	pinned := maps.Clone(r.tagged)
	if pinned == nil {
		pinned = map[string]int{}
	}
	bad := 0
	for _, o := range r.pins {
		gen, ttl, err := commit.ParsePinKey(o.Key)
		if err != nil {
			bad++
			r.log.Warn("gc: leaving a malformed pin alone", "key", o.Key)
			continue
		}
		if r.pinsAt.Sub(o.LastModified) >= allowance(ttl) {
			p.expiredPins = append(p.expiredPins, o.Key)
			continue
		}
		pinned[gen]++
	}
	if bad > 0 {
		p.notes = append(p.notes, fmt.Sprintf("%s under %s left alone", plural(bad, "malformed key"), commit.PinDir))
	}
	return pinned, nil
}

// list reads the listing of _gen/.
func (r *runner) list(ctx context.Context) (*listing, error) {
	l := &listing{gens: map[string]*genObjects{}}
	for o, err := range store.List(ctx, r.s, generation.Dir, "", "") {
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", generation.Dir, err)
		}
		if err := r.refresh(ctx, "listing "+generation.Dir); err != nil {
			return nil, err
		}
		gen := generation.FromKey(o.Key)
		if gen == "" {
			l.stray++
			continue
		}
		g := l.gens[gen]
		if g == nil {
			g = &genObjects{}
			l.gens[gen] = g
		}
		g.objs = append(g.objs, o)
		g.bytes += max(o.Size, 0)
		if o.LastModified.After(g.newest) {
			g.newest = o.LastModified
		}
	}
	return l, nil
}

// isManifest reports whether key is a generation's manifest (a data file
// may be named _manifest in a subdirectory; that is not one).
func isManifest(key string) bool { return key == generation.ManifestKey(generation.FromKey(key)) }

// sortKept orders the kept generations newest first.
func sortKept(kept []GenInfo) {
	slices.SortFunc(kept, func(a, b GenInfo) int {
		return cmp.Or(-cmp.Compare(a.Seq, b.Seq), strings.Compare(a.Generation, b.Generation))
	})
}

// holdReason says what holds a generation that n pins and tags keep:
// "tagged", "pinned", "tagged and pinned", with the counts when more than
// one.
func (r *runner) holdReason(gen string, n int) string {
	tags := r.tagged[gen]
	pins := n - tags
	var parts []string
	switch {
	case tags == 1:
		parts = append(parts, "tagged")
	case tags > 1:
		parts = append(parts, fmt.Sprintf("tagged (%d tags)", tags))
	}
	switch {
	case pins == 1:
		parts = append(parts, "pinned")
	case pins > 1:
		parts = append(parts, fmt.Sprintf("pinned (%d pins)", pins))
	}
	return strings.Join(parts, " and ")
}

// fmtAge rounds an age for people.
func fmtAge(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// readRetrying reads a whole object, retrying up to three more times on
// failures that a retry may cure: one lost response must not make a whole
// collection refuse. A missing object is returned at once.
func (r *runner) readRetrying(ctx context.Context, key string) ([]byte, store.Attrs, error) {
	var err error
	for attempt := range 4 {
		if attempt > 0 {
			if serr := ctxtime.Sleep(ctx, time.Duration(attempt)*100*time.Millisecond); serr != nil {
				return nil, store.Attrs{}, err
			}
		}
		var rc io.ReadCloser
		var attrs store.Attrs
		rc, attrs, err = r.s.Get(ctx, key)
		if errors.Is(err, store.ErrNotExist) || errors.Is(err, store.ErrAccess) {
			return nil, store.Attrs{}, err
		}
		if err != nil {
			continue
		}
		var b []byte
		b, err = io.ReadAll(io.LimitReader(rc, generation.MaxStored+1))
		rc.Close()
		if err == nil {
			return b, attrs, nil
		}
		err = fmt.Errorf("read %q: %w", key, err)
	}
	return nil, store.Attrs{}, err
}
