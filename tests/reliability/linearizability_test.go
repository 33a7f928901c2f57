package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/job"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// The pointer is modelled as a register holding (seq, generation); the
// empty value is "no pointer yet". A commit is a compare-and-swap from the
// value its transaction began on to (seq+1, its generation). A commit that
// another writer's commit carried (group commit) is an observation of the
// value that carrier wrote (opCarried).
type reg struct {
	Seq uint64 `json:"seq"`
	Gen string `json:"gen,omitempty"`
}

func (r reg) String() string {
	if r.Gen == "" {
		return "none"
	}
	return fmt.Sprintf("%d:%s", r.Seq, short(r.Gen))
}

// short abbreviates a generation id (a UUIDv7) to its random tail.
func short(gen string) string {
	if len(gen) > 8 {
		return gen[len(gen)-8:]
	}
	return gen
}

type opKind string

const (
	opRead   opKind = "read"
	opCommit opKind = "commit"
	// opCarried is a commit with rebase that another writer's commit
	// applied together with its own (group commit): its Commit returned
	// that commit's pointer value. The carrier's compare-and-swap is in
	// the history already, as its own writer's commit (ok, or unknown if
	// that writer could not tell), and it alone made the transition; it
	// took effect inside the carried commit's [call, return] interval,
	// since the carrier applied an intent published after the call, and
	// the carried writer saw the pointer at or past it before returning.
	// So the carried commit is recorded as an operation that must find
	// the register holding exactly the carrier's value (Output.Value) at
	// some point of its interval: a read, told apart in the history. A
	// second compare-and-swap for the same transition would be unsound
	// (two writers cannot both swap from one value); the Tx's own id is
	// never the register's value, so no CAS to it is recorded. That the
	// carrier's manifest does list this Tx, and only it, is checked on the
	// chain (verify), and what it holds by checkUnion.
	opCarried opKind = "carried"
)

// Outcomes of a commit.
const (
	resOK      = "ok"      // Commit returned success: applied, definitely
	resLost    = "lost"    // ErrConflict: proven not applied
	resUnknown = "unknown" // ErrCommitUnknown: may or may not have been applied
	resAborted = "aborted" // another error before or instead of the pointer write: not applied
	// resCarried: Commit returned success, applied by another writer's
	// commit (group commit). Only in linRun.txs: the history records such
	// a commit as an opCarried operation.
	resCarried = "carried"
)

type linInput struct {
	Kind opKind `json:"kind"`
	From reg    `json:"from,omitzero"` // commit: the value the Tx began on; carried: its base
	Gen  string `json:"gen,omitempty"` // commit: the new generation; carried: the Tx's id
}

type linOutput struct {
	Result string `json:"result,omitempty"` // commit
	Value  reg    `json:"value,omitzero"`   // read; carried: the carrier's value
}

// registerModel is the sequential specification of the pointer. An
// unknown commit branches: the state after it is either unchanged or
// swapped. Its return time is open-ended (see recorder.addCommit), so the
// swap may take effect at any time after the commit was invoked.
var registerModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{reg{}} },
	Step: func(state, input, output any) []any {
		st, in, out := state.(reg), input.(linInput), output.(linOutput)
		switch in.Kind {
		case opRead, opCarried:
			if out.Value == st {
				return []any{st}
			}
			return nil
		case opCommit:
			next := reg{Seq: in.From.Seq + 1, Gen: in.Gen}
			switch out.Result {
			case resOK:
				if st == in.From {
					return []any{next}
				}
				return nil
			case resLost:
				if st != in.From {
					return []any{st}
				}
				return nil
			case resUnknown:
				if st == in.From {
					return []any{st, next}
				}
				return []any{st}
			case resAborted:
				return []any{st}
			}
		}
		return nil
	},
	Equal: func(a, b any) bool { return a.(reg) == b.(reg) },
	Hash: func(s any) uint64 {
		h := fnv.New64a()
		r := s.(reg)
		fmt.Fprintf(h, "%d/%s", r.Seq, r.Gen)
		return h.Sum64()
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		switch in.Kind {
		case opRead:
			return "read → " + out.Value.String()
		case opCarried:
			return fmt.Sprintf("Tx %s (base %s) carried by %s", short(in.Gen), in.From, out.Value)
		}
		return fmt.Sprintf("cas %s → %d:%s: %s", in.From, in.From.Seq+1, short(in.Gen), out.Result)
	},
	DescribeState: func(s any) string { return s.(reg).String() },
}

// recorder collects a history. Times are monotonic nanoseconds since start.
type recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

func (r *recorder) add(client int, in linInput, out linOutput, call, ret int64, meta string) {
	if out.Result == resUnknown {
		// It may take effect at any time after its invocation, even after
		// every other operation has returned.
		ret = math.MaxInt64
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret, Metadata: meta})
}

// linStats counts what a run did.
type linStats struct {
	ops, reads, readErrs                   atomic.Int64
	ok, lost, unknown, aborted, beginFails atomic.Int64
	// unknownAlsoLost counts the unknown outcomes whose error matches
	// ErrConflict too (see linRun.unknownAlsoLost).
	unknownAlsoLost atomic.Int64
}

func (s *linStats) String() string {
	return fmt.Sprintf("ops=%d reads=%d (failed %d) commits: ok=%d lost=%d unknown=%d (also matching ErrConflict %d) aborted=%d (begin failed %d)",
		s.ops.Load(), s.reads.Load(), s.readErrs.Load(), s.ok.Load(), s.lost.Load(), s.unknown.Load(), s.unknownAlsoLost.Load(), s.aborted.Load(), s.beginFails.Load())
}

// outcomeOf classifies the error a Commit returned. An unknown outcome
// comes first: its error may wrap the proven loss of an earlier pointer
// write of the same commit, yet the commit may have landed since.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return resOK
	case errors.Is(err, commit.ErrCommitUnknown):
		return resUnknown
	case errors.Is(err, commit.ErrConflict):
		return resLost
	}
	return resAborted
}

// unknownAlsoLost counts and logs an error of an unknown outcome that
// matches ErrConflict as well: it is an unknown outcome (the commit may
// have landed, carried by another writer's), which a caller that tests
// for ErrConflict first would take for a proven loss.
func (r *linRun) unknownAlsoLost(err error) {
	if errors.Is(err, commit.ErrConflict) {
		r.stats.unknownAlsoLost.Add(1)
		r.t.Logf("unknown outcome whose error also matches ErrConflict: %v", err)
	}
}

// linRun is one recorded run on a fresh dataset.
type linRun struct {
	t       *testing.T
	tg      target
	d       *commit.Dataset
	rec     *recorder
	stats   linStats
	clients int
	budget  int64 // operations to run, over all clients
	seed    uint64
	// rebase: every commit keeps the files, adds one of its own (and, one
	// in four, writes the path "shared"), and rebases on a lost CAS.
	rebase bool
	// withJobs: in a rebase run, one operation in eight is a job
	// (commitJob).
	withJobs bool
	jobSeq   atomic.Int64
	jstats   jobStats
	// rebased counts the commits that succeeded after rebasing, on their
	// own or carried; carried those that another writer's commit carried
	// (group commit). rebasedChecked counts the rebased generations of the
	// final chain whose files were checked, groupsChecked those that
	// carried other writers, and unionBad the generations that failed the
	// check.
	rebased, carried                        atomic.Int64
	rebasedChecked, groupsChecked, unionBad atomic.Int64
	// violations counts the invariant violations reported (porcupine's
	// verdict aside).
	violations atomic.Int64
	// clientCtx, if set, gives each client the context its requests carry
	// (the distributed runs send a client's requests to one endpoint).
	clientCtx func(ctx context.Context, client int) context.Context

	mu      sync.Mutex
	results map[string]string  // generation → commit outcome (not carried ones)
	txs     map[string]*txRec  // rebase runs: Tx id → what it staged and how it ended
	jobs    map[string]*jobRec // job id → its operation
}

// txRec is one Tx of a rebase run.
type txRec struct {
	shared bool   // it staged the path "shared"
	res    string // its outcome: resCarried, or one of a commit's
	// gen is the generation its Commit returned (resOK, resCarried: the
	// carrier's) or may still have landed (resUnknown), and seq its seq.
	gen string
	seq uint64
}

// wroteShared reports whether the Tx with id staged "shared".
func (r *linRun) wroteShared(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	tr := r.txs[id]
	return tr != nil && tr.shared
}

func (r *linRun) violation(format string, args ...any) {
	r.t.Helper()
	r.violations.Add(1)
	r.t.Errorf("VIOLATION on %s: "+format, append([]any{r.tg.name}, args...)...)
}

func (r *linRun) run(ctx context.Context) {
	var wg sync.WaitGroup
	for c := range r.clients {
		rnd := rand.New(rand.NewPCG(r.seed, uint64(c)))
		ctx := ctx
		if r.clientCtx != nil {
			ctx = r.clientCtx(ctx, c)
		}
		wg.Go(func() {
			for r.stats.ops.Add(1) <= r.budget {
				switch {
				case rnd.IntN(2) == 1:
					r.read(ctx, c, rnd.IntN(2) == 0)
				case r.rebase && r.withJobs && rnd.IntN(4) == 0:
					r.commitJob(ctx, c, rnd)
				case r.rebase:
					r.commitRebase(ctx, c, rnd.IntN(4) == 0)
				default:
					r.commit(ctx, c)
				}
			}
		})
	}
	wg.Wait()
	r.stats.ops.Add(-int64(r.clients)) // the failed increments that ended the loops
}

// commit runs Begin, stages one file holding the generation id, and
// commits. Begin's pointer read is recorded as a read of its own, in a
// second row per client.
func (r *linRun) commit(ctx context.Context, client int) {
	call := r.rec.now()
	tx, err := r.d.Begin(ctx)
	if err != nil {
		r.stats.beginFails.Add(1)
		return
	}
	from := reg{}
	if b := tx.Base(); b != nil {
		from = reg{Seq: b.Seq, Gen: b.Generation}
	}
	r.rec.add(r.clients+client, linInput{Kind: opRead}, linOutput{Value: from}, call, r.rec.now(), "begin")
	r.stats.reads.Add(1)

	in := linInput{Kind: opCommit, From: from, Gen: tx.Generation()}
	var p *pointer.Pointer
	err = tx.PutBytes(ctx, "data", []byte(tx.Generation()))
	if err == nil {
		p, err = tx.Commit(ctx, commit.CommitOptions{Message: "lin"})
	} else {
		tx.Discard(context.WithoutCancel(ctx))
	}
	ret := r.rec.now()
	res := outcomeOf(err)
	switch res {
	case resOK:
		r.stats.ok.Add(1)
		if p.Generation != tx.Generation() || p.Seq != from.Seq+1 {
			r.violation("commit of %s on %s returned pointer %d:%s", tx.Generation(), from, p.Seq, p.Generation)
		}
	case resUnknown:
		r.stats.unknown.Add(1)
		r.unknownAlsoLost(err)
	case resLost:
		r.stats.lost.Add(1)
	default:
		r.stats.aborted.Add(1)
	}
	meta := ""
	if err != nil {
		meta = err.Error()
		if res == resUnknown || res == resAborted {
			r.t.Logf("%s commit: %v", res, err)
		}
	}
	r.rec.add(client, in, linOutput{Result: res}, call, ret, meta)
	r.mu.Lock()
	r.results[tx.Generation()] = res
	r.mu.Unlock()
}

// commitRebase runs Begin, keeps every file, stages the file "w/<id>"
// holding the Tx's id (and "shared" too if shared), and commits with
// rebase, recording the id in the commit's meta as "own". A rebased
// commit is recorded as a CAS from the head it rebased on last to the
// generation it committed; an unknown one as the last CAS it sent (the
// earlier ones were proven dead before it rebased). A commit that another
// writer's commit carried is recorded as an opCarried observation of that
// commit's pointer value (see opCarried).
func (r *linRun) commitRebase(ctx context.Context, client int, shared bool) {
	call := r.rec.now()
	tx, err := r.d.Begin(ctx)
	if err != nil {
		r.stats.beginFails.Add(1)
		return
	}
	from := reg{}
	if b := tx.Base(); b != nil {
		from = reg{Seq: b.Seq, Gen: b.Generation}
	}
	r.rec.add(r.clients+client, linInput{Kind: opRead}, linOutput{Value: from}, call, r.rec.now(), "begin")
	r.stats.reads.Add(1)

	own := tx.Generation()
	// Known before anything is staged, so that a carrier's generation can
	// be checked against what each writer it carried wrote.
	tr := &txRec{shared: shared, res: resAborted}
	r.mu.Lock()
	r.txs[own] = tr
	r.mu.Unlock()
	err = tx.KeepAll(ctx)
	if err == nil {
		err = tx.PutBytes(ctx, "w/"+own, []byte(own))
	}
	if err == nil && shared {
		err = tx.PutBytes(ctx, "shared", []byte(own))
	}
	if err == nil {
		err = tx.EnableRebase(commit.Rebase{})
	}
	var p *pointer.Pointer
	if err == nil {
		meta := map[string]string{"own": own}
		if shared {
			meta["shared"] = "yes"
		}
		p, err = tx.Commit(ctx, commit.CommitOptions{Message: "lin", Meta: meta})
	} else {
		tx.Discard(context.WithoutCancel(ctx))
	}
	ret := r.rec.now()
	in := linInput{Kind: opCommit, From: from, Gen: own}
	res := outcomeOf(err)
	by := tx.CarriedBy()
	if err != nil && by != "" {
		r.violation("commit of %s on %s failed (%v), yet says it was carried by %s", own, from, err, by)
	}
	switch {
	case err == nil && by != "":
		res = resCarried
		r.stats.ok.Add(1)
		r.carried.Add(1)
		if tx.Rebased() > 0 {
			r.rebased.Add(1)
		}
		switch {
		case p.Generation != by || p.Generation == own:
			r.violation("commit of %s on %s, carried by %s, returned pointer %d:%s", own, from, by, p.Seq, p.Generation)
		case p.Seq <= from.Seq:
			r.violation("commit of %s on %s, carried, returned pointer %d:%s", own, from, p.Seq, p.Generation)
		}
		r.rec.add(client, linInput{Kind: opCarried, From: from, Gen: own}, linOutput{Value: reg{Seq: p.Seq, Gen: p.Generation}}, call, ret, "carried by "+p.Generation)
		r.mu.Lock()
		tr.res, tr.gen, tr.seq = res, p.Generation, p.Seq
		r.mu.Unlock()
		return
	case res == resOK:
		r.stats.ok.Add(1)
		in = linInput{Kind: opCommit, From: reg{Seq: p.Seq - 1, Gen: p.Parent}, Gen: p.Generation}
		if tx.Rebased() > 0 {
			r.rebased.Add(1)
		}
		switch {
		case p.Seq <= from.Seq:
			r.violation("commit of %s on %s returned pointer %d:%s", own, from, p.Seq, p.Generation)
		case tx.Rebased() == 0 && (p.Generation != own || p.Seq != from.Seq+1):
			r.violation("commit of %s on %s, never rebased, returned pointer %d:%s", own, from, p.Seq, p.Generation)
		case tx.Rebased() > 0 && p.Generation == own:
			// A rebase writes a fresh generation id; the Tx's first one
			// was proven dead before it.
			r.violation("commit of %s on %s, rebased %d times, returned its unrebased generation", own, from, tx.Rebased())
		}
	case res == resUnknown:
		r.stats.unknown.Add(1)
		r.unknownAlsoLost(err)
		if a := tx.Attempted(); a != nil {
			in = linInput{Kind: opCommit, From: reg{Seq: a.Seq - 1, Gen: a.Parent}, Gen: a.Generation}
		}
	case res == resLost:
		r.stats.lost.Add(1)
	default:
		r.stats.aborted.Add(1)
	}
	meta := ""
	if err != nil {
		meta = err.Error()
		if res == resUnknown || res == resAborted {
			r.t.Logf("%s commit: %v", res, err)
		}
	}
	r.rec.add(client, in, linOutput{Result: res}, call, ret, meta)
	r.mu.Lock()
	if prev, ok := r.results[in.Gen]; ok && (prev == resOK || res == resOK) {
		r.violation("two commits returned generation %s: %s and %s", in.Gen, prev, res)
	}
	r.results[in.Gen] = res
	tr.res, tr.gen, tr.seq = res, in.Gen, in.From.Seq+1
	r.mu.Unlock()
}

// read resolves the pointer, through Dataset.Open (pointer, manifest and
// the generation's file: I1 and I3) or pointer.Read alone.
func (r *linRun) read(ctx context.Context, client int, open bool) {
	call := r.rec.now()
	var v reg
	var err error
	var snap *commit.Snapshot
	if open {
		snap, err = r.d.Open(ctx)
		if err == nil {
			v = reg{Seq: snap.Seq(), Gen: snap.Generation()}
		}
	} else {
		var p *pointer.Pointer
		p, _, err = pointer.Read(ctx, r.d.Store())
		if err == nil {
			v = reg{Seq: p.Seq, Gen: p.Generation}
		}
	}
	ret := r.rec.now()
	switch {
	case errors.Is(err, commit.ErrNoCommits), errors.Is(err, store.ErrNotExist):
		v, err = reg{}, nil
	case brokenInvariant(err):
		r.violation("read: %v", err)
	}
	if err != nil {
		r.stats.readErrs.Add(1)
		return
	}
	r.stats.reads.Add(1)
	how := "pointer.Read"
	if open {
		how = "Open"
	}
	r.rec.add(client, linInput{Kind: opRead}, linOutput{Value: v}, call, ret, how)
	if snap == nil {
		return
	}
	// The file of the generation's writer, and in a rebase run those of
	// the writers it carried: each holds its Tx's id.
	files := map[string]string{"data": v.Gen}
	if id := snap.Manifest.Meta[job.MetaKey]; r.rebase && id != "" {
		// A job generation: its job's files, each its attempt's.
		for _, e := range snap.Files() {
			if !strings.HasPrefix(e.Path, jobPath(id, "")) {
				continue
			}
			b, err := snap.ReadFile(ctx, e.Path)
			switch {
			case brokenInvariant(err):
				r.violation("snapshot %s: %v", v, err)
			case err == nil:
				r.checkJobFile(fmt.Sprintf("snapshot %s", v), e, b)
			}
		}
		return
	}
	if r.rebase {
		own := snap.Manifest.Meta["own"]
		files = map[string]string{"w/" + own: own}
		for _, c := range snap.Manifest.Carried {
			files["w/"+c.Generation] = c.Generation
		}
	}
	for path, want := range files {
		b, err := snap.ReadFile(ctx, path)
		switch {
		case brokenInvariant(err):
			r.violation("snapshot %s: %v", v, err)
		case err == nil && string(b) != want:
			r.violation("I3: snapshot %s holds %q at %s, want %q", v, b, path, want)
		}
	}
}

// brokenInvariant reports whether a read error can only come from a broken
// invariant, never from a fault: a corrupt, incomplete or collected
// generation behind the pointer (this test runs no collector).
func brokenInvariant(err error) bool {
	return errors.Is(err, commit.ErrChecksum) || errors.Is(err, commit.ErrCollected) ||
		errors.Is(err, generation.ErrCorrupt) || errors.Is(err, pointer.ErrCorrupt)
}

// verify checks the final state without faults: the pointer resolves
// completely (I1), and the parent chain, which lists every value the
// pointer ever had, holds every successful commit and no lost or aborted
// one (I2). The final pointer is added to the history as a last read.
func (r *linRun) verify(ctx context.Context) {
	t := r.t
	d := commit.New(r.tg.clean)
	call := r.rec.now()
	snap, err := d.Open(ctx)
	if errors.Is(err, commit.ErrNoCommits) {
		require.Zero(t, r.stats.ok.Load(), "commits succeeded but there is no pointer")
		require.Zero(t, r.jstats.ok.Load(), "job commits succeeded but there is no pointer")
		return
	}
	require.NoError(t, err, "I1: the final pointer resolves")
	r.rec.add(0, linInput{Kind: opRead}, linOutput{Value: reg{Seq: snap.Seq(), Gen: snap.Generation()}}, call, r.rec.now(), "final")
	if r.rebase {
		if snap.Manifest.Meta[job.MetaKey] == "" {
			own := snap.Manifest.Meta["own"]
			b, err := snap.ReadFile(ctx, "w/"+own)
			require.NoError(t, err, "I1: the final generation's file")
			require.Equal(t, own, string(b), "I3")
		}
		// Every commit keeps the files: the final generation holds every
		// job file the chain ever held.
		for _, e := range snap.Files() {
			b, err := snap.ReadFile(ctx, e.Path)
			require.NoError(t, err, "I1: file %s of the final generation", e.Path)
			if strings.HasPrefix(e.Path, "j/") {
				r.checkJobFile("the final generation", e, b)
			}
		}
	} else {
		b, err := snap.ReadFile(ctx, "data")
		require.NoError(t, err, "I1: the final generation's file")
		require.Equal(t, snap.Generation(), string(b), "I3")
	}

	chain := map[string]uint64{}
	var ms []*generation.Manifest
	for m, err := range d.History(ctx, snap) {
		require.NoError(t, err, "I1: the history chain resolves")
		chain[m.Generation] = m.Seq
		ms = append(ms, m)
	}
	if r.rebase {
		for i, m := range ms {
			var parent *generation.Manifest
			if i+1 < len(ms) {
				parent = ms[i+1]
			}
			r.checkUnion(m, parent)
		}
	}
	require.EqualValues(t, snap.Seq(), len(chain), "the chain holds one generation per seq")
	if r.withJobs {
		r.verifyJobs(ms)
	}
	var appliedUnknown int
	for gen, res := range r.results {
		_, in := chain[gen]
		switch {
		case res == resOK && !in:
			r.violation("I2: successful commit %s never became the pointer's value", gen)
		case (res == resLost || res == resAborted) && in:
			r.violation("I2: commit %s reported %s but is in the history", gen, res)
		case res == resUnknown && in:
			appliedUnknown++
		}
	}
	for gen := range chain {
		if _, ok := r.results[gen]; !ok {
			r.violation("I2: generation %s is in the history but no commit made it", gen)
		}
	}
	var carriedUnknown int
	if r.rebase {
		carriedUnknown = r.verifyApplied(ms)
	}
	t.Logf("final seq %d; %d of %d unknown commits had been applied, %d of them carried", snap.Seq(), appliedUnknown+carriedUnknown, r.stats.unknown.Load(), carriedUnknown)
}

// verifyApplied checks I2 per Tx of a rebase run, on the chain ms: each
// Tx's changes were applied at most once, either in a generation of its
// own (its meta names it as "own") or carried by another writer's (listed
// in its Carried); a successful commit exactly where its Commit said, a
// lost or aborted one nowhere. It returns how many unknown commits were
// carried.
func (r *linRun) verifyApplied(ms []*generation.Manifest) (carriedUnknown int) {
	ownAt := map[string][]*generation.Manifest{}
	carriedAt := map[string][]*generation.Manifest{}
	for _, m := range ms {
		ownAt[m.Meta["own"]] = append(ownAt[m.Meta["own"]], m)
		for _, c := range m.Carried {
			carriedAt[c.Generation] = append(carriedAt[c.Generation], m)
		}
	}
	where := func(ms []*generation.Manifest) []string {
		var out []string
		for _, m := range ms {
			out = append(out, fmt.Sprintf("%d:%s", m.Seq, m.Generation))
		}
		return out
	}
	for id, tr := range r.txs {
		own, carried := ownAt[id], carriedAt[id]
		switch {
		case len(own)+len(carried) > 1:
			r.violation("I2: Tx %s (%s) applied %d times: in its own generations %v, carried by %v", id, tr.res, len(own)+len(carried), where(own), where(carried))
		case tr.res == resCarried && len(carried) == 0:
			r.violation("I2: Tx %s was carried by %d:%s, its Commit says, but no generation of the chain carries it (its own: %v)", id, tr.seq, tr.gen, where(own))
		case tr.res == resCarried && (carried[0].Generation != tr.gen || carried[0].Seq != tr.seq):
			r.violation("I2: Tx %s was carried by %d:%s, its Commit says, but the chain carries it in %v", id, tr.seq, tr.gen, where(carried))
		case tr.res == resOK && len(own) == 0:
			r.violation("I2: Tx %s committed %d:%s, its Commit says, but no generation of the chain is its own (carried by: %v)", id, tr.seq, tr.gen, where(carried))
		case tr.res == resOK && own[0].Generation != tr.gen:
			r.violation("I2: Tx %s committed %d:%s, its Commit says, but the chain has it in %v", id, tr.seq, tr.gen, where(own))
		case (tr.res == resLost || tr.res == resAborted) && len(own)+len(carried) > 0:
			r.violation("I2: Tx %s reported %s but is in the history: its own generations %v, carried by %v", id, tr.res, where(own), where(carried))
		case tr.res == resUnknown && len(carried) == 1:
			carriedUnknown++
		}
	}
	for id, at := range carriedAt {
		if _, ok := r.txs[id]; !ok {
			r.violation("I2: %v carry Tx %s, which no commit of the run made", where(at), id)
		}
	}
	return carriedUnknown
}

// checkUnion verifies that a generation of a rebase run holds exactly its
// parent's files, its own, and those of the writers it carried: for its
// writer and each carried Tx c, "w/<c>", and "shared" if c wrote it, in
// objects staged under c's id. Writers that both wrote "shared" overlap,
// so no generation may combine two of them. A job's generation is
// checkJob's.
func (r *linRun) checkUnion(m, parent *generation.Manifest) {
	if m.Meta[job.MetaKey] != "" {
		r.checkJob(m, parent)
		return
	}
	own := m.Meta["own"]
	want := map[string]string{}
	if parent != nil {
		for _, e := range parent.Entries {
			want[e.Path] = e.Key
		}
	}
	if r.wroteShared(own) != (m.Meta["shared"] != "") {
		r.violation("generation %s (seq %d, Tx %s): meta says shared=%q, the Tx wrote shared: %v", m.Generation, m.Seq, own, m.Meta["shared"], r.wroteShared(own))
	}
	var sharers []string
	writers := []string{own}
	for _, c := range m.Carried {
		writers = append(writers, c.Generation)
	}
	for _, w := range writers {
		want["w/"+w] = generation.DataKey(w, "w/"+w)
		if r.wroteShared(w) {
			want["shared"] = generation.DataKey(w, "shared")
			sharers = append(sharers, w)
		}
	}
	got := map[string]string{}
	for _, e := range m.Entries {
		got[e.Path] = e.Key
	}
	bad := len(sharers) > 1
	if bad {
		r.violation("generation %s (seq %d, Tx %s) combines writers that all wrote \"shared\", which overlap: %v", m.Generation, m.Seq, own, sharers)
	}
	if !maps.Equal(got, want) {
		bad = true
		r.violation("generation %s (seq %d, Tx %s, carrying %d) is not its parent's files plus its own and its carried writers': %s", m.Generation, m.Seq, own, len(m.Carried), filesDiff(got, want))
	}
	if bad {
		r.unionBad.Add(1)
	}
	if m.Generation != own {
		r.rebasedChecked.Add(1)
	}
	if len(m.Carried) > 0 {
		r.groupsChecked.Add(1)
	}
}

// check runs porcupine on the history and reports whether it is
// linearizable. On a violation or a timeout it writes the history and its
// HTML visualisation as artifacts.
func (r *linRun) check(name string) bool {
	t := r.t
	model := registerModel.ToModel()
	res, info := porcupine.CheckOperationsVerbose(model, r.rec.ops, 2*time.Minute)
	if res == porcupine.Ok {
		return true
	}
	dir := artifactDir(t)
	base := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(name))
	if err := porcupine.VisualizePath(model, info, base+".html"); err != nil {
		t.Errorf("visualize: %v", err)
	}
	if b, err := json.MarshalIndent(r.rec.ops, "", " "); err == nil {
		if err := os.WriteFile(base+".json", b, 0o644); err != nil {
			t.Errorf("write the history: %v", err)
		}
	}
	t.Errorf("VIOLATION: history of %d operations is %s as a CAS register; history and visualisation: %s.{json,html}", len(r.rec.ops), res, base)
	return false
}

// artifactDir returns $COMMITPTR_ARTIFACTS, or a new directory that outlives
// the test.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("COMMITPTR_ARTIFACTS")
	if dir == "" {
		var err error
		dir, err = os.MkdirTemp("", "commitptr-artifacts-")
		require.NoError(t, err)
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("artifacts in %s", dir)
	return dir
}

// linPlan is how many runs of how many operations each driver gets.
type linPlan struct {
	runs, ops, clients int
}

// linPlanFor is the plan for driver. In long mode, COMMITPTR_LIN_RUNS sets
// the number of runs per driver (default 10).
func linPlanFor(driver string) linPlan {
	local := driver == "mem" || driver == "fs"
	if long() {
		p := linPlan{runs: 10, ops: 500, clients: 6}
		if local {
			p = linPlan{runs: 10, ops: 1000, clients: 8}
		}
		if v := os.Getenv("COMMITPTR_LIN_RUNS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				panic(fmt.Sprintf("COMMITPTR_LIN_RUNS=%q is not a positive count", v))
			}
			p.runs = n
		}
		return p
	}
	switch {
	case local:
		return linPlan{runs: 2, ops: 500, clients: 6}
	default:
		return linPlan{runs: 2, ops: 250, clients: 4}
	}
}

// TestLinearizable records histories of concurrent commits and reads with
// faults on, and checks each with porcupine as a CAS register (I2).
func TestLinearizable(t *testing.T) {
	var total atomic.Int64
	for _, driver := range drivers() {
		t.Run(driver, func(t *testing.T) {
			plan := linPlanFor(driver)
			sum := faults.Counts{}
			for i := range plan.runs {
				s := seed(t, 1000) + uint64(i)
				in := faults.New(faults.Config{Seed: s, Rates: faults.Uniform(defaultRates), MaxLatency: 20 * time.Millisecond})
				tg := newTarget(t, driver, in)
				r := &linRun{
					t: t, tg: tg, rec: newRecorder(), clients: plan.clients, budget: int64(plan.ops), seed: s,
					d:       commit.New(tg.faulty, commit.WithWriter(fmt.Sprintf("lin-%d", i)), commit.WithConcurrency(2)),
					results: map[string]string{},
				}
				ctx := context.Background()
				start := time.Now()
				r.run(ctx)
				in.SetEnabled(false)
				r.verify(ctx)
				r.check(fmt.Sprintf("lin-%s-seed%d", driver, s))
				c := in.Counts()
				sum = sum.Add(c)
				total.Add(r.stats.ops.Load())
				t.Logf("run %d (seed %d, %s): %s; violations=%d; faults: %s", i, s, time.Since(start).Round(time.Millisecond), &r.stats, r.violations.Load(), c)
			}
			t.Logf("%s total faults: %s", driver, sum)
		})
	}
	t.Logf("%d operations checked", total.Load())
}

// TestLinearizableRebase: the same with rebase on. Every commit keeps the
// files and adds its own, so most lost CASes rebase; one in four also
// writes a shared path, so some overlap and lose. A rebased commit is a
// CAS from the head it saw at the end, and every generation of the final
// chain must hold exactly its parent's files plus its own. Commits that
// lose a CAS also take part in group commit: a commit carried by another
// writer's is an observation of that writer's CAS (opCarried), and the
// carrier's generation must hold the carried writers' files too, each
// Tx applied exactly once.
func TestLinearizableRebase(t *testing.T) {
	var total, rebased, carried, checked, groups atomic.Int64
	for _, driver := range drivers() {
		t.Run(driver, func(t *testing.T) {
			plan := linPlanFor(driver)
			// Every commit keeps all files, each under its own generation,
			// so the reuse proof of a commit costs a HEAD per file so far:
			// long runs are more runs, not longer ones.
			plan.ops = min(plan.ops, 500)
			if driver != "mem" && driver != "fs" {
				plan.ops = min(plan.ops, 250)
			}
			for i := range plan.runs {
				r := rebaseRun(t, driver, "linrb", seed(t, 2000)+uint64(i), plan, false)
				total.Add(r.stats.ops.Load())
				rebased.Add(r.rebased.Load())
				carried.Add(r.carried.Load())
				checked.Add(r.rebasedChecked.Load())
				groups.Add(r.groupsChecked.Load())
			}
		})
	}
	require.Positive(t, rebased.Load(), "no commit rebased: the run tested nothing new")
	require.Positive(t, carried.Load(), "no commit was carried: the run did not exercise group commit")
	t.Logf("%d operations checked; %d commits rebased, %d carried; %d rebased and %d group generations checked for the union",
		total.Load(), rebased.Load(), carried.Load(), checked.Load(), groups.Load())
}

// rebaseRun runs, verifies and checks one rebase run on a fresh store of
// driver, with job operations if withJobs, and logs what it did.
func rebaseRun(t *testing.T, driver, kind string, s uint64, plan linPlan, withJobs bool) *linRun {
	in := faults.New(faults.Config{Seed: s, Rates: faults.Uniform(defaultRates), MaxLatency: 20 * time.Millisecond})
	tg := newTarget(t, driver, in)
	r := &linRun{
		t: t, tg: tg, rec: newRecorder(), clients: plan.clients, budget: int64(plan.ops), seed: s, rebase: true, withJobs: withJobs,
		d:       commit.New(tg.faulty, commit.WithWriter(fmt.Sprintf("%s-%d", kind, s)), commit.WithConcurrency(2)),
		results: map[string]string{}, txs: map[string]*txRec{}, jobs: map[string]*jobRec{},
	}
	ctx := context.Background()
	start := time.Now()
	r.run(ctx)
	in.SetEnabled(false)
	r.verify(ctx)
	r.check(fmt.Sprintf("%s-%s-seed%d", kind, driver, s))
	assert.Zero(t, r.unionBad.Load(), "generations that fail the union check")
	jobs := ""
	if withJobs {
		jobs = fmt.Sprintf("; %s", &r.jstats)
	}
	t.Logf("run seed %d (%s): %s; %d commits rebased, %d carried; %d rebased and %d group generations checked%s; violations=%d; faults: %s",
		s, time.Since(start).Round(time.Millisecond), &r.stats, r.rebased.Load(), r.carried.Load(), r.rebasedChecked.Load(), r.groupsChecked.Load(), jobs, r.violations.Load(), in.Counts())
	return r
}

// TestLinearizabilityOutcomeUnknownWrappingConflict: a commit that lost a
// compare-and-swap, then could not settle its group-commit intent, returns
// an error matching both ErrCommitUnknown and ErrConflict; it may have been
// carried, so the history must record it as unknown, not lost.
func TestLinearizabilityOutcomeUnknownWrappingConflict(t *testing.T) {
	lost := &commit.ConflictError{Seq: 23}
	both := fmt.Errorf("%w: generation g may still be carried by another writer's commit, after: %w", commit.ErrCommitUnknown, lost)
	require.ErrorIs(t, both, commit.ErrConflict)
	assert.Equal(t, resUnknown, outcomeOf(both))
	assert.Equal(t, resLost, outcomeOf(lost))
	assert.Equal(t, resAborted, outcomeOf(errors.New("write manifest: refused")))
	assert.Equal(t, resOK, outcomeOf(nil))
}

// TestLinearizabilityModel checks the model on small hand-written
// histories, so that a pass of TestLinearizable means something.
func TestLinearizabilityModel(t *testing.T) {
	g1, g2 := "gen-1", "gen-2"
	v1 := reg{Seq: 1, Gen: g1}
	read := func(call, ret int64, v reg) porcupine.Operation {
		return porcupine.Operation{Input: linInput{Kind: opRead}, Output: linOutput{Value: v}, Call: call, Return: ret}
	}
	carried := func(call, ret int64, v reg) porcupine.Operation {
		return porcupine.Operation{ClientId: 2, Input: linInput{Kind: opCarried, Gen: "tx-c"}, Output: linOutput{Value: v}, Call: call, Return: ret}
	}
	cas := func(call, ret int64, from reg, gen, res string) porcupine.Operation {
		if res == resUnknown {
			ret = math.MaxInt64
		}
		return porcupine.Operation{ClientId: 1, Input: linInput{Kind: opCommit, From: from, Gen: gen}, Output: linOutput{Result: res}, Call: call, Return: ret}
	}
	for _, c := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"ok then read", []porcupine.Operation{cas(0, 1, reg{}, g1, resOK), read(2, 3, v1)}, true},
		{"ok but stale read after", []porcupine.Operation{cas(0, 1, reg{}, g1, resOK), read(2, 3, reg{})}, false},
		{"two ok from the same base", []porcupine.Operation{cas(0, 1, reg{}, g1, resOK), cas(0, 1, reg{}, g2, resOK)}, false},
		{"lost but visible", []porcupine.Operation{cas(0, 1, reg{}, g1, resLost), read(2, 3, v1)}, false},
		{"lost with nobody winning", []porcupine.Operation{cas(0, 1, reg{}, g1, resLost), read(2, 3, reg{})}, false},
		{"lost to a winner", []porcupine.Operation{cas(0, 1, reg{}, g2, resOK), cas(0, 2, reg{}, g1, resLost)}, true},
		{"unknown, seen later", []porcupine.Operation{cas(0, 1, reg{}, g1, resUnknown), read(2, 3, reg{}), read(4, 5, v1)}, true},
		{"unknown, never seen", []porcupine.Operation{cas(0, 1, reg{}, g1, resUnknown), read(2, 3, reg{})}, true},
		{"unknown, seen then gone", []porcupine.Operation{cas(0, 1, reg{}, g1, resUnknown), read(2, 3, v1), read(4, 5, reg{})}, false},
		{"aborted but visible", []porcupine.Operation{cas(0, 1, reg{}, g1, resAborted), read(2, 3, v1)}, false},
		{"carried by a concurrent cas", []porcupine.Operation{carried(0, 3, v1), cas(1, 2, reg{}, g1, resOK)}, true},
		{"carried by an unknown cas", []porcupine.Operation{cas(0, 1, reg{}, g1, resUnknown), carried(2, 3, v1)}, true},
		{"carried, no carrier", []porcupine.Operation{carried(0, 1, v1)}, false},
		{"carried before its carrier", []porcupine.Operation{carried(0, 1, v1), cas(2, 3, reg{}, g1, resOK)}, false},
		{"carried by a replaced value", []porcupine.Operation{cas(0, 1, reg{}, g1, resOK), cas(2, 3, v1, g2, resOK), carried(4, 5, v1)}, false},
		{"carried, then gone", []porcupine.Operation{cas(0, 1, reg{}, g1, resUnknown), carried(2, 3, v1), read(4, 5, reg{})}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.ok, porcupine.CheckOperations(registerModel.ToModel(), c.ops))
		})
	}
}

// ignoringPreconditions drops If-Match and If-None-Match, as some
// S3-compatible stores silently do.
type ignoringPreconditions struct{ store.Store }

func (s ignoringPreconditions) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	opts.IfMatch, opts.IfNoneMatch = "", false
	return s.Store.Put(ctx, key, body, opts)
}

// TestLinearizabilityCatchesBrokenStore runs the harness on a store that
// ignores preconditions: two racing commits both succeed, and the checker
// must say so and leave the artifacts.
func TestLinearizabilityCatchesBrokenStore(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	d := commit.New(ignoringPreconditions{m})
	rec := newRecorder()
	var txs []*commit.Tx
	var calls []int64
	for range 2 {
		calls = append(calls, rec.now())
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.PutBytes(ctx, "data", []byte(tx.Generation())))
		txs = append(txs, tx)
	}
	for i, tx := range txs {
		_, err := tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err, "the broken store lets both commits through")
		rec.add(i, linInput{Kind: opCommit, Gen: tx.Generation()}, linOutput{Result: resOK}, calls[i], rec.now(), "")
	}
	res, info := porcupine.CheckOperationsVerbose(registerModel.ToModel(), rec.ops, time.Minute)
	require.Equal(t, porcupine.Illegal, res)
	html := filepath.Join(t.TempDir(), "broken.html")
	require.NoError(t, porcupine.VisualizePath(registerModel.ToModel(), info, html))
	fi, err := os.Stat(html)
	require.NoError(t, err)
	assert.Positive(t, fi.Size())
}
