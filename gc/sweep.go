package gc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// leaseDir is the key prefix of leases; epoch locks live below
// _lease/<name>/.
const leaseDir = lease.Dir

// MinEpochAge is the least age of a lease epoch the collector removes. A
// deleted epoch key can be created again by a client that stalled for
// longer than this, so it is long (see lease.CleanupEpochs).
const MinEpochAge = time.Hour

// readBackTimeout bounds the pointer read that settles an ambiguous pointer
// write; it runs even when the caller's context is done.
const readBackTimeout = 30 * time.Second

// publishHorizon moves the pointer's gc_horizon to the plan's cutoff and
// its gc_floor to the plan's floor, with a compare-and-swap against the
// pointer the plan was made from. It returns false, and no error, when the
// pointer changed meanwhile: the caller plans again, because a generation
// the plan took for an orphan may have been committed, or a newer
// collector may have registered (see fenced). The run registered its
// lease token before planning (see register); the CAS carries it.
func (r *runner) publishHorizon(ctx context.Context, p *plan) (bool, error) {
	next := *p.ptr
	next.GCHorizon = p.horizon
	next.GCFloor = max(p.ptr.GCFloor, p.floor)
	next.GCToken = r.lease.Token() // not lower than p.ptr.GCToken: see fenced
	next.GCCommittedAt = p.committedAt
	ok, err := r.casPointer(ctx, p.ptr, p.etag, &next, "publish horizon")
	if ok {
		r.log.Info("gc: published horizon", "horizon", p.cutoff, "seq", p.ptr.Seq)
	}
	return ok, err
}

// register writes the lease's token into the pointer as gc_token, with a
// compare-and-swap, before the run plans. The registration changes the
// pointer's ETag, so every pointer write that a former holder still has
// in flight fails its If-Match, whatever this run goes on to do: a
// collector that lost its lease changes nothing (I6). ptr and attrs are
// the pointer as run read and checked it before it took the lease; the
// If-Match makes the CAS fail if it changed since. A nil ptr is read
// again, as is the pointer after every lost CAS, and each is checked
// against its manifest (readChecked) before it is rewritten. A dataset
// without a pointer has nothing to register; a pointer that registers a
// higher token stops the run (fenced). A commit that lands between the
// read and the CAS makes it read and try again, at most maxPlans times.
func (r *runner) register(ctx context.Context, ptr *pointer.Pointer, attrs store.Attrs) error {
	for attempt := 1; ; attempt++ {
		if ptr == nil || attempt > 1 {
			var err error
			if ptr, attrs, err = r.readChecked(ctx); err != nil {
				return err
			}
			if ptr == nil {
				return nil
			}
		}
		if err := r.fenced(ptr); err != nil {
			return err
		}
		if ptr.GCToken == r.lease.Token() {
			return nil
		}
		next := *ptr
		next.GCToken = r.lease.Token()
		next.GCCommittedAt = ptr.CommittedAtServer(attrs.LastModified)
		ok, err := r.casPointer(ctx, ptr, attrs.ETag, &next, "register lease token")
		if err != nil || ok {
			return err
		}
		if attempt == maxPlans {
			return fmt.Errorf("%w: the pointer changed under every one of %d registrations of lease %q token %d", ErrBusy, attempt, LeaseName, r.lease.Token())
		}
		r.log.Debug("gc: the pointer changed before the lease token was registered; trying again", "attempt", attempt)
		if err := ctxtime.Sleep(ctx, rand.N(time.Duration(attempt)*50*time.Millisecond)); err != nil {
			return err
		}
	}
}

// casPointer writes next over cur if the pointer's ETag is still etag. It
// returns false, and no error, when the pointer changed meanwhile. A write
// that reported an error may have landed all the same (a lost response):
// the pointer is read back and the write settled by its write id.
func (r *runner) casPointer(ctx context.Context, cur *pointer.Pointer, etag string, next *pointer.Pointer, what string) (bool, error) {
	_, werr := pointer.Write(ctx, r.s, next, etag)
	if werr == nil {
		r.current = next.WriteID
		return true, nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBackTimeout)
	defer cancel()
	got, _, rerr := r.readPointer(rctx)
	switch {
	case rerr != nil:
		return false, fmt.Errorf("gc: %s: %w (and reading %s back failed: %v)", what, werr, pointer.Key, rerr)
	case got.WriteID == next.WriteID:
		r.log.Info("gc: pointer write settled by reading it back", "what", what, "resolved", werr)
		r.current = next.WriteID
		return true, nil
	case got.WriteID != cur.WriteID,
		errors.Is(werr, store.ErrPrecondition), errors.Is(werr, store.ErrConflict):
		return false, nil
	}
	return false, fmt.Errorf("gc: %s: %w", what, werr)
}

// publish publishes the plan's horizon and floor (publishHorizon),
// renewing the lease first. When a pointer write beats the CAS, the plan
// is corrected by what was committed meanwhile (correct) and the CAS sent
// again at once, against the pointer that correct read: the horizon and
// floor commute with commits, so nothing needs planning again, and the
// window a commit must hit is one round trip. It returns false when the
// run must plan again: after maxCorrections lost CASes, or when the
// pointer no longer leads back to the plan's.
func (r *runner) publish(ctx context.Context, p *plan) (bool, error) {
	if err := r.renew(ctx, "publishing the horizon"); err != nil {
		return false, err
	}
	for corrections := 0; ; corrections++ {
		ok, err := r.publishHorizon(ctx, p)
		if err != nil || ok {
			return ok, err
		}
		if corrections == maxCorrections {
			return false, nil
		}
		// Renewing is not needed for safety here (the CAS is fenced by
		// the registration, see fenced), only to keep the lease; it is
		// done before the pointer read, outside the window.
		if err := r.refresh(ctx, "publishing the horizon"); err != nil {
			return false, err
		}
		r.log.Debug("gc: the pointer changed before the horizon was published; correcting the plan", "correction", corrections+1)
		if ok, err := r.correct(ctx, p); err != nil || !ok {
			return false, err
		}
		if !p.needHorizon {
			return true, nil // the pointer read has the horizon and floor already
		}
	}
}

// limit keeps the plan's deletions within max objects (none when max is
// not positive), collecting the oldest garbage first: whole generations
// in the plan's order while they fit, then data objects of the next one,
// without its manifest. The chain then stays walkable from the pointer to
// every generation left, and the next run finds them as this one did.
func (p *plan) limit(max int) {
	if max <= 0 {
		return
	}
	for i, v := range p.victims {
		n := v.objects()
		if n <= max {
			max -= n
			continue
		}
		keep := i
		p.left = n
		if max > 0 {
			// Part of v's data, never its manifest (n > max, so v has at
			// least max data objects).
			v.data, v.manifest = v.data[:max], nil
			v.count()
			p.left, keep = n-max, i+1
		}
		for _, w := range p.victims[i+1:] {
			p.left += w.objects()
		}
		p.victims = p.victims[:keep]
		return
	}
}

// deleteParallel is how many delete requests for data objects are in
// flight at once.
const deleteParallel = 8

// readChecked reads the pointer and checks it against its manifest
// (checkPointer). A missing pointer is returned as nil, with no error;
// a pointer that does not read, or does not pass, stops the run
// (ErrRefused) with an error that names its key.
func (r *runner) readChecked(ctx context.Context) (*pointer.Pointer, store.Attrs, error) {
	ptr, attrs, err := r.readPointer(ctx)
	if errors.Is(err, store.ErrNotExist) {
		return nil, store.Attrs{}, nil
	}
	if err != nil {
		return nil, store.Attrs{}, refuse(fmt.Errorf("pointer %q: %w", pointer.Key, err))
	}
	if _, err := r.checkPointer(ctx, ptr); err != nil {
		return nil, store.Attrs{}, refuse(err)
	}
	return ptr, attrs, nil
}

// readPointer reads the pointer, trying up to four times on failures a
// retry may cure: one lost response must not fail a run, nor leave a
// pointer write unknown that a second read settles.
func (r *runner) readPointer(ctx context.Context) (*pointer.Pointer, store.Attrs, error) {
	var err error
	for attempt := range 4 {
		if attempt > 0 {
			if serr := ctxtime.Sleep(ctx, time.Duration(attempt)*100*time.Millisecond); serr != nil {
				return nil, store.Attrs{}, err
			}
		}
		var got *pointer.Pointer
		var attrs store.Attrs
		got, attrs, err = pointer.Read(ctx, r.s)
		if err == nil {
			r.current = got.WriteID
		}
		if err == nil || errors.Is(err, store.ErrNotExist) || errors.Is(err, store.ErrAccess) || errors.Is(err, pointer.ErrCorrupt) {
			return got, attrs, err
		}
	}
	return nil, store.Attrs{}, err
}

// sweep deletes the plan's objects in two waves of DeleteMany requests of
// up to store.MaxDeleteBatch keys, deleteParallel requests at a time,
// renewing the lease before each request. First the data objects of every
// generation: no order among them matters, since the manifests that name
// them are all still there, so a run that stops at any point leaves every
// generation findable as before. Then, once every data request has
// succeeded, the manifests, oldest chain generation first, then the
// orphans'. Requests start in that order, so a run stopped by its budget
// leaves the chain walkable from the pointer to whatever is left; one
// stopped by a failed request or a crash may leave a gap among the
// manifests, which only delays the generations beyond it, whose data are
// gone already, until the orphan age (see the package documentation,
// "Order of deletes").
func (r *runner) sweep(ctx context.Context, p *plan) error {
	var data, manifests []store.Object
	for _, v := range p.victims {
		data = append(data, v.data...)
		if v.manifest != nil {
			manifests = append(manifests, *v.manifest)
		}
	}
	w := &waves{r: r, total: len(data) + len(manifests)}
	if r.o.Budget > 0 {
		w.deadline = r.start.Add(r.o.Budget)
	}
	err := w.run(ctx, data, deleteParallel)
	if err == nil && !w.stopped {
		err = w.run(ctx, manifests, deleteParallel)
	}
	r.rep.Left = p.left + w.total - r.rep.ObjectsDeleted
	if err != nil {
		return err
	}
	if w.stopped {
		r.log.Info("gc: the time budget is spent; the next run continues", "budget", r.o.Budget, "left", r.rep.Left)
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the %s budget was spent: %d objects are left for the next run", r.o.Budget, r.rep.Left))
	}
	if w.total > 0 {
		r.log.Info("gc: collected", "generations", len(p.victims), "objects", r.rep.ObjectsDeleted, "bytes", r.rep.BytesDeleted)
	}
	return nil
}

// waves sends the delete requests of a sweep.
type waves struct {
	r        *runner
	total    int
	deadline time.Time // of Options.Budget; zero for none

	mu      sync.Mutex
	n       int  // delete requests started
	stopped bool // the budget is spent
	failed  bool // a request failed: start no more
}

// run deletes objs in batches, at most par requests at once. It returns
// once every request it started has finished, with the first error.
func (w *waves) run(ctx context.Context, objs []store.Object, par int) error {
	var g errgroup.Group
	g.SetLimit(par)
	for start := 0; start < len(objs); start += store.MaxDeleteBatch {
		batch := objs[start:min(start+store.MaxDeleteBatch, len(objs))]
		if !w.next() {
			break
		}
		g.Go(func() error { return w.send(ctx, batch) })
	}
	return g.Wait()
}

// next reports whether another request may start.
func (w *waves) next() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.deadline.IsZero() && !time.Now().Before(w.deadline) {
		w.stopped = true
	}
	return !w.stopped && !w.failed
}

// send renews the lease and deletes one batch.
func (w *waves) send(ctx context.Context, batch []store.Object) error {
	w.mu.Lock()
	if w.failed || w.stopped {
		w.mu.Unlock()
		return nil
	}
	w.n++
	n := w.n
	w.mu.Unlock()
	err := w.r.renew(ctx, fmt.Sprintf("delete batch %d", n))
	if err == nil && !w.next() {
		return nil
	}
	keys := make([]string, len(batch))
	var bytes int64
	for i, o := range batch {
		keys[i] = o.Key
		bytes += max(o.Size, 0)
	}
	var freed int64
	var versions store.Freed
	if err == nil {
		if freed, versions, err = w.r.deleteKeys(ctx, keys, bytes); err != nil {
			err = fmt.Errorf("gc: delete batch %d (%d keys from %q): %w", n, len(keys), keys[0], err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.r
	r.rep.Versions.Add(versions) // what was deleted, also when the request failed
	if err != nil {
		w.failed = true
		return err
	}
	r.rep.ObjectsDeleted += len(batch)
	r.rep.BytesDeleted += freed
	r.log.Debug("gc: deleted batch", "batch", n, "keys", len(keys), "deleted", r.rep.ObjectsDeleted, "total", w.total)
	if r.o.Progress != nil {
		r.o.Progress(r.rep.ObjectsDeleted, w.total)
	}
	return nil
}

// dropPins deletes expired pins.
func (r *runner) dropPins(ctx context.Context, keys []string) error {
	return r.drop(ctx, keys, "expired pins", &r.rep.PinsDropped)
}

// drop deletes keys in batches, renewing the lease before each, and
// counts them in n.
func (r *runner) drop(ctx context.Context, keys []string, what string, n *int) error {
	for start := 0; start < len(keys); start += store.MaxDeleteBatch {
		batch := keys[start:min(start+store.MaxDeleteBatch, len(keys))]
		if err := r.renew(ctx, "dropping "+what); err != nil {
			return err
		}
		if err := r.s.DeleteMany(ctx, batch); err != nil {
			return fmt.Errorf("gc: drop %s: %w", what, err)
		}
		*n += len(batch)
	}
	return nil
}

// dropIntents deletes the group-commit intents that no commit can carry
// any more: each is bound to one pointer value, and only those bound to
// the newest value the run saw can still be carried. (One bound to a
// value written since, or bound ahead to a value announced and not yet
// written, is deleted too, as are the markers that close rounds; that
// costs its writer a carry, not a commit: it rounds again.) Its writer needs it no more once the
// value is gone, and a crashed writer leaves its intents behind. It costs
// one LIST page per 1,000 intents, and the deletes.
func (r *runner) dropIntents(ctx context.Context) error {
	if r.current == "" {
		return nil
	}
	live := commit.IntentDir + r.current + "/"
	var dead []string
	for o, err := range store.List(ctx, r.s, commit.IntentDir, "", "") {
		if err != nil {
			return fmt.Errorf("gc: list %s: %w", commit.IntentDir, err)
		}
		if !strings.HasPrefix(o.Key, live) {
			dead = append(dead, o.Key)
		}
	}
	return r.drop(ctx, dead, "dead intents", &r.rep.IntentsDropped)
}

// cleanupEpochs removes the long-ended epochs of every epoch lock
// (_lease/<name>/<epoch>): those last written more than the larger of
// OrphanAge and MinEpochAge ago. lease.CleanupEpochs keeps each lock's
// latest epoch, so that epochs never repeat.
func (r *runner) cleanupEpochs(ctx context.Context) error {
	var names []string
	for o, err := range store.List(ctx, r.s, leaseDir, "/", "") {
		if err != nil {
			return fmt.Errorf("gc: list %s: %w", leaseDir, err)
		}
		if name, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, leaseDir), "/"); ok && lease.CheckName(name) == nil {
			names = append(names, name)
		}
	}
	for _, name := range names {
		if err := r.renew(ctx, "removing old epochs of "+name); err != nil {
			return err
		}
		n, err := lease.CleanupEpochs(ctx, r.s, name, max(r.o.OrphanAge, MinEpochAge))
		r.rep.EpochsDropped += n
		if err != nil {
			return fmt.Errorf("gc: remove old epochs of lease %q: %w", name, err)
		}
	}
	return nil
}

// leftoverPrefixes are where the dataset's own writes go. The sweep stays
// in them: a dataset at the root of a bucket must not abort other tools'
// uploads, nor a dataset those of another nested under its prefix. The
// pointer's own prefix reaches, on fs, the temp files beside it and none
// below (see fs.Store.SweepLeftovers).
var leftoverPrefixes = []string{generation.Dir, commit.PinDir, commit.TagDir, commit.IntentDir, leaseDir, pointer.Key}

// sweepLeftovers asks the driver to remove the pieces of writes that were
// interrupted more than the orphan age ago (temp files, incomplete
// multipart uploads): they are invisible to listings, so no plan ever names
// them (I7).
//
// It needs no lease: what it removes is judged by age alone, and two
// sweeps at once only find each other's removals gone. A store that denies
// it (credentials that may delete objects but not list uploads) gets a
// note in the report; other failures fail the run, after the collection
// itself is done.
func (r *runner) sweepLeftovers(ctx context.Context) error {
	for _, dir := range leftoverPrefixes {
		got, err := store.SweepLeftovers(ctx, r.s, dir, allowance(r.o.OrphanAge))
		r.rep.Leftovers.Count += got.Count
		r.rep.Leftovers.Bytes += got.Bytes
		for op, n := range got.Requests {
			r.rep.Leftovers.Requests[op] += n
		}
		switch {
		case errors.Is(err, errors.ErrUnsupported):
			return nil
		case errors.Is(err, store.ErrAccess):
			r.log.Warn("gc: remove leftovers of interrupted writes", "error", err)
			r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("leftovers of interrupted writes under %s were not removed: %v", dir, err))
		case err != nil:
			return fmt.Errorf("gc: remove leftovers of interrupted writes under %s: %w", dir, err)
		}
	}
	return nil
}

// fill records the plan in the report.
func (p *plan) fill(rep *Report) {
	rep.Kept, rep.Deleted, rep.Orphans = p.kept, nil, nil
	for _, v := range p.victims {
		if v.chain {
			rep.Deleted = append(rep.Deleted, v.info)
		} else {
			rep.Orphans = append(rep.Orphans, v.info)
		}
	}
	rep.Horizon = p.horizon
	rep.Planned = p.objects()
	rep.Left = p.left
	rep.Notes = append(rep.Notes, p.notes...)
	if p.ptr != nil {
		rep.Seq, rep.Generation = p.ptr.Seq, p.ptr.Generation
	}
	if rep.DryRun {
		rep.ObjectsDeleted = rep.Planned
		for _, v := range p.victims {
			rep.BytesDeleted += v.info.Bytes
		}
		rep.PinsDropped = len(p.expiredPins)
	}
}
