package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/object"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// The soak's workload, per driver.
const (
	soakWriters     = 3
	soakReaders     = 3 // the first one pins its snapshots
	soakCounterKeys = 2
	soakCounterers  = 4 // spread over the keys
	soakCollectors  = 2 // contending for the collector's lease
	soakContenders  = 3 // contending for the lease "leader"
	writerFiles     = 4 // files each writer keeps in the dataset
)

// soakGC are the collector's options: short enough that collections
// actually delete during a short run.
var soakGC = gc.Options{Keep: 2, Grace: 2 * time.Second, OrphanAge: 4 * time.Second, LeaseTTL: 5 * time.Second}

// soakRetry is the counters' retry policy.
var soakRetry = object.Retry{Attempts: 20, Base: 5 * time.Millisecond, Max: 200 * time.Millisecond}

const pinTTL = 30 * time.Second

// soakStats counts what a soak did.
type soakStats struct {
	commitOK, commitLost, commitUnknown, commitFailed, abandoned atomic.Int64
	reads, readFailed, readCollected, pinnedReads, pinRaces      atomic.Int64
	filesRead                                                    atomic.Int64
	incOK, incUnknown, incFailed                                 atomic.Int64
	gcOK, gcHeld, gcBusy, gcFailed, gcDeleted                    atomic.Int64
	leaseHeld, leaseBusy, leaseFailed                            atomic.Int64
}

func (s *soakStats) ops() int64 {
	var n int64
	for _, c := range []*atomic.Int64{
		&s.commitOK, &s.commitLost, &s.commitUnknown, &s.commitFailed, &s.abandoned,
		&s.reads, &s.readFailed, &s.incOK, &s.incUnknown, &s.incFailed,
		&s.gcOK, &s.gcHeld, &s.gcBusy, &s.gcFailed, &s.leaseHeld, &s.leaseBusy, &s.leaseFailed,
	} {
		n += c.Load()
	}
	return n
}

func (s *soakStats) String() string {
	return fmt.Sprintf("ops=%d; commits ok=%d lost=%d unknown=%d failed=%d abandoned=%d; "+
		"reads ok=%d (pinned %d, pin raced gc %d, files %d) failed=%d collected=%d; "+
		"increments ok=%d unknown=%d failed=%d; gc ok=%d held=%d busy=%d failed=%d deleted=%d objects while writers ran; "+
		"lease held=%d busy=%d failed=%d",
		s.ops(), s.commitOK.Load(), s.commitLost.Load(), s.commitUnknown.Load(), s.commitFailed.Load(), s.abandoned.Load(),
		s.reads.Load(), s.pinnedReads.Load(), s.pinRaces.Load(), s.filesRead.Load(), s.readFailed.Load(), s.readCollected.Load(),
		s.incOK.Load(), s.incUnknown.Load(), s.incFailed.Load(), s.gcOK.Load(), s.gcHeld.Load(), s.gcBusy.Load(), s.gcFailed.Load(), s.gcDeleted.Load(),
		s.leaseHeld.Load(), s.leaseBusy.Load(), s.leaseFailed.Load())
}

// leaseSpan is one holder's belief that it holds the lease, on the local
// monotonic clock.
type leaseSpan struct {
	token      uint64
	start, end time.Time
}

type soak struct {
	t        *testing.T
	tg       target
	ds       store.Store // the dataset, faulty
	clean    store.Store // the dataset, without faults
	d        *commit.Dataset
	deadline time.Time
	stats    soakStats

	mu         sync.Mutex
	violations []string
	outcome    map[string]string // generation → ok, unknown, lost, failed, abandoned
	okSeq      map[uint64]string // seq → generation of a successful commit
	seen       map[uint64]string // seq → generation a reader saw
	inc        map[string][2]int64
	spans      []leaseSpan
	gcRunning  map[int64]bool // collections in flight, by start number
	gcStarts   int64
}

func (s *soak) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.violations = append(s.violations, msg)
	s.mu.Unlock()
	s.t.Errorf("VIOLATION on %s: %s", s.tg.name, msg)
}

func (s *soak) running() bool { return time.Now().Before(s.deadline) }

// opCtx bounds one operation; operations in flight at the deadline finish.
func opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Minute)
}

func pause(rnd *rand.Rand, lo, hi time.Duration) {
	time.Sleep(lo + time.Duration(rnd.Int64N(int64(hi-lo))))
}

// content is what a data file at path holds.
func content(path string) []byte {
	return []byte(strings.Repeat(path+"\n", 8))
}

func (s *soak) setOutcome(gen, o string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outcome[gen] = o
}

// writer publishes generations with Update: each adds one file, drops the
// writer's oldest beyond writerFiles, and rewrites "index" (every data path)
// and "gen" (the generation's id). One operation in 10 stages a file and
// walks away without committing or discarding, like a crashed writer.
func (s *soak) writer(w int, rnd *rand.Rand) {
	for n := 0; s.running(); n++ {
		pause(rnd, 2*time.Millisecond, 30*time.Millisecond)
		ctx, cancel := opCtx()
		if rnd.IntN(10) == 0 {
			if tx, err := s.d.Begin(ctx); err == nil {
				s.setOutcome(tx.Generation(), "abandoned")
				// A writer that dies mid-stage: whatever landed is the collector's.
				_ = tx.PutBytes(ctx, fmt.Sprintf("w%d/crashed", w), []byte("never committed"))
				s.stats.abandoned.Add(1)
			}
			cancel()
			continue
		}
		var tried []string
		path := fmt.Sprintf("w%d/f%06d", w, n)
		p, err := s.d.Update(ctx, commit.CommitOptions{Message: path}, func(ctx context.Context, tx *commit.Tx) error {
			tried = append(tried, tx.Generation())
			if err := tx.PutBytes(ctx, path, content(path)); err != nil {
				return err
			}
			var mine, data []string
			for _, f := range tx.Files() {
				if f == "index" || f == "gen" {
					continue
				}
				data = append(data, f)
				if strings.HasPrefix(f, fmt.Sprintf("w%d/", w)) {
					mine = append(mine, f)
				}
			}
			for _, f := range mine[:max(0, len(mine)-writerFiles)] {
				tx.Remove(f)
				data = slices.DeleteFunc(data, func(x string) bool { return x == f })
			}
			if err := tx.PutBytes(ctx, "index", []byte(strings.Join(data, "\n"))); err != nil {
				return err
			}
			return tx.PutBytes(ctx, "gen", []byte(tx.Generation()))
		})
		cancel()
		last := len(tried) - 1
		s.stats.commitLost.Add(int64(max(last, 0)))
		if errors.Is(err, commit.ErrConflict) || errors.Is(err, commit.ErrStale) {
			s.stats.commitLost.Add(1)
		}
		for i, gen := range tried {
			o := "lost" // Update retries only after a proven loss or ErrStale
			if i == last {
				switch {
				case err == nil:
					o = "ok"
				case errors.Is(err, commit.ErrCommitUnknown):
					o = "unknown"
				case errors.Is(err, commit.ErrConflict), errors.Is(err, commit.ErrStale):
				default:
					o = "failed"
				}
			}
			s.setOutcome(gen, o)
		}
		switch {
		case err == nil:
			s.stats.commitOK.Add(1)
			if p.Generation != tried[last] {
				s.violation("I2: Update returned generation %s, but its last attempt was %s", p.Generation, tried[last])
			}
			s.mu.Lock()
			if prev, dup := s.okSeq[p.Seq]; dup {
				s.mu.Unlock()
				s.violation("I2: two successful commits at seq %d: %s and %s", p.Seq, prev, p.Generation)
				continue
			}
			s.okSeq[p.Seq] = p.Generation
			s.mu.Unlock()
			s.observe(p.Seq, p.Generation)
		case errors.Is(err, commit.ErrCommitUnknown):
			s.stats.commitUnknown.Add(1)
		case errors.Is(err, commit.ErrConflict), errors.Is(err, commit.ErrStale):
		default:
			if s.stats.commitFailed.Add(1) <= 20 {
				s.t.Logf("commit failed: %v", err)
			}
		}
	}
}

// observe records that seq held gen; every observer must agree.
func (s *soak) observe(seq uint64, gen string) {
	s.mu.Lock()
	prev, ok := s.seen[seq]
	if !ok {
		s.seen[seq] = gen
	}
	s.mu.Unlock()
	if ok && prev != gen {
		s.violation("I2: seq %d was seen as generation %s and as %s", seq, prev, gen)
	}
}

// reader opens snapshots and reads every file slowly, checking that they
// form exactly one generation. A pinning reader holds a pin throughout.
func (s *soak) reader(id int, pin bool, rnd *rand.Rand) {
	var lastSeq uint64
	for s.running() {
		pause(rnd, 5*time.Millisecond, 50*time.Millisecond)
		ctx, cancel := opCtx()
		s.read(ctx, id, pin, rnd, &lastSeq)
		cancel()
	}
}

func (s *soak) read(ctx context.Context, id int, pin bool, rnd *rand.Rand, lastSeq *uint64) {
	snap, err := s.d.Open(ctx)
	switch {
	case errors.Is(err, commit.ErrNoCommits):
		return
	case errors.Is(err, commit.ErrCollected):
		// The pointer moved on and its generation was collected between
		// our pointer GET and manifest GET: possible only when that gap
		// exceeded the grace period (SDK backoff under faults).
		s.stats.readCollected.Add(1)
		return
	case brokenInvariant(err):
		s.violation("I1: open: %v", err)
		return
	case err != nil:
		s.stats.readFailed.Add(1)
		return
	}
	if snap.Seq() < *lastSeq {
		s.violation("I2: reader %d saw seq %d after seq %d", id, snap.Seq(), *lastSeq)
	}
	*lastSeq = snap.Seq()
	s.observe(snap.Seq(), snap.Generation())

	protected := false
	if pin {
		p, err := snap.Pin(ctx, pinTTL, fmt.Sprintf("soak-reader-%d", id))
		if err == nil {
			defer p.Release(context.WithoutCancel(ctx))
			// A collection that was already planning may not see the pin.
			// Wait for those, then make sure the snapshot survived them:
			// from here on the pin must protect it (I4).
			s.awaitCollections(s.gcStarted())
			if s.intact(ctx, snap) {
				protected = true
				s.stats.pinnedReads.Add(1)
			} else {
				s.stats.pinRaces.Add(1)
			}
		}
	}

	slow := pin || rnd.IntN(4) == 0
	got := map[string][]byte{}
	for _, e := range snap.Files() {
		if slow {
			time.Sleep(time.Duration(rnd.IntN(300)) * time.Millisecond) // a slow reader
		}
		b, err := snap.ReadFile(ctx, e.Path)
		switch {
		case errors.Is(err, commit.ErrCollected) && protected:
			s.violation("I4: pinned snapshot seq %d lost %q: %v", snap.Seq(), e.Path, err)
			return
		case errors.Is(err, commit.ErrCollected):
			s.stats.readCollected.Add(1)
			return
		case brokenInvariant(err):
			s.violation("I3: snapshot seq %d, %q: %v", snap.Seq(), e.Path, err)
			return
		case err != nil:
			s.stats.readFailed.Add(1)
			return
		}
		s.stats.filesRead.Add(1)
		got[e.Path] = b
	}
	s.checkSnapshot(snap, got)
	s.stats.reads.Add(1)
}

// checkSnapshot asserts I3 on the files read from one snapshot: "gen" names
// the snapshot's generation, "index" lists exactly the other files, and
// every data file holds its content.
func (s *soak) checkSnapshot(snap *commit.Snapshot, got map[string][]byte) {
	if g := string(got["gen"]); g != snap.Generation() {
		s.violation("I3: snapshot of generation %s has gen file %q", snap.Generation(), g)
	}
	var data []string
	for p, b := range got {
		if p == "gen" || p == "index" {
			continue
		}
		data = append(data, p)
		if string(b) != string(content(p)) {
			s.violation("I3: snapshot %s: %q holds %q", snap.Generation(), p, b)
		}
	}
	sort.Strings(data)
	if idx := string(got["index"]); idx != strings.Join(data, "\n") {
		s.violation("I3: snapshot %s: index %q does not match its files %q", snap.Generation(), idx, data)
	}
}

// intact reports whether every object of the snapshot is still there.
func (s *soak) intact(ctx context.Context, snap *commit.Snapshot) bool {
	for _, k := range snap.Manifest.Keys() {
		if _, err := s.clean.Head(ctx, k); err != nil {
			return false
		}
	}
	return true
}

func (s *soak) gcStarted() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gcStarts
}

// awaitCollections waits until every collection started up to start number n
// has finished.
func (s *soak) awaitCollections(n int64) {
	for {
		s.mu.Lock()
		busy := false
		for id := range s.gcRunning {
			if id <= n {
				busy = true
			}
		}
		s.mu.Unlock()
		if !busy {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// counter increments a shared counter object with object.Update.
func (s *soak) counter(key string, rnd *rand.Rand) {
	for s.running() {
		pause(rnd, time.Millisecond, 20*time.Millisecond)
		ctx, cancel := opCtx()
		_, err := object.Update(ctx, s.tg.faulty, key, soakRetry, func(old []byte, exists bool) ([]byte, error) {
			n := int64(0)
			if exists {
				var err error
				if n, err = strconv.ParseInt(string(old), 10, 64); err != nil {
					return nil, fmt.Errorf("counter %q holds %q", key, old)
				}
			}
			return []byte(strconv.FormatInt(n+1, 10)), nil
		})
		cancel()
		s.mu.Lock()
		c := s.inc[key]
		switch {
		case err == nil:
			c[0]++
			s.stats.incOK.Add(1)
		case errors.Is(err, object.ErrUnknown):
			c[1]++
			s.stats.incUnknown.Add(1)
		default:
			if s.stats.incFailed.Add(1) <= 20 {
				s.t.Logf("increment %s failed: %v", key, err)
			}
		}
		s.inc[key] = c
		s.mu.Unlock()
	}
}

// collector runs collections back to back with a pause.
func (s *soak) collector(id int, rnd *rand.Rand) {
	opts := soakGC
	opts.Owner = fmt.Sprintf("soak-gc-%d", id)
	for s.running() {
		pause(rnd, 200*time.Millisecond, time.Second)
		s.mu.Lock()
		s.gcStarts++
		run := s.gcStarts
		s.gcRunning[run] = true
		s.mu.Unlock()
		ctx, cancel := opCtx()
		rep, err := gc.Run(ctx, s.ds, opts)
		cancel()
		s.mu.Lock()
		delete(s.gcRunning, run)
		s.mu.Unlock()
		switch {
		case err == nil:
			s.stats.gcOK.Add(1)
			s.stats.gcDeleted.Add(int64(rep.ObjectsDeleted))
		case errors.Is(err, lease.ErrHeld):
			s.stats.gcHeld.Add(1)
		case errors.Is(err, gc.ErrBusy):
			s.stats.gcBusy.Add(1)
		case errors.Is(err, pointer.ErrCorrupt), errors.Is(err, generation.ErrCorrupt):
			s.violation("gc found corrupt state: %v", err)
		default:
			if s.stats.gcFailed.Add(1) <= 20 {
				s.t.Logf("gc failed: %v", err)
			}
		}
	}
}

// contender tries to take the lease "leader", holds it for a while with
// KeepAlive, and records when it believed it held it.
func (s *soak) contender(id int, rnd *rand.Rand) {
	opts := lease.Options{TTL: 2 * time.Second, Owner: fmt.Sprintf("soak-contender-%d", id)}
	for s.running() {
		pause(rnd, 10*time.Millisecond, 300*time.Millisecond)
		ctx, cancel := opCtx()
		l, err := lease.TryAcquire(ctx, s.ds, "leader", opts)
		switch {
		case errors.Is(err, lease.ErrHeld):
			s.stats.leaseBusy.Add(1)
			cancel()
			continue
		case err != nil:
			s.stats.leaseFailed.Add(1)
			cancel()
			continue
		}
		span := leaseSpan{token: l.Token(), start: time.Now()}
		s.stats.leaseHeld.Add(1)
		l.KeepAlive(ctx)
		hold := time.Now().Add(time.Duration(rnd.Int64N(int64(3 * time.Second))))
		for time.Now().Before(hold) && l.Held() {
			time.Sleep(20 * time.Millisecond)
		}
		if l.Held() {
			span.end = time.Now() // we stop acting, then release
			l.Release(ctx)
		} else {
			span.end = time.Now()
			if dl := l.Deadline(); dl.Before(span.end) {
				span.end = dl
			}
		}
		cancel()
		s.mu.Lock()
		s.spans = append(s.spans, span)
		s.mu.Unlock()
	}
}

// checkLeases asserts I5 on the recorded spans: tokens strictly increase
// and no two holders believed they held the lease at the same instant.
func (s *soak) checkLeases() {
	spans := slices.Clone(s.spans)
	slices.SortFunc(spans, func(a, b leaseSpan) int { return a.start.Compare(b.start) })
	for i := 1; i < len(spans); i++ {
		a, b := spans[i-1], spans[i]
		if b.token <= a.token {
			s.violation("I5: token %d acquired after token %d", b.token, a.token)
		}
		if b.start.Before(a.end) {
			s.violation("I5: holder of token %d believed it held the lease until %s, holder of token %d from %s",
				a.token, a.end.Format(time.StampMicro), b.token, b.start.Format(time.StampMicro))
		}
	}
}

// verify checks the state left behind, without faults: I1, I2, exact
// counters, no lost objects, then, after a last collection past
// orphan-age, I7.
func (s *soak) verify() {
	t := s.t
	ctx := context.Background()
	d := commit.New(s.clean)
	snap, err := d.Open(ctx)
	if errors.Is(err, commit.ErrNoCommits) {
		require.Zero(t, s.stats.commitOK.Load(), "commits succeeded but there is no pointer")
		return
	}
	require.NoError(t, err, "I1: the final pointer resolves")

	// The retained window: the current generation and Keep ancestors must
	// be complete; every object they reference must be there.
	var retained []*generation.Manifest
	objects := 0
	for m, err := range d.History(ctx, snap) {
		if err != nil {
			if !errors.Is(err, commit.ErrCollected) {
				s.violation("I1: history: %v", err)
			}
			break
		}
		if len(retained) <= soakGC.Keep {
			retained = append(retained, m)
		}
		s.mu.Lock()
		o, known := s.outcome[m.Generation]
		okGen, okAt := s.okSeq[m.Seq]
		s.mu.Unlock()
		switch {
		case !known:
			s.violation("I2: generation %s at seq %d was made by no writer", m.Generation, m.Seq)
		case o != "ok" && o != "unknown":
			s.violation("I2: generation %s at seq %d was reported %s", m.Generation, m.Seq, o)
		}
		if okAt && okGen != m.Generation {
			s.violation("I2: seq %d holds %s, but the commit that succeeded at it was %s", m.Seq, m.Generation, okGen)
		}
		s.mu.Lock()
		seenGen, seen := s.seen[m.Seq]
		s.mu.Unlock()
		if seen && seenGen != m.Generation {
			s.violation("I2: seq %d holds %s, but a reader saw %s", m.Seq, m.Generation, seenGen)
		}
	}
	for _, m := range retained {
		for _, e := range m.Entries {
			objects++
			if _, err := s.clean.Head(ctx, e.Key); err != nil {
				s.violation("object lost: %q of generation %s (seq %d): %v", e.Key, m.Generation, m.Seq, err)
			}
		}
	}
	got := map[string][]byte{}
	for _, e := range snap.Files() {
		b, err := snap.ReadFile(ctx, e.Path)
		require.NoError(t, err, "I1: %q of the current generation", e.Path)
		got[e.Path] = b
	}
	s.checkSnapshot(snap, got)

	// Counters: every successful increment is there, and at most the
	// unknown ones besides.
	for key, c := range s.inc {
		rc, _, err := s.tg.clean.Get(ctx, key)
		var v int64
		if err == nil {
			var b strings.Builder
			_, err = io.Copy(&b, rc)
			rc.Close()
			v, _ = strconv.ParseInt(b.String(), 10, 64)
		}
		if !errors.Is(err, store.ErrNotExist) {
			require.NoError(t, err)
		}
		switch {
		case v < c[0]:
			s.violation("counter %q is %d after %d successful increments: increments lost", key, v, c[0])
		case v > c[0]+c[1]:
			s.violation("counter %q is %d after %d successful and %d unknown increments: applied twice", key, v, c[0], c[1])
		}
	}
	s.checkLeases()

	// I7: once orphan-age and grace have passed, one collection leaves only
	// what retained (or still pinned) generations reference.
	time.Sleep(max(soakGC.OrphanAge, soakGC.Grace) + 2*time.Second)
	gens := map[string]bool{}
	for o, err := range store.List(ctx, s.clean, generation.Dir, "", "") {
		require.NoError(t, err)
		gens[generation.FromKey(o.Key)] = true
	}
	var rep *gc.Report
	start := time.Now()
	for try := 0; ; try++ {
		rep, err = gc.Run(ctx, s.clean, soakGC)
		if !errors.Is(err, lease.ErrHeld) || try == 20 {
			break
		}
		time.Sleep(500 * time.Millisecond) // a collector's lease outlived a failed release
	}
	t.Logf("final collection over %d generations took %s", len(gens), time.Since(start).Round(time.Millisecond))
	switch {
	case err != nil:
		s.violation("I7: the final collection failed without faults: %v", err)
		return
	}
	snap, err = d.Open(ctx)
	require.NoError(t, err)
	marked := map[string]bool{}
	keep := map[string]bool{}
	n := 0
	for m, err := range d.History(ctx, snap) {
		if err != nil || n > soakGC.Keep {
			break
		}
		n++
		keep[m.Generation] = true
		for _, k := range m.Keys() {
			marked[k] = true
		}
	}
	for o, err := range store.List(ctx, s.clean, commit.PinDir, "", "") {
		require.NoError(t, err)
		if gen, _, err := commit.ParsePinKey(o.Key); err == nil {
			keep[gen] = true // a pin whose release failed; still unexpired
		}
	}
	left := 0
	for o, err := range store.List(ctx, s.clean, generation.Dir, "", "") {
		require.NoError(t, err)
		if marked[o.Key] || keep[generation.FromKey(o.Key)] {
			continue
		}
		left++
		if left <= 5 {
			s.mu.Lock()
			why := s.outcome[generation.FromKey(o.Key)]
			s.mu.Unlock()
			s.violation("I7: %q (generation reported %q) survived a collection past orphan-age", o.Key, why)
		}
	}
	t.Logf("final: seq %d, %d objects of %d retained generations present; last collection deleted %d objects; %d unreferenced keys left",
		snap.Seq(), objects, len(retained), rep.ObjectsDeleted, left)
}

// newSoak returns a soak of the dataset "ds/" of tg that runs until dur
// from now; opts add to the options of its Dataset.
func newSoak(t *testing.T, tg target, dur time.Duration, opts ...commit.Option) *soak {
	ds := store.WithPrefix(tg.faulty, "ds/")
	opts = append([]commit.Option{commit.WithWriter("soak"), commit.WithConcurrency(4), commit.WithRetry(commit.Retry{Attempts: 20, Base: 10 * time.Millisecond, Max: 500 * time.Millisecond})}, opts...)
	return &soak{
		t: t, tg: tg, ds: ds, clean: store.WithPrefix(tg.clean, "ds/"),
		d:        commit.New(ds, opts...),
		deadline: time.Now().Add(dur),
		outcome:  map[string]string{}, okSeq: map[uint64]string{}, seen: map[uint64]string{},
		inc: map[string][2]int64{}, gcRunning: map[int64]bool{},
	}
}

// run runs the soak's workers, each with its own random source from sd,
// until the deadline, and returns how long they ran.
func (s *soak) run(sd uint64) time.Duration {
	var wg sync.WaitGroup
	worker := func(i int, f func(rnd *rand.Rand)) {
		rnd := rand.New(rand.NewPCG(sd, uint64(i)))
		wg.Go(func() { f(rnd) })
	}
	i := 0
	for w := range soakWriters {
		worker(i, func(r *rand.Rand) { s.writer(w, r) })
		i++
	}
	for r := range soakReaders {
		worker(i, func(rnd *rand.Rand) { s.reader(r, r == 0, rnd) })
		i++
	}
	for c := range soakCounterers {
		worker(i, func(r *rand.Rand) { s.counter(fmt.Sprintf("counters/c%d", c%soakCounterKeys), r) })
		i++
	}
	for c := range soakCollectors {
		worker(i, func(r *rand.Rand) { s.collector(c, r) })
		i++
	}
	for c := range soakContenders {
		worker(i, func(r *rand.Rand) { s.contender(c, r) })
		i++
	}
	start := time.Now()
	wg.Wait()
	return time.Since(start)
}

// TestSoak runs writers, snapshot readers (one pinning), read-modify-write
// counters, two collectors and lease contenders at once with faults on, on
// each driver in parallel, for COMMITPTR_SOAK (default 8s), then checks the
// invariants. COMMITPTR_SOAK=0 skips it.
func TestSoak(t *testing.T) {
	dur := envDuration(t, "COMMITPTR_SOAK", 8*time.Second)
	if dur <= 0 {
		t.Skip("COMMITPTR_SOAK=0")
	}
	for _, driver := range drivers() {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			sd := seed(t, 77)
			in := faults.New(faults.Config{Seed: sd, Rates: faults.Uniform(defaultRates), MaxLatency: 20 * time.Millisecond})
			s := newSoak(t, newTarget(t, driver, in), dur)
			elapsed := s.run(sd)
			in.SetEnabled(false)
			defer func() {
				t.Logf("SOAK %s %s (seed %d): %s; faults: %s; violations: %d",
					driver, elapsed.Round(time.Second), sd, &s.stats, in.Counts(), len(s.violations))
			}()
			s.verify()
		})
	}
}
