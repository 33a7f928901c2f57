package gc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

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
// collector that lost its lease changes nothing (I6). A dataset without a
// pointer has nothing to register; a pointer that registers a higher
// token stops the run (fenced). A commit that lands between the read and
// the CAS makes it read and try again, at most maxPlans times.
func (r *runner) register(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		ptr, attrs, err := pointer.Read(ctx, r.s)
		if errors.Is(err, store.ErrNotExist) {
			return nil
		}
		if err != nil {
			return refuse(fmt.Errorf("read %s: %w", pointer.Key, err))
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
		return true, nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBackTimeout)
	defer cancel()
	got, _, rerr := pointer.Read(rctx, r.s)
	switch {
	case rerr != nil:
		return false, fmt.Errorf("gc: %s: %w (and reading %s back failed: %v)", what, werr, pointer.Key, rerr)
	case got.WriteID == next.WriteID:
		r.log.Info("gc: pointer write settled by reading it back", "what", what, "resolved", werr)
		return true, nil
	case got.WriteID != cur.WriteID,
		errors.Is(werr, store.ErrPrecondition), errors.Is(werr, store.ErrConflict):
		return false, nil
	}
	return false, fmt.Errorf("gc: %s: %w", what, werr)
}

// sweep deletes the plan's keys in batches, renewing the lease before each.
func (r *runner) sweep(ctx context.Context, p *plan) error {
	total := len(p.del)
	for start, n := 0, 1; start < total; start, n = start+store.MaxDeleteBatch, n+1 {
		batch := p.del[start:min(start+store.MaxDeleteBatch, total)]
		if err := r.renew(ctx, fmt.Sprintf("delete batch %d", n)); err != nil {
			return err
		}
		keys := make([]string, len(batch))
		var bytes int64
		for i, o := range batch {
			keys[i] = o.Key
			bytes += max(o.Size, 0)
		}
		freed, versions, err := r.deleteKeys(ctx, keys, bytes)
		r.rep.Versions.Add(versions)
		if err != nil {
			return fmt.Errorf("gc: delete batch %d (%d keys from %q): %w", n, len(keys), keys[0], err)
		}
		r.rep.ObjectsDeleted += len(batch)
		r.rep.BytesDeleted += freed
		r.log.Debug("gc: deleted batch", "batch", n, "keys", len(keys), "deleted", r.rep.ObjectsDeleted, "total", total)
		if r.o.Progress != nil {
			r.o.Progress(r.rep.ObjectsDeleted, total)
		}
	}
	if total > 0 {
		r.log.Info("gc: collected", "generations", len(p.deleted), "orphans", len(p.orphans), "objects", r.rep.ObjectsDeleted, "bytes", r.rep.BytesDeleted)
	}
	return nil
}

// dropPins deletes expired pins.
func (r *runner) dropPins(ctx context.Context, keys []string) error {
	for start, n := 0, 1; start < len(keys); start, n = start+store.MaxDeleteBatch, n+1 {
		batch := keys[start:min(start+store.MaxDeleteBatch, len(keys))]
		if err := r.renew(ctx, "dropping expired pins"); err != nil {
			return err
		}
		if err := r.s.DeleteMany(ctx, batch); err != nil {
			return fmt.Errorf("gc: drop expired pins: %w", err)
		}
		r.rep.PinsDropped += len(batch)
	}
	return nil
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
var leftoverPrefixes = []string{generation.Dir, commit.PinDir, commit.TagDir, leaseDir, pointer.Key}

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
	rep.Kept, rep.Deleted, rep.Orphans = p.kept, p.deleted, p.orphans
	rep.Horizon = p.horizon
	rep.Planned = len(p.del)
	rep.Notes = append(rep.Notes, p.notes...)
	if p.ptr != nil {
		rep.Seq, rep.Generation = p.ptr.Seq, p.ptr.Generation
	}
	if rep.DryRun {
		rep.ObjectsDeleted = len(p.del)
		for _, o := range p.del {
			rep.BytesDeleted += max(o.Size, 0)
		}
		rep.PinsDropped = len(p.expiredPins)
	}
}
