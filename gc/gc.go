package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// LeaseName is the name of the collector's lease, at _lease/gc.
const LeaseName = "gc"

// The defaults of Options.
const (
	DefaultKeep      = 2
	DefaultGrace     = time.Hour
	DefaultOrphanAge = 24 * time.Hour
	DefaultLeaseTTL  = 30 * time.Second
)

// clockResolution is added to every positive age limit. S3 reports
// Last-Modified and Date at one-second resolution, so an observed age can
// exceed the true age by up to a second; the collector errs on the side of
// keeping.
const clockResolution = time.Second

// allowance returns the age an object must reach, by the store's clock, to
// count as older than limit: limit plus the clock resolution, or 0 for no
// limit.
func allowance(limit time.Duration) time.Duration {
	if limit <= 0 {
		return 0
	}
	return limit + clockResolution
}

// maxPlans bounds how often a run re-plans because a commit landed between
// reading the pointer and publishing the horizon.
const maxPlans = 8

// releaseTimeout bounds the lease release at the end of a run, which runs
// even when the caller's context is done.
const releaseTimeout = 10 * time.Second

// ErrRefused is matched by the error of a run that refused to collect
// because the pointer or a manifest it needs is unreadable or corrupt. The
// error also matches its cause, e.g. pointer.ErrCorrupt or
// generation.ErrCorrupt. Nothing was deleted; when it is the pointer that
// does not decode or does not match the manifest it names, nothing at all
// was written.
var ErrRefused = errors.New("gc: refusing to collect")

// ErrBusy is matched by the error of a run that could not register its
// lease token or publish its horizon because commits kept landing between
// its reading of the pointer and its compare-and-swap, maxPlans times in a
// row. Nothing was deleted;
// run again later.
var ErrBusy = errors.New("gc: the dataset is too busy to collect now; try again later")

// Options configure a collection. The zero value collects with the
// defaults.
type Options struct {
	// Keep is how many ancestors of the current generation are kept
	// besides it. 0 means DefaultKeep; a negative value keeps none.
	Keep int
	// Grace keeps ancestors superseded less than this long ago, judged as
	// the age of their successor's manifest in the store's clock. Readers
	// that opened a snapshot without pinning it can finish within it.
	// 0 means DefaultGrace; a negative value means no grace.
	Grace time.Duration
	// OrphanAge is how old, in the store's clock, the newest object of a
	// generation outside the chain must be before it is collected as an
	// orphan. Writers that take longer than this between reading the
	// pointer and committing are refused with commit.ErrStale once the
	// collector has run. Lease epochs older than it (and than MinEpochAge)
	// are removed too. 0 means DefaultOrphanAge; a negative value means
	// no minimum age.
	OrphanAge time.Duration
	// DryRun plans the collection and returns it in the Report without
	// writing anything: it takes no lease either, so it needs read access
	// only, and may run beside a collection.
	DryRun bool
	// LeaseTTL is the TTL of the lease "gc"; 0 means DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Owner names this collector in the lease; the default is
	// "gc@<hostname>:<pid>".
	Owner string
	// Logger receives progress at debug and info level; nil discards.
	Logger *slog.Logger
	// Progress, if set, is called after every delete request with the
	// number of generation objects deleted so far and the number planned.
	// Calls do not overlap, though delete requests do.
	Progress func(deleted, total int)
	// MaxDelete, if positive, bounds the generation objects one run
	// deletes: it collects the oldest garbage first and leaves the rest
	// (Report.Left) to the next run, in a state that run continues from.
	MaxDelete int
	// Budget, if positive, bounds how long a run sends delete requests:
	// once Budget has passed since Run started, it sends no more and
	// leaves what remains (Report.Left) to the next run. Requests in
	// flight finish, and the run still drops expired pins, old lease
	// epochs and leftovers, so it may end somewhat later.
	Budget time.Duration
}

func (o Options) withDefaults() Options {
	o.Keep = orDefault(o.Keep, DefaultKeep)
	o.Grace = orDefault(o.Grace, DefaultGrace)
	o.OrphanAge = orDefault(o.OrphanAge, DefaultOrphanAge)
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = "gc@" + host + ":" + strconv.Itoa(os.Getpid())
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// orDefault maps 0 to def and negative values to 0.
func orDefault[T int | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// Run performs one collection of the dataset in s, as described in the
// package documentation. It always returns a Report; after an error the
// report describes how far the run got. s should be the dataset's store,
// under its prefix (store.WithPrefix).
func Run(ctx context.Context, s store.Store, opts Options) (*Report, error) {
	counted := store.Count(s)
	r := &runner{
		start:     time.Now(),
		s:         counted,
		o:         opts.withDefaults(),
		rep:       &Report{DryRun: opts.DryRun},
		manifests: map[string]*manifestInfo{},
	}
	r.log = r.o.Logger
	err := r.run(ctx)
	r.rep.Requests = counted.Counts()
	switch {
	case err != nil && ctx.Err() != nil:
		// The caller stopped the run (publish gc --every on SIGTERM): it
		// knows, and an operator needs no warning.
		r.log.Info("gc: collection stopped by the caller", "error", err)
	case err != nil:
		r.log.Warn("gc: collection stopped", "error", err)
	}
	return r.rep, err
}

// runner holds the state of one collection.
type runner struct {
	start time.Time // when Run was called, for Options.Budget
	s     store.Store
	o     Options
	log   *slog.Logger
	rep   *Report
	lease *lease.Lease

	// manifests caches the manifests read so far, by generation. Stored
	// manifests are immutable, so they stay valid across re-plans.
	manifests map[string]*manifestInfo
	// gens is the listing of _gen/, read once per run, and jobs that of
	// _job/.
	gens *listing
	jobs jobListing
	// pins is the listing of _pin/, and pinsAt the store time its pins'
	// expiry is judged at (see listPins).
	pins   []store.Object
	pinsAt time.Time
	// tagged counts the tags per generation, read with pins.
	tagged map[string]int
	// current is the write id of the newest pointer value the run read or
	// wrote, for dropIntents.
	current string
	// renewed is when the lease was last renewed (monotonic), for
	// refresh; the sweep renews from several goroutines.
	renewedMu sync.Mutex
	renewed   time.Time
}

func (r *runner) run(ctx context.Context) (err error) {
	// The pointer is checked against its manifest before the first write,
	// the lease's: a pointer that is corrupt, or that does not match the
	// manifest it names, is left exactly as it was found, for an operator
	// to inspect, and so is everything else.
	ptr, attrs, err := r.readChecked(ctx)
	if err != nil {
		return err
	}
	if r.o.DryRun {
		// A plan needs no lease: it writes nothing, so it has nothing to
		// fence and no collector to exclude.
		return r.collect(ctx)
	}
	l, err := lease.TryAcquire(ctx, r.s, LeaseName, lease.Options{TTL: r.o.LeaseTTL, Owner: r.o.Owner})
	if err != nil {
		if errors.Is(err, lease.ErrHeld) {
			return err
		}
		return fmt.Errorf("gc: acquire lease %q: %w", LeaseName, err)
	}
	r.lease, r.renewed = l, time.Now()
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if rerr := l.Release(rctx); rerr != nil && !errors.Is(rerr, lease.ErrLost) {
			r.log.Warn("gc: release lease", "error", rerr)
		}
	}()

	if err := r.register(ctx, ptr, attrs); err != nil {
		return err
	}
	return r.collect(ctx)
}

// collect plans the collection and, unless it is a dry run, carries it
// out; a run that is not a dry run holds the lease and has registered its
// token.
func (r *runner) collect(ctx context.Context) (err error) {
	var p *plan
	for attempt := 1; ; attempt++ {
		if p, err = r.plan(ctx); err != nil {
			return err
		}
		if p.ptr == nil {
			r.rep.noPointer = true
			// No generation can be collected, but the leftovers of a
			// first writer killed mid-upload are judged by age alone.
			r.rep.Notes = append(r.rep.Notes, "no pointer: the dataset has no commits, so there is nowhere to publish a horizon and no generation is collected")
			if r.o.DryRun {
				return nil
			}
			return r.sweepLeftovers(ctx)
		}
		if attempt > maxPlans {
			return fmt.Errorf("%w: pins kept appearing on what %d plans would delete", ErrBusy, maxPlans)
		}
		if r.o.DryRun || !p.needHorizon {
			// Without a CAS there is no check of the pins after it: a
			// plan that reused an earlier pin listing looks again.
			if !r.o.DryRun && p.reusedPins && len(p.victims) > 0 {
				if newPin, err := r.newPinOnCandidate(ctx, p); err != nil {
					return err
				} else if newPin {
					continue
				}
			}
			break
		}
		ok, err := r.publish(ctx, p)
		if err != nil {
			return err
		}
		if ok {
			// Pins written before the CAS but after the plan listed them
			// must be honoured: plan again (the floor is published now, so
			// the next plan breaks out at once). Pins written after the
			// CAS check the floor themselves (commit.Snapshot.Pin).
			if len(p.victims) > 0 {
				if newPin, err := r.newPinOnCandidate(ctx, p); err != nil {
					return err
				} else if newPin {
					continue
				}
			}
			break
		}
		if attempt == maxPlans {
			return fmt.Errorf("%w: the pointer changed under every one of %d plans", ErrBusy, attempt)
		}
		r.log.Debug("gc: the pointer changed before the horizon was published; planning again", "attempt", attempt)
		if err := ctxtime.Sleep(ctx, rand.N(time.Duration(attempt)*50*time.Millisecond)); err != nil {
			return err
		}
	}
	p.limit(r.o.MaxDelete)
	p.fill(r.rep)
	if r.o.DryRun {
		return nil
	}
	if err := r.sweep(ctx, p); err != nil {
		return err
	}
	if err := r.dropPins(ctx, p.expiredPins); err != nil {
		return err
	}
	if err := r.cleanupEpochs(ctx); err != nil {
		return err
	}
	if err := r.dropIntents(ctx); err != nil {
		return err
	}
	if err := r.dropJobs(ctx, p); err != nil {
		return err
	}
	return r.sweepLeftovers(ctx)
}

// renew renews the lease before an action that writes, and stops the run if
// it is lost.
func (r *runner) renew(ctx context.Context, before string) error {
	if err := r.lease.Renew(ctx); err != nil {
		return fmt.Errorf("gc: renew lease %q: stopped before %s: %w", LeaseName, before, err)
	}
	r.renewedMu.Lock()
	r.renewed = time.Now()
	r.renewedMu.Unlock()
	return nil
}

// fenced stops a collector whose lease token is lower than the one the
// pointer registers: a newer collector took the lease over and has
// published its own horizon and floor since, so this one may change
// neither (I6). Tokens of the lease only grow, so a higher registered
// token proves the loss, unless the lease object was deleted and its
// tokens restarted; then collections are refused until they pass it.
func (r *runner) fenced(ptr *pointer.Pointer) error {
	if r.lease == nil {
		return nil // a dry run: it holds no token and writes nothing
	}
	if mine := r.lease.Token(); ptr.GCToken > mine {
		return fmt.Errorf("gc: %w: lease %q token %d is stale: %s registers a collection with token %d (if %s was deleted, its tokens restarted and must pass %d again)",
			lease.ErrLost, LeaseName, mine, pointer.Key, ptr.GCToken, lease.Key(LeaseName), ptr.GCToken)
	}
	return nil
}

// refresh renews the lease when a third of its TTL has passed since the
// last renewal, so that a long read phase (a deep history, a large
// listing) does not outlive it. It is called between reads.
func (r *runner) refresh(ctx context.Context, during string) error {
	r.renewedMu.Lock()
	since := time.Since(r.renewed)
	r.renewedMu.Unlock()
	if r.lease == nil || since < r.lease.TTL()/3 {
		return nil
	}
	return r.renew(ctx, "continuing "+during)
}

// newPinOnCandidate lists the pins again and reports whether an unexpired
// one now names a generation the plan would delete.
func (r *runner) newPinOnCandidate(ctx context.Context, p *plan) (bool, error) {
	r.pins = nil
	again := &plan{now: p.now}
	pinned, err := r.listPins(ctx, again)
	if err != nil {
		return false, refuse(err)
	}
	for _, v := range p.victims {
		if pinned[v.info.Generation] > 0 {
			r.log.Info("gc: a pin appeared on a generation planned for deletion; planning again", "generation", v.info.Generation)
			return true, nil
		}
	}
	return false, nil
}
