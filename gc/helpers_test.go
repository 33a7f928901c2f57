package gc_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// waitOlder returns how long to wait for an object written now to count
// as older than limit to the collector, which wants the limit plus a second
// (and nothing for a zero limit) by the store's clock. S3 times have
// one-second resolution and a server may cache its Date header for up to a
// second, so the observed age can be almost two seconds short of the true
// one.
func waitOlder(limit time.Duration) time.Duration {
	if limit > 0 {
		limit += time.Second
	}
	ceil := (limit + time.Second - 1).Truncate(time.Second)
	return ceil + 1200*time.Millisecond
}

// storeFor returns a fresh in-memory store, for tests of the collector's
// logic rather than of a driver.
func storeFor(testing.TB) store.Store { return mem.New() }

// memStore returns an in-memory store on the given clock.
func memStore(now func() time.Time) store.Store { return mem.New(mem.WithClock(now)) }

// storeClock is a store's clock that a test moves by hand (memStore): ages
// and lease expiry without waiting, however loaded the machine.
type storeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newStoreClock() *storeClock {
	return &storeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *storeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *storeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// strict are collector options with the shortest retention: the current
// generation and its parent, no grace, and no minimum orphan age. The
// lease TTL is long, so that a loaded machine does not use it up between
// two renewals (a 10 s one ran out during one delete batch on fs).
func strict() gc.Options {
	return gc.Options{Keep: 1, Grace: -1, OrphanAge: -1, LeaseTTL: time.Minute, Owner: "test"}
}

// dataset opens a dataset on s with a fast retry policy.
func dataset(s store.Store) *commit.Dataset {
	return commit.New(s, commit.WithWriter("test"), commit.WithRetry(commit.Retry{Attempts: 30, Base: 2 * time.Millisecond, Max: 50 * time.Millisecond}))
}

// publish commits files (path → content) as one new generation. With keep,
// the generation starts from every file of the current one (incremental).
func publish(t testing.TB, d *commit.Dataset, keep bool, files map[string]string) *pointer.Pointer {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	if keep {
		require.NoError(t, tx.KeepAll(ctx))
	}
	var g errgroup.Group
	g.SetLimit(32)
	for p, c := range files {
		g.Go(func() error { return tx.PutBytes(ctx, p, []byte(c)) })
	}
	require.NoError(t, g.Wait())
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	return p
}

// files returns n files named f0000... with content tagged by tag.
func files(n int, tag string) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("f%04d", i)] = fmt.Sprintf("%s/%d", tag, i)
	}
	return m
}

// objects returns every key in s with its ETag, leaving out the leases:
// every run writes its own lease, and nothing else may change.
func objects(t testing.TB, s store.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for o, err := range store.List(context.Background(), s, "", "", "") {
		require.NoError(t, err)
		if !strings.HasPrefix(o.Key, "_lease/") {
			out[o.Key] = o.ETag
		}
	}
	return out
}

// objectsButPointer is objects without the pointer, which a collection
// rewrites to register its lease token even when it changes nothing else.
func objectsButPointer(t testing.TB, s store.Store) map[string]string {
	t.Helper()
	out := objects(t, s)
	delete(out, pointer.Key)
	return out
}

// registeredOnly asserts that the pointer in s is before but for the
// lease token a collection registered (and the fields every rewrite
// renews): what a run that finds nothing to do, or refuses, leaves.
func registeredOnly(t testing.TB, s store.Store, before *pointer.Pointer) {
	t.Helper()
	after, _, err := pointer.Read(context.Background(), s)
	require.NoError(t, err)
	assert.Greater(t, after.GCToken, before.GCToken, "the run registered its lease token")
	got := *after
	got.GCToken, got.WriteID, got.GCCommittedAt = before.GCToken, before.WriteID, before.GCCommittedAt
	assert.Equal(t, *before, got, "nothing but the lease token changed in the pointer")
}

// keysUnder lists the keys under prefix as a set.
func keysUnder(t testing.TB, s store.Store, prefix string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for o, err := range store.List(context.Background(), s, prefix, "", "") {
		require.NoError(t, err)
		out[o.Key] = true
	}
	return out
}

// referenced returns the keys referenced by the current generation and its
// n nearest ancestors: with Keep n and no grace or pins, exactly what must
// remain under _gen/ after a full collection.
func referenced(t testing.TB, d *commit.Dataset, n int) map[string]bool {
	t.Helper()
	ctx := context.Background()
	cur, err := d.Open(ctx)
	require.NoError(t, err)
	out := map[string]bool{}
	i := 0
	for m, err := range d.History(ctx, cur) {
		require.NoError(t, err)
		for _, k := range m.Keys() {
			out[k] = true
		}
		if i++; i > n {
			break
		}
	}
	return out
}

// requireComplete checks I1: the pointer resolves to a generation whose
// every file reads back verified.
func requireComplete(t testing.TB, d *commit.Dataset) {
	t.Helper()
	ctx := context.Background()
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	for _, e := range snap.Files() {
		_, err := snap.ReadFile(ctx, e.Path)
		require.NoError(t, err, "file %s of the current generation", e.Path)
	}
}

// readAll reads every file of a snapshot.
func readAll(ctx context.Context, snap *commit.Snapshot) error {
	for _, e := range snap.Files() {
		if _, err := snap.ReadFile(ctx, e.Path); err != nil {
			return err
		}
	}
	return nil
}

// stage starts a generation and stages n files without committing it: a
// stalled or crashed writer.
func stage(t testing.TB, d *commit.Dataset, n int) *commit.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	for p, c := range files(n, "staged-"+tx.Generation()) {
		require.NoError(t, tx.PutBytes(ctx, p, []byte(c)))
	}
	return tx
}

// genIDs returns the generation ids of infos.
func genIDs(infos []gc.GenInfo) []string {
	var out []string
	for _, g := range infos {
		out = append(out, g.Generation)
	}
	return out
}

// seedChain writes a history of gens generations of perGen files each
// straight into the store, all in parallel, then the pointer: a fast way to
// build a long history for benchmarks. Every generation replaces all files,
// so all but the retained ones are garbage.
func seedChain(tb testing.TB, s store.Store, gens, perGen int) {
	tb.Helper()
	ctx := context.Background()
	type put struct {
		key  string
		body []byte
	}
	var puts []put
	var parent, parentSHA, lastSHA, last, lastParent string
	start := time.Now().Add(-time.Hour).UTC()
	for i := 1; i <= gens; i++ {
		gen, err := generation.New()
		require.NoError(tb, err)
		m := &generation.Manifest{Format: generation.Format, Generation: gen, Parent: parent, ParentManifestSHA256: parentSHA, Seq: uint64(i), StagingStart: start}
		for j := range perGen {
			body := fmt.Appendf(nil, "gen %d file %d", i, j)
			sum := sha256.Sum256(body)
			path := fmt.Sprintf("f%04d", j)
			m.Entries = append(m.Entries, generation.Entry{Path: path, Key: generation.DataKey(gen, path), Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:])})
			puts = append(puts, put{generation.DataKey(gen, path), body})
		}
		b, err := generation.Encode(m)
		require.NoError(tb, err)
		sum := sha256.Sum256(b)
		puts = append(puts, put{generation.ManifestKey(gen), b})
		lastParent = parent
		parent, parentSHA, last, lastSHA = gen, hex.EncodeToString(sum[:]), gen, hex.EncodeToString(sum[:])
	}
	var g errgroup.Group
	g.SetLimit(32)
	for _, p := range puts {
		g.Go(func() error {
			_, err := s.Put(ctx, p.key, bytes.NewReader(p.body), store.PutOptions{Size: int64(len(p.body))})
			return err
		})
	}
	require.NoError(tb, g.Wait())
	_, err := pointer.Write(ctx, s, &pointer.Pointer{
		Seq: uint64(gens), Generation: last, Parent: lastParent,
		Manifest: generation.ManifestKey(last), ManifestSHA256: lastSHA,
	}, "")
	require.NoError(tb, err)
}
