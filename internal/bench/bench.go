// Package bench measures commitptr on a live store: latency percentiles,
// throughput and requests per operation by kind, for the scenarios behind
// `publish bench`. Every scenario writes under its own key prefix of the
// store it is given and leaves its data behind for inspection.
package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/store"
)

// Result is what one scenario measured.
type Result struct {
	Scenario string        `json:"scenario"`
	Ops      int           `json:"ops"`
	Errors   int           `json:"errors"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	P50      time.Duration `json:"p50_ns"`
	P99      time.Duration `json:"p99_ns"`
	// PerSecond is successful operations per second (goodput).
	PerSecond float64 `json:"per_second"`
	// Requests are the store requests per successful operation, by kind.
	Requests map[string]float64 `json:"requests_per_op"`
	// Extra holds scenario-specific figures, e.g. attempts per success.
	Extra map[string]float64 `json:"extra,omitempty"`
}

func summarize(name string, lat []time.Duration, errs int, elapsed time.Duration, used store.Counts) Result {
	slices.Sort(lat)
	r := Result{Scenario: name, Ops: len(lat), Errors: errs, Elapsed: elapsed, Requests: map[string]float64{}}
	if len(lat) > 0 {
		r.P50 = lat[len(lat)/2]
		r.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
		r.PerSecond = float64(len(lat)) / elapsed.Seconds()
		for op := store.OpGet; op <= store.OpList; op++ {
			if used[op] > 0 {
				r.Requests[op.String()] = float64(used[op]) / float64(len(lat))
			}
		}
	}
	return r
}

func payload(size int) []byte {
	b := make([]byte, size)
	rand.Read(b)
	return b
}

// Commit commits n generations of k files of size bytes each, one after
// another, and reports commit latency and requests per commit. The floor
// is k+3 requests (docs/PROTOCOL.md, "Commit").
func Commit(ctx context.Context, s store.Store, k, size, n int) (Result, error) {
	c := store.Count(store.WithPrefix(s, "bench/commit-"+uuid.NewString()[:8]+"/"))
	d := commit.New(c)
	data := payload(size)
	var lat []time.Duration
	start := time.Now()
	for range n {
		t0 := time.Now()
		tx, err := d.Begin(ctx)
		if err != nil {
			return Result{}, err
		}
		for i := range k {
			if err := tx.PutBytes(ctx, "part-"+strconv.Itoa(i), data); err != nil {
				return Result{}, err
			}
		}
		if _, err := tx.Commit(ctx, commit.CommitOptions{}); err != nil {
			return Result{}, err
		}
		lat = append(lat, time.Since(t0))
	}
	r := summarize(fmt.Sprintf("commit K=%d size=%d", k, size), lat, 0, time.Since(start), c.Counts())
	r.Extra = map[string]float64{"floor_requests": float64(k + 3)}
	return r, nil
}

// Contention runs writers concurrent read-modify-write commits of one
// small file for the given duration and reports goodput, attempts per
// success and latency (including retries). A run in which no commit
// succeeds is reported as an error: livelock.
func Contention(ctx context.Context, s store.Store, writers int, dur time.Duration) (Result, error) {
	c := store.Count(store.WithPrefix(s, "bench/contention-"+uuid.NewString()[:8]+"/"))
	d := commit.New(c, commit.WithRetry(commit.Retry{Attempts: 1000, Base: 5 * time.Millisecond, Max: 500 * time.Millisecond}))
	if _, err := d.Update(ctx, commit.CommitOptions{}, func(ctx context.Context, tx *commit.Tx) error {
		return tx.PutBytes(ctx, "counter", []byte("0"))
	}); err != nil {
		return Result{}, err
	}
	var (
		mu       sync.Mutex
		lat      []time.Duration
		errs     int
		attempts atomic.Int64
		wg       sync.WaitGroup
	)
	runCtx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	start := time.Now()
	for range writers {
		wg.Go(func() {
			for runCtx.Err() == nil {
				t0 := time.Now()
				_, err := d.Update(runCtx, commit.CommitOptions{}, func(ctx context.Context, tx *commit.Tx) error {
					attempts.Add(1)
					base, err := tx.BaseSnapshot(ctx)
					if err != nil {
						return err
					}
					b, err := base.ReadFile(ctx, "counter")
					if err != nil {
						return err
					}
					n, err := strconv.Atoi(string(b))
					if err != nil {
						return err
					}
					return tx.PutBytes(ctx, "counter", []byte(strconv.Itoa(n+1)))
				})
				mu.Lock()
				switch {
				case err == nil:
					lat = append(lat, time.Since(t0))
				case runCtx.Err() == nil:
					errs++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	r := summarize(fmt.Sprintf("contention writers=%d", writers), lat, errs, elapsed, c.Counts())
	if r.Ops == 0 {
		return r, fmt.Errorf("bench: livelock: %d writers made no progress in %s", writers, dur)
	}
	r.Extra = map[string]float64{"writers": float64(writers), "attempts_per_success": float64(attempts.Load()) / float64(r.Ops)}
	// The counter must equal the successes: a check that the contention
	// lost no update.
	snap, err := d.Open(ctx)
	if err != nil {
		return r, err
	}
	b, err := snap.ReadFile(ctx, "counter")
	if err != nil {
		return r, err
	}
	if got, _ := strconv.Atoi(string(b)); got < r.Ops {
		return r, fmt.Errorf("bench: lost update: counter %d after %d successful commits", got, r.Ops)
	}
	return r, nil
}

// WriteTable prints results for people.
func WriteTable(w io.Writer, rs []Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tOPS\tERRORS\tOPS/S\tP50\tP99\tREQUESTS/OP\tEXTRA")
	for _, r := range rs {
		var req []string
		for _, k := range slices.Sorted(maps.Keys(r.Requests)) {
			req = append(req, fmt.Sprintf("%s=%.2f", k, r.Requests[k]))
		}
		var extra []string
		for _, k := range slices.Sorted(maps.Keys(r.Extra)) {
			extra = append(extra, fmt.Sprintf("%s=%.2f", k, r.Extra[k]))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%s\t%s\t%v\t%v\n", r.Scenario, r.Ops, r.Errors, r.PerSecond,
			r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), req, extra)
	}
	tw.Flush()
}

// LeaseHandoff measures n handoffs of one lease between two holders: the
// time from the holder's Release to the waiter's blocking Acquire
// returning, and the requests each handoff costs.
func LeaseHandoff(ctx context.Context, s store.Store, n int) (Result, error) {
	c := store.Count(store.WithPrefix(s, "bench/lease-"+uuid.NewString()[:8]+"/"))
	opts := lease.Options{TTL: 10 * time.Second, PollMin: 2 * time.Millisecond, PollMax: 20 * time.Millisecond}
	held, err := lease.TryAcquire(ctx, c, "bench", opts)
	if err != nil {
		return Result{}, err
	}
	var lat []time.Duration
	start := time.Now()
	for range n {
		got := make(chan error, 1)
		var next *lease.Lease
		go func() {
			var err error
			next, err = lease.Acquire(ctx, c, "bench", opts)
			got <- err
		}()
		time.Sleep(5 * time.Millisecond) // let the waiter start polling
		t0 := time.Now()
		if err := held.Release(ctx); err != nil {
			return Result{}, err
		}
		if err := <-got; err != nil {
			return Result{}, err
		}
		lat = append(lat, time.Since(t0))
		held = next
	}
	if err := held.Release(ctx); err != nil {
		return Result{}, err
	}
	return summarize("lease handoff", lat, 0, time.Since(start), c.Counts()), nil
}

// Collect seeds gens generations of objs small files each, then measures
// one collection that keeps only the current generation: its time,
// deletions per second and requests.
func Collect(ctx context.Context, s store.Store, gens, objs int) (Result, error) {
	ps := store.WithPrefix(s, "bench/gc-"+uuid.NewString()[:8]+"/")
	d := commit.New(ps)
	data := payload(64)
	for range gens {
		tx, err := d.Begin(ctx)
		if err != nil {
			return Result{}, err
		}
		for i := range objs {
			if err := tx.PutBytes(ctx, "f"+strconv.Itoa(i), data); err != nil {
				return Result{}, err
			}
		}
		if _, err := tx.Commit(ctx, commit.CommitOptions{}); err != nil {
			return Result{}, err
		}
	}
	c := store.Count(ps)
	start := time.Now()
	rep, err := gc.Run(ctx, c, gc.Options{Keep: -1, Grace: -1})
	if err != nil {
		return Result{}, err
	}
	elapsed := time.Since(start)
	r := summarize(fmt.Sprintf("collect gens=%d objs=%d", gens, objs), []time.Duration{elapsed}, 0, elapsed, c.Counts())
	r.Extra = map[string]float64{
		"objects_deleted":      float64(rep.ObjectsDeleted),
		"deletions_per_second": float64(rep.ObjectsDeleted) / elapsed.Seconds(),
	}
	return r, nil
}

// PartitionMode is how the writers of Partitions commit.
type PartitionMode int

const (
	// NoRebase: a commit that loses starts again from Begin.
	NoRebase PartitionMode = iota
	// RebaseAlone: a commit that loses rebases, without group commit
	// (commit.Rebase.NoGroup).
	RebaseAlone
	// RebaseGroup: a commit that loses rebases, and writers carry each
	// other's changes (group commit).
	RebaseGroup
)

func (m PartitionMode) String() string {
	switch m {
	case RebaseAlone:
		return "rebase"
	case RebaseGroup:
		return "group"
	}
	return "off"
}

// Processes says what a process is to the writers of Partitions. Each
// process has its own Dataset, and so learns of contention on its own.
type Processes int

const (
	// ProcessPerWriter: each writer is a job of its own that commits over
	// and over with one Dataset.
	ProcessPerWriter Processes = iota
	// ProcessPerCommit: each commit is a process of its own, as a
	// 'publish put --into' run per commit is: a new Dataset for every
	// Begin.
	ProcessPerCommit
)

func (p Processes) String() string {
	if p == ProcessPerCommit {
		return "commit"
	}
	return "writer"
}

// fairness returns the successes of the writer that had the fewest over
// the mean of all writers': 1 when every writer committed as often, 0 when
// one never did. A starved writer's commit is missing from the latencies,
// so a p99 means little without it.
func fairness(successes []int) float64 {
	total := 0
	for _, n := range successes {
		total += n
	}
	if total == 0 {
		return 0
	}
	return float64(slices.Min(successes)) * float64(len(successes)) / float64(total)
}

// Partitions runs writers that each commit, over and over, their own path
// of one dataset (a Tx that keeps every file and replaces one), for the
// given duration, in the mode given, each writer in processes of its own
// as procs says. A commit that loses starts again
// from Begin after a jittered backoff (5 ms base, 500 ms cap), as
// Dataset.Update does; with rebase, it loses only past the rebase bounds.
// It reports goodput, attempts, rebases and carried commits per success, and
// latency including retries. At the end every writer's path must hold its
// count of successes: a lost update fails the scenario.
func Partitions(ctx context.Context, s store.Store, writers int, mode PartitionMode, procs Processes, dur time.Duration) (Result, error) {
	c := store.Count(store.WithPrefix(s, "bench/partitions-"+uuid.NewString()[:8]+"/"))
	retry := commit.Retry{Attempts: 1000, Base: 5 * time.Millisecond, Max: 500 * time.Millisecond}
	if _, err := commit.New(c).Update(ctx, commit.CommitOptions{}, func(ctx context.Context, tx *commit.Tx) error {
		return tx.PutBytes(ctx, "seed", []byte("0"))
	}); err != nil {
		return Result{}, err
	}
	var (
		mu                sync.Mutex
		lat               []time.Duration
		errs              int
		attempts, rebases atomic.Int64
		carried           atomic.Int64
		wg                sync.WaitGroup
		successes         = make([]int, writers)
	)
	runCtx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	start := time.Now()
	for w := range writers {
		path := fmt.Sprintf("w%02d/part", w)
		d := commit.New(c)
		wg.Go(func() {
			for runCtx.Err() == nil {
				t0 := time.Now()
				var err error
				for try := 0; ; try++ {
					if try > 0 {
						if serr := sleepJitter(runCtx, retry, try-1); serr != nil {
							err = serr
							break
						}
					}
					attempts.Add(1)
					var tx *commit.Tx
					if procs == ProcessPerCommit {
						d = commit.New(c)
					}
					if tx, err = d.Begin(runCtx); err != nil {
						break
					}
					err = tx.KeepAll(runCtx)
					if err == nil {
						err = tx.PutBytes(runCtx, path, []byte(strconv.Itoa(successes[w]+1)))
					}
					if err == nil && mode != NoRebase {
						err = tx.EnableRebase(commit.Rebase{Scope: fmt.Sprintf("w%02d/", w), NoGroup: mode == RebaseAlone})
					}
					if err != nil {
						tx.Discard(context.WithoutCancel(runCtx)) //nolint:errcheck // best effort
						break
					}
					_, err = tx.Commit(runCtx, commit.CommitOptions{})
					rebases.Add(int64(tx.Rebased()))
					if err == nil && tx.CarriedBy() != "" {
						carried.Add(1)
					}
					if !errors.Is(err, commit.ErrConflict) || try+1 >= retry.Attempts {
						break
					}
				}
				mu.Lock()
				switch {
				case err == nil:
					successes[w]++
					lat = append(lat, time.Since(t0))
				case runCtx.Err() == nil:
					errs++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	r := summarize(fmt.Sprintf("partitions writers=%d mode=%s", writers, mode), lat, errs, elapsed, c.Counts())
	if r.Ops == 0 {
		return r, fmt.Errorf("bench: livelock: %d writers made no progress in %s", writers, dur)
	}
	r.Extra = map[string]float64{
		"writers":              float64(writers),
		"attempts_per_success": float64(attempts.Load()) / float64(r.Ops),
		"rebases_per_success":  float64(rebases.Load()) / float64(r.Ops),
		"carried_per_success":  float64(carried.Load()) / float64(r.Ops),
		"fairness":             fairness(successes),
	}
	snap, err := commit.New(c).Open(ctx)
	if err != nil {
		return r, err
	}
	for w, n := range successes {
		if n == 0 {
			continue
		}
		b, err := snap.ReadFile(ctx, fmt.Sprintf("w%02d/part", w))
		if err != nil {
			return r, err
		}
		if got, _ := strconv.Atoi(string(b)); got != n {
			return r, fmt.Errorf("bench: lost update: writer %d committed %d times, its file says %d", w, n, got)
		}
	}
	return r, nil
}

// sleepJitter sleeps a full-jitter backoff for the attempt.
func sleepJitter(ctx context.Context, r commit.Retry, attempt int) error {
	d := r.Base << min(attempt, 30)
	if d <= 0 || d > r.Max {
		d = r.Max
	}
	t := time.NewTimer(mrand.N(d))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// PartitionPublish is what one run of concurrent partition publishes
// measured.
type PartitionPublish struct {
	Writers, FilesPer, Size int
	Commits, Lost           int
	Rebases                 int
	// Carried counts the commits another writer's commit carried (group
	// commit): they sent no pointer write of their own that landed.
	Carried int
	// UploadedTwice counts data objects written more than once.
	UploadedTwice int
	DataPuts      int
	Requests      store.Counts
	// Floor is Σ(K_i + 3): each commit's data PUTs, manifest PUT, pointer
	// GET and PUT. RebaseFloor adds, per rebase, the head's manifest GET,
	// a manifest PUT, and a pointer GET and PUT.
	Floor, RebaseFloor int
	Elapsed            time.Duration
}

// PartitionPuts runs writers concurrent publishes of one partition each,
// as 'publish put --into pNN/' does: Begin, keep every file, replace
// those under the prefix with files of size bytes, rebase within the
// prefix, commit once, each in a process of its own (its own Dataset).
// It counts the store's requests and the PUTs of every data key.
func PartitionPuts(ctx context.Context, s store.Store, writers, files, size int) (PartitionPublish, error) {
	ps := store.WithPrefix(s, "bench/partition-puts-"+uuid.NewString()[:8]+"/")
	if _, err := commit.New(ps).Update(ctx, commit.CommitOptions{}, func(ctx context.Context, tx *commit.Tx) error {
		return tx.PutBytes(ctx, "seed", []byte("0"))
	}); err != nil {
		return PartitionPublish{}, err
	}
	puts := &keyPuts{Store: ps, n: map[string]int{}}
	c := store.Count(puts)
	data := payload(size)
	res := PartitionPublish{Writers: writers, FilesPer: files, Size: size}
	var mu sync.Mutex
	g := sync.WaitGroup{}
	var firstErr error
	start := time.Now()
	for w := range writers {
		g.Go(func() {
			prefix := fmt.Sprintf("p%02d/", w)
			err := func() error {
				tx, err := commit.New(c).Begin(ctx) // a process of its own
				if err != nil {
					return err
				}
				if err := tx.KeepAll(ctx); err != nil {
					return err
				}
				for i := range files {
					if err := tx.PutBytes(ctx, fmt.Sprintf("%sf%02d", prefix, i), data); err != nil {
						return err
					}
				}
				if err := tx.EnableRebase(commit.Rebase{Scope: prefix}); err != nil {
					return err
				}
				_, err = tx.Commit(ctx, commit.CommitOptions{})
				mu.Lock()
				defer mu.Unlock()
				res.Rebases += tx.Rebased()
				switch {
				case err == nil:
					res.Commits++
					if tx.CarriedBy() != "" {
						res.Carried++
					}
				case errors.Is(err, commit.ErrConflict):
					res.Lost++
				default:
					return err
				}
				return nil
			}()
			if err != nil {
				mu.Lock()
				firstErr = cmpOr(firstErr, err)
				mu.Unlock()
			}
		})
	}
	g.Wait()
	res.Elapsed = time.Since(start)
	res.Requests = c.Counts()
	for _, n := range puts.counts() {
		res.DataPuts += n
		if n > 1 {
			res.UploadedTwice++
		}
	}
	res.Floor = writers * (files + 3)
	res.RebaseFloor = res.Floor + 4*res.Rebases
	return res, firstErr
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// keyPuts counts the PUTs of each data key (not manifests or the pointer).
type keyPuts struct {
	store.Store
	mu sync.Mutex
	n  map[string]int
}

func (k *keyPuts) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	if strings.HasPrefix(key, generation.Dir) && path.Base(key) != generation.ManifestName {
		k.mu.Lock()
		k.n[key]++
		k.mu.Unlock()
	}
	return k.Store.Put(ctx, key, body, opts)
}

func (k *keyPuts) counts() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return maps.Clone(k.n)
}
