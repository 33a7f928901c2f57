package commit_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/ctxtime"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// orderLog is a store that records when each request starts and when its
// answer is back, in one sequence, and delays each request as a store
// across a network would, so that requests sent together overlap.
type orderLog struct {
	store.Store
	latency time.Duration
	// proofLatency is that of HEADs and LISTs, the reuse proof's requests:
	// longer than an upload's, so a proof still under way when the uploads
	// are done shows.
	proofLatency time.Duration

	mu     sync.Mutex
	events []orderEvent
}

type orderEvent struct {
	op  store.Op
	key string
	end bool // the answer is back (false: the request starts)
}

func (l *orderLog) Unwrap() store.Store { return l.Store }

func (l *orderLog) note(op store.Op, key string, end bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, orderEvent{op, key, end})
}

// around records the start of a request, waits the latency, sends it and
// records its end.
func (l *orderLog) around(ctx context.Context, op store.Op, key string, send func() error) error {
	l.note(op, key, false)
	defer l.note(op, key, true)
	latency := l.latency
	if op == store.OpHead || op == store.OpList {
		latency = l.proofLatency
	}
	if err := ctxtime.Sleep(ctx, latency); err != nil {
		return err
	}
	return send()
}

func (l *orderLog) Get(ctx context.Context, key string) (r io.ReadCloser, a store.Attrs, err error) {
	err = l.around(ctx, store.OpGet, key, func() error { r, a, err = l.Store.Get(ctx, key); return err })
	return r, a, err
}

func (l *orderLog) Head(ctx context.Context, key string) (a store.Attrs, err error) {
	err = l.around(ctx, store.OpHead, key, func() error { a, err = l.Store.Head(ctx, key); return err })
	return a, err
}

func (l *orderLog) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (a store.Attrs, err error) {
	err = l.around(ctx, store.OpPut, key, func() error { a, err = l.Store.Put(ctx, key, body, opts); return err })
	return a, err
}

func (l *orderLog) Delete(ctx context.Context, key string, opts store.DeleteOptions) error {
	return l.around(ctx, store.OpDelete, key, func() error { return l.Store.Delete(ctx, key, opts) })
}

func (l *orderLog) DeleteMany(ctx context.Context, keys []string) error {
	return l.around(ctx, store.OpDeleteMany, strings.Join(keys, ","), func() error { return l.Store.DeleteMany(ctx, keys) })
}

func (l *orderLog) List(ctx context.Context, req store.ListRequest) (p store.ListPage, err error) {
	err = l.around(ctx, store.OpList, req.Prefix, func() error { p, err = l.Store.List(ctx, req); return err })
	return p, err
}

func (l *orderLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = nil
}

// requestClass picks the requests of one step of a commit.
type requestClass struct {
	name  string
	match func(op store.Op, key string) bool
}

// mustPrecede fails t unless every request of a that is sent has its
// answer back before any request of b starts, and each class was sent.
func (l *orderLog) mustPrecede(t *testing.T, a, b requestClass) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	lastEndA, firstStartB := -1, -1
	for i, e := range l.events {
		if a.match(e.op, e.key) && e.end {
			lastEndA = i
		}
		if b.match(e.op, e.key) && !e.end && firstStartB < 0 {
			firstStartB = i
		}
	}
	if lastEndA < 0 || firstStartB < 0 {
		t.Errorf("%s (sent: %t) and %s (sent: %t): want both sent\n%s", a.name, lastEndA >= 0, b.name, firstStartB >= 0, l.timeline())
		return
	}
	if firstStartB < lastEndA {
		t.Errorf("%s started (event %d) before the last answer to %s was back (event %d)\n%s", b.name, firstStartB, a.name, lastEndA, l.timeline())
	}
}

// mustOverlap fails t unless a request of b starts before the last answer
// to a is back: b does not wait for a.
func (l *orderLog) mustOverlap(t *testing.T, a, b requestClass) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	lastEndA, firstStartB := -1, -1
	for i, e := range l.events {
		if a.match(e.op, e.key) && e.end {
			lastEndA = i
		}
		if b.match(e.op, e.key) && !e.end && firstStartB < 0 {
			firstStartB = i
		}
	}
	if lastEndA < 0 || firstStartB < 0 || firstStartB > lastEndA {
		t.Errorf("%s waited for %s; want it sent while they are under way\n%s", b.name, a.name, l.timeline())
	}
}

func (l *orderLog) timeline() string {
	var b strings.Builder
	for i, e := range l.events {
		dir := "->"
		if e.end {
			dir = "<-"
		}
		fmt.Fprintf(&b, "  %2d %s %s %s\n", i, dir, e.op, e.key)
	}
	return b.String()
}

// TestRequestOrderKeepsEachGuard: an incremental commit that uploads two
// changed files and reuses a third sends each request only once what it
// depends on has been answered: the data PUTs after the pointer GET,
// whose Date is the staging start that must precede every staged object
// (C1, held against the collector's horizon), and after the base manifest,
// which says which files are reused; the manifest PUT after the last data
// PUT and after the proof that the reused object still exists (C2, C3);
// the pointer PUT after the manifest PUT (C5). The proof itself goes out
// while the data PUTs are under way. It sends the floor's requests and no
// group-commit LIST, having seen no contention.
func TestRequestOrderKeepsEachGuard(t *testing.T) {
	ctx := context.Background()
	l := &orderLog{Store: mem.New(), latency: 20 * time.Millisecond, proofLatency: 100 * time.Millisecond}
	d := commit.New(l, commit.WithConcurrency(4))
	dir := writeFiles(t, 3, "1")
	_, base := putDir(t, d, dir)
	for _, name := range []string{"0000", "0001"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "d", name), []byte("changed "+name), 0o644))
	}

	l.reset()
	// A Dataset of its own, as a new process has: it reads the base
	// manifest, which the one that committed the base holds.
	tx, err := commit.New(l, commit.WithConcurrency(4)).Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.AddDir(ctx, dir))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, tx.Reused(), "files reused")

	c := commitRequests(base, tx)
	pointerGet, baseGet, dataPut, proof, manifestPut, pointerPut := c[0], c[1], c[2], c[3], c[4], c[5]
	l.mustPrecede(t, pointerGet, baseGet)
	l.mustPrecede(t, pointerGet, dataPut)
	l.mustPrecede(t, baseGet, dataPut)
	l.mustPrecede(t, dataPut, manifestPut)
	l.mustPrecede(t, proof, manifestPut)
	l.mustPrecede(t, manifestPut, pointerPut)
	// The proof needs the base manifest, not the new objects: it costs no
	// round trip of its own.
	l.mustOverlap(t, dataPut, proof)

	// The floor of an incremental commit: K' + 4 + V, and nothing else.
	l.mustCount(t, c, map[string]int{"the pointer GET": 1, "the base manifest GET": 1, "a data PUT": 2, "the reuse proof": 1, "the manifest PUT": 1, "the pointer PUT": 1})
}

// commitRequests returns the classes of the requests of tx's commit on
// base: the pointer GET, the base manifest GET, the data PUTs, the reuse
// proof, the manifest PUT and the pointer PUT.
func commitRequests(base *pointer.Pointer, tx *commit.Tx) []requestClass {
	newManifest := generation.ManifestKey(tx.Generation())
	newPrefix := strings.TrimSuffix(newManifest, "_manifest")
	return []requestClass{
		{"the pointer GET", func(op store.Op, k string) bool { return op == store.OpGet && k == pointer.Key }},
		{"the base manifest GET", func(op store.Op, k string) bool {
			return op == store.OpGet && k == generation.ManifestKey(base.Generation)
		}},
		{"a data PUT", func(op store.Op, k string) bool {
			return op == store.OpPut && strings.HasPrefix(k, newPrefix) && k != newManifest
		}},
		{"the reuse proof", func(op store.Op, k string) bool {
			return (op == store.OpHead || op == store.OpList) && strings.HasPrefix(k, "_gen/"+base.Generation+"/")
		}},
		{"the manifest PUT", func(op store.Op, k string) bool { return op == store.OpPut && k == newManifest }},
		{"the pointer PUT", func(op store.Op, k string) bool { return op == store.OpPut && k == pointer.Key }},
	}
}

// mustCount fails t unless the requests sent are those of want, by the
// name of their class in classes, and no other.
func (l *orderLog) mustCount(t *testing.T, classes []requestClass, want map[string]int) {
	t.Helper()
	got := map[string]int{}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if e.end {
			continue
		}
		name := "other: " + e.op.String() + " " + e.key
		for _, c := range classes {
			if c.match(e.op, e.key) {
				name = c.name
			}
		}
		got[name]++
	}
	require.Equal(t, want, got, "requests of the commit\n%s", l.timeline())
}

// TestRequestOrderAheadKeepsEachGuard: the same commit on a Tx of
// BeginAhead, in a new process whose cache holds the base manifest. The
// changed files' PUTs and the proof of the file that matches the
// expected manifest go out while the pointer GET is under way; the
// manifest PUT waits for it (and for the last data PUT and the proof),
// and the pointer PUT for the manifest PUT. No manifest GET: three
// requests in a row, the floor.
func TestRequestOrderAheadKeepsEachGuard(t *testing.T) {
	ctx := context.Background()
	l := &orderLog{Store: mem.New(), latency: 20 * time.Millisecond, proofLatency: 100 * time.Millisecond}
	cache := t.TempDir()
	dir := writeFiles(t, 3, "1")
	_, base := putDir(t, commit.New(l, commit.WithConcurrency(4), commit.WithManifestCache(cache)), dir)
	for _, name := range []string{"0000", "0001"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "d", name), []byte("changed "+name), 0o644))
	}

	l.reset()
	tx, err := commit.New(l, commit.WithConcurrency(4), commit.WithManifestCache(cache)).BeginAhead(ctx, base.ManifestSHA256)
	require.NoError(t, err)
	require.NoError(t, tx.AddDir(ctx, dir))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, tx.Reused(), "files reused")

	c := commitRequests(base, tx)
	pointerGet, dataPut, proof, manifestPut, pointerPut := c[0], c[2], c[3], c[4], c[5]
	l.mustOverlap(t, pointerGet, dataPut)
	l.mustOverlap(t, pointerGet, proof)
	l.mustPrecede(t, pointerGet, manifestPut)
	l.mustPrecede(t, dataPut, manifestPut)
	l.mustPrecede(t, proof, manifestPut)
	l.mustPrecede(t, manifestPut, pointerPut)
	l.mustCount(t, c, map[string]int{"the pointer GET": 1, "a data PUT": 2, "the reuse proof": 1, "the manifest PUT": 1, "the pointer PUT": 1})
}
