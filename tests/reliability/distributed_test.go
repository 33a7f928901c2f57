//go:build distributed

package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/s3"
)

// The distributed run points the linearizability and soak workloads at an
// S3 deployment of several nodes that scripts/distributed.sh starts, and
// whose nodes it kills and pauses while they run. The file is built only
// with the tag "distributed", so that `go test ./...` neither runs nor
// skips it; the script runs it as
//
//	go test -race -tags distributed -run '^TestDistributed$' ./tests/reliability
//
// with these environment variables:
//
//	COMMITPTR_DIST_ENDPOINTS  the deployment's S3 endpoints, comma-separated (required)
//	COMMITPTR_DIST_BUCKET     a bucket they all serve (required)
//	COMMITPTR_DIST_DURATION   how long the workloads run (default 10m)
//	COMMITPTR_DIST_SYNC       a directory for the handshake with the fault injector:
//	                          the test creates "started" when the workloads start and
//	                          "done" when they end, and verifies once "healed" exists
//	COMMITPTR_DIST_RESULT     a file for the run's figures, as JSON
//
// The credentials and region come from the AWS_* variables.
const (
	linClients = 4   // clients per linearizability round
	linBudget  = 200 // operations per round
	// healLimit bounds the wait for the fault injector to bring every
	// node back, and then for every endpoint to answer.
	healLimit = 10 * time.Minute
)

// distTimeouts bound each request, so that one sent to a paused node
// ends while the node is still paused, as an unknown outcome.
var distTimeouts = store.Timeouts{Connect: 5 * time.Second, Header: 15 * time.Second, Idle: 15 * time.Second}

// client names the endpoint a client's requests go to (an index, modulo
// their number) and the client, for the traces.
type client struct{ endpoint, id int }

type clientKey struct{}

// asClient returns ctx carrying c, for a spread store.
func asClient(ctx context.Context, c client) context.Context {
	return context.WithValue(ctx, clientKey{}, c)
}

// spread is one bucket behind several endpoints of a deployment. A request
// goes to the endpoint its context names (asClient), else to one at
// random, as behind a load balancer. With a log, every request is traced
// there, with its endpoint, client, condition, outcome and timing.
type spread struct {
	eps []store.Store
	log *slog.Logger
}

func (s spread) pick(ctx context.Context) (int, store.Store) {
	i := rand.IntN(len(s.eps))
	if c, ok := ctx.Value(clientKey{}).(client); ok {
		i = c.endpoint % len(s.eps)
	}
	return i, s.eps[i]
}

// trace logs one request sent to endpoint i at start.
func (s spread) trace(ctx context.Context, i int, op, key string, start time.Time, err error, args ...any) {
	if s.log == nil {
		return
	}
	c, ok := ctx.Value(clientKey{}).(client)
	if !ok {
		c.id = -1
	}
	args = append(args, "endpoint", i, "client", c.id, "key", key,
		"start", start.Format(time.RFC3339Nano), "took", time.Since(start))
	if err != nil {
		args = append(args, "error", err.Error())
	}
	s.log.Info(op, args...)
}

func (s spread) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	i, st := s.pick(ctx)
	start := time.Now()
	rc, a, err := st.Get(ctx, key)
	s.trace(ctx, i, "GET", key, start, err, "etag", a.ETag)
	return rc, a, err
}

func (s spread) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	i, st := s.pick(ctx)
	start := time.Now()
	rc, a, err := st.GetRange(ctx, key, off, n)
	s.trace(ctx, i, "GET", key, start, err, "etag", a.ETag, "offset", off, "length", n)
	return rc, a, err
}

func (s spread) Head(ctx context.Context, key string) (store.Attrs, error) {
	i, st := s.pick(ctx)
	start := time.Now()
	a, err := st.Head(ctx, key)
	s.trace(ctx, i, "HEAD", key, start, err, "etag", a.ETag)
	return a, err
}

func (s spread) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	i, st := s.pick(ctx)
	start := time.Now()
	a, err := st.Put(ctx, key, body, opts)
	s.trace(ctx, i, "PUT", key, start, err, "if_match", opts.IfMatch, "if_none_match", opts.IfNoneMatch, "etag", a.ETag)
	return a, err
}

func (s spread) Delete(ctx context.Context, key string, opts store.DeleteOptions) error {
	i, st := s.pick(ctx)
	start := time.Now()
	err := st.Delete(ctx, key, opts)
	s.trace(ctx, i, "DELETE", key, start, err, "if_match", opts.IfMatch)
	return err
}

func (s spread) DeleteMany(ctx context.Context, keys []string) error {
	i, st := s.pick(ctx)
	start := time.Now()
	err := st.DeleteMany(ctx, keys)
	s.trace(ctx, i, "DELETEMANY", strings.Join(keys, " "), start, err)
	return err
}

func (s spread) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	i, st := s.pick(ctx)
	start := time.Now()
	page, err := st.List(ctx, req)
	var keys []string
	for _, o := range page.Objects {
		keys = append(keys, o.Key)
	}
	s.trace(ctx, i, "LIST", req.Prefix, start, err, "start_after", req.StartAfter, "got", strings.Join(keys, " "))
	return page, err
}

func (s spread) Versioning(ctx context.Context) (store.Versioning, error) {
	_, st := s.pick(ctx)
	return store.BucketVersioning(ctx, st)
}

func (s spread) SweepLeftovers(ctx context.Context, prefix string, olderThan time.Duration) (store.Leftovers, error) {
	_, st := s.pick(ctx)
	return store.SweepLeftovers(ctx, st, prefix, olderThan)
}

// traceLog is a debug logger writing JSON lines to a new file at path.
type traceLog struct {
	path string
	f    *os.File
	log  *slog.Logger
}

func newTraceLog(t *testing.T, path string) *traceLog {
	f, err := os.Create(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return &traceLog{path: path, f: f, log: slog.New(slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

// keep closes the trace, and removes it unless keep.
func (l *traceLog) keep(t *testing.T, keep bool) {
	l.f.Close()
	if keep {
		t.Logf("trace of requests and debug log: %s", l.path)
		return
	}
	os.Remove(l.path)
}

// distFigures are what a run did and found, for the script's report.
type distFigures struct {
	Endpoints []string `json:"endpoints"`
	Prefix    string   `json:"prefix"`
	Seed      uint64   `json:"seed"`
	Ran       string   `json:"ran"`
	// Operations counts every operation of both workloads; Unknown the
	// commits and increments whose outcome was unknown.
	Operations int64 `json:"operations"`
	Unknown    int64 `json:"unknown_outcomes"`
	// Violations counts the invariant violations, the rounds whose history
	// is not linearizable among them; VerifyFailed the verifications that
	// could not finish (an error reading the final state).
	Violations      int64 `json:"violations"`
	NotLinearizable int   `json:"not_linearizable_rounds"`
	VerifyFailed    int   `json:"verifications_failed"`
	LeaseViolations int   `json:"lease_violations"`
	// ObjectsLost counts the objects that a kept generation references and
	// that are gone, of ObjectsChecked.
	ObjectsLost    int    `json:"objects_lost"`
	ObjectsChecked int    `json:"objects_checked"`
	Rounds         int    `json:"lin_rounds"`
	LinOps         int64  `json:"lin_operations"`
	LinOK          int64  `json:"lin_commits_ok"`
	LinLost        int64  `json:"lin_commits_lost"`
	LinUnknown     int64  `json:"lin_commits_unknown"`
	LinAborted     int64  `json:"lin_commits_aborted"`
	Rebased        int64  `json:"lin_rebased"`
	Carried        int64  `json:"lin_carried"`
	SoakOps        int64  `json:"soak_operations"`
	Soak           string `json:"soak"`
}

// TestDistributed runs linearizability rounds (plain commits, and commits
// with rebase and group commit), each a porcupine-checked history on a
// dataset of its own, beside a soak (writers, pinning readers, counters,
// collectors, lease contenders) for COMMITPTR_DIST_DURATION against the
// endpoints of COMMITPTR_DIST_ENDPOINTS, while the script injects node
// failures. Then, with every node back, it checks each round's history and
// I1–I3, the soak's I1–I5 and I7, exact counters, and that no object a kept
// generation references is lost.
func TestDistributed(t *testing.T) {
	urls := strings.Split(os.Getenv("COMMITPTR_DIST_ENDPOINTS"), ",")
	bucket := os.Getenv("COMMITPTR_DIST_BUCKET")
	if urls[0] == "" || bucket == "" {
		t.Fatal("COMMITPTR_DIST_ENDPOINTS and COMMITPTR_DIST_BUCKET name the deployment; scripts/distributed.sh sets them")
	}
	require.NotEmpty(t, os.Getenv("AWS_ACCESS_KEY_ID"), "the deployment's credentials, in AWS_ACCESS_KEY_ID")
	dur := envDuration(t, "COMMITPTR_DIST_DURATION", 10*time.Minute)
	syncDir := os.Getenv("COMMITPTR_DIST_SYNC")
	sd := seed(t, 4242)
	ctx := context.Background()

	var eps []store.Store
	for _, u := range urls {
		tr := newHTTPTransport()
		t.Cleanup(tr.CloseIdleConnections)
		s, err := s3.New(ctx, s3.Options{Bucket: bucket, Endpoint: u, PathStyle: true, HTTPClient: &http.Client{Transport: tr}, Timeouts: distTimeouts})
		require.NoError(t, err, "endpoint %s", u)
		eps = append(eps, s)
	}
	fig := distFigures{Endpoints: urls, Seed: sd, Prefix: fmt.Sprintf("dist-%d/", time.Now().UnixNano())}
	// Every request is traced, with the Datasets' debug logs beside; the
	// traces of rounds and a soak that found nothing wrong are removed.
	artifacts := artifactDir(t)
	at := func(name string) string { return filepath.Join(artifacts, fig.Prefix[:len(fig.Prefix)-1]+"-"+name) }
	soakLog := newTraceLog(t, at("soak.jsonl"))
	root := store.WithPrefix(spread{eps, soakLog.log}, fig.Prefix)
	awaitHealthy(t, eps, fig.Prefix)
	tg := target{name: "distributed", faulty: root, clean: root}

	// The workloads: a soak, and two lanes of linearizability rounds, one
	// of plain commits and one with rebase, until the deadline.
	s := newSoak(t, tg, dur, commit.WithLogger(soakLog.log))
	var mu sync.Mutex
	var rounds []*linRun
	traces := map[*linRun]*traceLog{}
	lane := func(rebase bool, first int) {
		kind := "lin"
		if rebase {
			kind = "linrb"
		}
		for n := 0; s.running(); n++ {
			name := fmt.Sprintf("%s-%03d", kind, n)
			tl := newTraceLog(t, at(name+".jsonl"))
			st := store.WithPrefix(spread{eps, tl.log}, fig.Prefix+name+"/")
			r := &linRun{
				t: t, tg: target{name: name, faulty: st, clean: st},
				rec: newRecorder(), clients: linClients, budget: linBudget, seed: sd + uint64(n), rebase: rebase,
				d:       commit.New(st, commit.WithWriter(kind), commit.WithConcurrency(2), commit.WithLogger(tl.log)),
				results: map[string]string{}, txs: map[string]*txRec{},
				// Each client talks to one endpoint, the clients of a round
				// to all of them.
				clientCtx: func(ctx context.Context, c int) context.Context {
					return asClient(ctx, client{endpoint: first + c, id: c})
				},
			}
			r.run(ctx)
			mu.Lock()
			rounds = append(rounds, r)
			traces[r] = tl
			mu.Unlock()
		}
	}
	signal(t, syncDir, "started")
	start := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { s.run(sd) })
	wg.Go(func() { lane(false, 0) })
	wg.Go(func() { lane(true, 1) })
	wg.Wait()
	fig.Ran = time.Since(start).Round(time.Second).String()
	signal(t, syncDir, "done")
	if syncDir != "" {
		awaitFile(t, filepath.Join(syncDir, "healed"), healLimit)
	}
	awaitHealthy(t, eps, fig.Prefix)

	defer func() {
		t.Logf("DISTRIBUTED %s on %v: %d operations, %d unknown outcomes, %d violations (%d rounds not linearizable, %d of the lease), %d verifications failed, %d of %d objects lost",
			fig.Ran, urls, fig.Operations, fig.Unknown, fig.Violations, fig.NotLinearizable, fig.LeaseViolations, fig.VerifyFailed, fig.ObjectsLost, fig.ObjectsChecked)
		if p := os.Getenv("COMMITPTR_DIST_RESULT"); p != "" {
			b, err := json.MarshalIndent(fig, "", "  ")
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, append(b, '\n'), 0o644))
		}
	}()

	// The soak's checks, and its objects.
	if !t.Run("soak", func(t *testing.T) { s.t = t; s.verify() }) && len(s.violations) == 0 {
		fig.VerifyFailed++
	}
	soakLog.keep(t, t.Failed())
	fig.SoakOps = s.stats.ops()
	fig.Soak = s.stats.String()
	fig.Unknown += s.stats.commitUnknown.Load() + s.stats.incUnknown.Load()
	fig.Violations += int64(len(s.violations))
	for _, v := range s.violations {
		switch {
		case strings.HasPrefix(v, "object lost"):
			fig.ObjectsLost++
		case strings.HasPrefix(v, "I5:"):
			fig.LeaseViolations++
		}
	}

	// Each round's history, its final state, and its objects: the rounds
	// run no collector, so every object of every generation must be there.
	fig.Rounds = len(rounds)
	for _, r := range rounds {
		t.Run(r.tg.name, func(t *testing.T) {
			if !t.Run("verify", func(t *testing.T) { r.t = t; r.verify(ctx) }) && r.violations.Load() == 0 {
				fig.VerifyFailed++
			}
			r.t = t
			if !r.check(fmt.Sprintf("dist-%s-seed%d", r.tg.name, r.seed)) {
				fig.NotLinearizable++
				fig.Violations++
			} else if t.Failed() {
				// check writes the history only when porcupine rejects it.
				b, err := json.MarshalIndent(r.rec.ops, "", " ")
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(at(r.tg.name+".history.json"), b, 0o644))
			}
			lost, checked := lostObjects(ctx, t, r.tg.clean)
			traces[r].keep(t, t.Failed())
			fig.ObjectsLost += lost
			fig.ObjectsChecked += checked
			fig.Violations += r.violations.Load() + int64(lost)
			fig.LinOps += r.stats.ops.Load()
			fig.LinOK += r.stats.ok.Load()
			fig.LinLost += r.stats.lost.Load()
			fig.LinUnknown += r.stats.unknown.Load()
			fig.LinAborted += r.stats.aborted.Load()
			fig.Rebased += r.rebased.Load()
			fig.Carried += r.carried.Load()
			t.Logf("%s: %s; %d rebased, %d carried; violations=%d", r.tg.name, &r.stats, r.rebased.Load(), r.carried.Load(), r.violations.Load())
		})
	}
	fig.Unknown += fig.LinUnknown
	fig.Operations = fig.LinOps + fig.SoakOps
	require.Positive(t, fig.LinOK, "no commit of the linearizability rounds succeeded: the run checked nothing")
	require.Positive(t, s.stats.commitOK.Load(), "no commit of the soak succeeded: the run checked nothing")
}

// lostObjects heads every object that a generation of the dataset's chain
// references and counts those that are gone; a generation whose manifest is
// gone counts as one lost object and ends the walk.
func lostObjects(ctx context.Context, t *testing.T, st store.Store) (lost, checked int) {
	d := commit.New(st)
	snap, err := d.Open(ctx)
	switch {
	case errors.Is(err, commit.ErrNoCommits):
		return 0, 0
	case err != nil:
		t.Errorf("objects: open the final pointer: %v", err)
		return 0, 0
	}
	for m, err := range d.History(ctx, snap) {
		if err != nil {
			lost++
			t.Errorf("VIOLATION: object lost: the history chain breaks: %v", err)
			return lost, checked
		}
		for _, k := range m.Keys() {
			checked++
			_, err := st.Head(ctx, k)
			switch {
			case errors.Is(err, store.ErrNotExist):
				lost++
				t.Errorf("VIOLATION: object lost: %q of generation %s (seq %d)", k, m.Generation, m.Seq)
			case err != nil:
				t.Errorf("objects: head %q: %v", k, err)
			}
		}
	}
	return lost, checked
}

// awaitHealthy waits until every endpoint writes, reads back and deletes
// an object three times in a row, within healLimit.
func awaitHealthy(t *testing.T, eps []store.Store, prefix string) {
	t.Helper()
	deadline := time.Now().Add(healLimit)
	for i, s := range eps {
		key := fmt.Sprintf("%shealth/%d", prefix, i)
		var err error
		for ok := 0; ok < 3; {
			if time.Now().After(deadline) {
				t.Fatalf("endpoint %d did not answer within %s: %v", i, healLimit, err)
			}
			if err = roundTrip(s, key); err != nil {
				ok = 0
				time.Sleep(time.Second)
				continue
			}
			ok++
		}
	}
}

// roundTrip writes key, reads it back and deletes it.
func roundTrip(s store.Store, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	want := []byte(key)
	if _, err := s.Put(ctx, key, bytes.NewReader(want), store.PutOptions{}); err != nil {
		return err
	}
	rc, _, err := s.Get(ctx, key)
	if err != nil {
		return err
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("read %q back from %q", got, key)
	}
	return s.Delete(ctx, key, store.DeleteOptions{})
}

// signal creates the file name in the handshake directory dir, if any.
func signal(t *testing.T, dir, name string) {
	if dir == "" {
		return
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
}

// awaitFile waits until path exists, within limit.
func awaitFile(t *testing.T, path string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s: the fault injector did not bring every node back", path, limit)
		}
		time.Sleep(time.Second)
	}
}
