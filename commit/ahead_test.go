package commit_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// setClock is a clock the test sets: the store's and the Dataset's.
type setClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *setClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *setClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *setClock) Sleep(ctx context.Context, d time.Duration) error {
	<-ctx.Done()
	return ctx.Err()
}

// wholeSeconds gives every time its store reports in whole seconds, as
// HTTP's Date and Last-Modified headers do.
type wholeSeconds struct{ store.Store }

func (w wholeSeconds) Unwrap() store.Store { return w.Store }

func truncAttrs(a store.Attrs) store.Attrs {
	a.LastModified = a.LastModified.Truncate(time.Second)
	a.ServerTime = a.ServerTime.Truncate(time.Second)
	return a
}

func (w wholeSeconds) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	rc, a, err := w.Store.Get(ctx, key)
	return rc, truncAttrs(a), err
}

func (w wholeSeconds) Head(ctx context.Context, key string) (store.Attrs, error) {
	a, err := w.Store.Head(ctx, key)
	return truncAttrs(a), err
}

func (w wholeSeconds) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	a, err := w.Store.Put(ctx, key, body, opts)
	return truncAttrs(a), err
}

func (w wholeSeconds) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	p, err := w.Store.List(ctx, req)
	for i := range p.Objects {
		p.Objects[i].LastModified = p.Objects[i].LastModified.Truncate(time.Second)
	}
	return p, err
}

// heldPointer holds the pointer GETs sent while it is armed until the
// test releases them, or fails them with fail.
type heldPointer struct {
	store.Store
	mu      sync.Mutex
	armed   bool
	started chan struct{}
	release chan struct{}
	fail    error
	// headed, if set, is told the key of every HEAD once it is answered.
	headed func(key string)
}

func (h *heldPointer) Head(ctx context.Context, key string) (store.Attrs, error) {
	a, err := h.Store.Head(ctx, key)
	h.mu.Lock()
	headed := h.headed
	h.mu.Unlock()
	if headed != nil {
		headed(key)
	}
	return a, err
}

func (h *heldPointer) Unwrap() store.Store { return h.Store }

// hold arms it: the next pointer GET signals started and waits.
func (h *heldPointer) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed, h.started, h.release = true, make(chan struct{}), make(chan struct{})
}

func (h *heldPointer) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	h.mu.Lock()
	armed, started, release, fail := h.armed, h.started, h.release, h.fail
	if key == pointer.Key {
		h.armed = false
	}
	h.mu.Unlock()
	if key == pointer.Key && armed {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, store.Attrs{}, ctx.Err()
		}
		if fail != nil {
			return nil, store.Attrs{}, fail
		}
	}
	return h.Store.Get(ctx, key)
}

// writeInto writes files (name → content) into dir.
func writeInto(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
}

// committedX commits a local file x = "1" to s with a Dataset on clock,
// then changes x to "2" for the next commit. It returns the Dataset, the
// local file and the pointer committed.
func committedX(t *testing.T, s store.Store, clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}) (*commit.Dataset, string, *pointer.Pointer) {
	t.Helper()
	ctx := context.Background()
	d := commit.New(s)
	commit.SetRoundClock(d, clock)
	local := filepath.Join(t.TempDir(), "x")
	require.NoError(t, os.WriteFile(local, []byte("1"), 0o644))
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutFile(ctx, "x", local))
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(local, []byte("2"), 0o644))
	return d, local, p
}

// stageAhead runs PutFile of path from local on tx and fails t if it
// waits for the held pointer GET instead of uploading at once.
func stageAhead(t *testing.T, tx *commit.Tx, path, local string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- tx.PutFile(context.Background(), path, local) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("PutFile of %s, which differs from the expected manifest, waited for the pointer GET", path)
	}
}

// TestFilesStagedAheadAreHeldAgainstTheHorizon: a Tx of BeginAhead uploads
// a changed file while its pointer GET is under way; the GET is answered
// a minute later, in whole seconds. Meanwhile the collector takes the
// upload for an orphan's, deletes it, and publishes its Last-Modified as
// the horizon. The commit must be refused (ErrStale): its staging start
// is the GET's Date less the GET's time and one second, at or before
// every object it staged, not the Date itself.
func TestFilesStagedAheadAreHeldAgainstTheHorizon(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2030, 1, 2, 3, 4, 5, 900e6, time.UTC)
	clock := &setClock{now: start}
	s := wholeSeconds{mem.New(mem.WithClock(clock.Now))}
	held := &heldPointer{Store: s}
	d, local, p1 := committedX(t, held, clock)
	held.hold()
	tx, err := d.BeginAhead(ctx, p1.ManifestSHA256)
	require.NoError(t, err)
	<-held.started
	stageAhead(t, tx, "x", local) // stored at 3:04:05.9, Last-Modified 3:04:05

	// The GET is answered at 3:05:06.0 (Date 3:05:06), 60.1 s after it
	// was sent. A collector at that time with an orphan age of a minute
	// (and its second for whole-second dates) has its cutoff at 3:04:05.
	clock.Set(start.Add(time.Minute + 100*time.Millisecond))
	rep, err := gc.Run(ctx, s, gc.Options{Keep: 1, Grace: -1, OrphanAge: time.Minute})
	require.NoError(t, err)
	require.Len(t, rep.Orphans, 1, "the upload is an orphan's at the cutoff")
	require.Equal(t, tx.Generation(), rep.Orphans[0].Generation)
	require.True(t, rep.Horizon.Equal(start.Truncate(time.Second)), "horizon %s", rep.Horizon)
	close(held.release)

	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrStale)
	assert.Equal(t, p1.Generation, checkComplete(t, d).Generation())
}

// TestAheadUploadsOnlyWhatDiffersFromTheExpectedManifest: the expected
// manifest is stale: another writer changed b and added c since. A file
// that differs from it (d, new) uploads while the pointer GET is held; one
// that matches it (a, b) waits for the base, and is reused only if the
// base has it unchanged (a), else uploaded (b); once the base is read, it
// alone decides (c, the base's). The commit publishes the local files.
func TestAheadUploadsOnlyWhatDiffersFromTheExpectedManifest(t *testing.T) {
	ctx := context.Background()
	held := &heldPointer{Store: mem.New()}
	cache := t.TempDir()
	d := commit.New(held, commit.WithManifestCache(cache))
	p1, err := publish(t, d, map[string]string{"a": "1", "b": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	p2, err := publish(t, commit.New(held), map[string]string{"a": "1", "b": "2", "c": "3"}, commit.CommitOptions{})
	require.NoError(t, err)

	dir := t.TempDir()
	for name, content := range map[string]string{"a": "1", "b": "1", "c": "3", "d": "4"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	// A new process: the expected manifest comes from the cache.
	d2 := commit.New(held, commit.WithManifestCache(cache))
	held.hold()
	tx, err := d2.BeginAhead(ctx, p1.ManifestSHA256)
	require.NoError(t, err)
	<-held.started
	stageAhead(t, tx, "d", filepath.Join(dir, "d"))
	// A file that matches the expected manifest waits for the base: on a
	// context that is done, it fails instead of deciding.
	done, cancel := context.WithCancel(ctx)
	cancel()
	for _, name := range []string{"a", "b"} {
		require.ErrorIs(t, tx.PutFile(done, name, filepath.Join(dir, name)), context.Canceled, "%s did not wait for the base", name)
	}
	gotBase := make(chan *pointer.Pointer, 1)
	go func() { gotBase <- tx.Base() }()
	close(held.release)
	assert.Equal(t, p2.Generation, (<-gotBase).Generation, "Base waits for the pointer")
	// Once the base is read, it alone decides: c, which the expected
	// manifest lacks, is the base's.
	for _, name := range []string{"a", "b", "c"} {
		require.NoError(t, tx.PutFile(ctx, name, filepath.Join(dir, name)))
	}
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)

	assert.True(t, tx.Reuses("a"), "a is unchanged in the base")
	assert.False(t, tx.Reuses("b"), "b matches the expected manifest, not the base")
	assert.True(t, tx.Reuses("c"), "c is the base's")
	assert.Equal(t, 2, tx.Reused())
	snap := checkComplete(t, d2)
	require.Equal(t, p.Generation, snap.Generation())
	got := map[string]string{}
	for _, e := range snap.Files() {
		b, err := snap.ReadFile(ctx, e.Path)
		require.NoError(t, err)
		got[e.Path] = string(b)
		if e.Path == "b" || e.Path == "d" {
			assert.True(t, strings.HasPrefix(e.Key, generation.Prefix(tx.Generation())), "%s is uploaded: %s", e.Path, e.Key)
		}
	}
	assert.Equal(t, map[string]string{"a": "1", "b": "1", "c": "3", "d": "4"}, got)
}

// TestAheadPointerReadFailureDiscardsTheUploads: when BeginAhead's pointer
// GET fails, the methods that need the base fail with it, and Commit
// deletes what was uploaded meanwhile and writes nothing.
func TestAheadPointerReadFailureDiscardsTheUploads(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	held := &heldPointer{Store: s}
	d := commit.New(held)
	p1, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	local := filepath.Join(t.TempDir(), "x")
	require.NoError(t, os.WriteFile(local, []byte("2"), 0o644))

	broken := errors.New("the pointer cannot be read")
	held.hold()
	held.mu.Lock()
	held.fail = broken
	held.mu.Unlock()
	tx, err := d.BeginAhead(ctx, p1.ManifestSHA256)
	require.NoError(t, err)
	<-held.started
	stageAhead(t, tx, "x", local)
	require.NotEmpty(t, keysUnder(t, s, generation.Prefix(tx.Generation())))
	// A batch whose proof starts once each file is decided: one file
	// references an object Resume offered, whose proof needs the base's
	// horizon, and one is uploaded.
	stx, err := d.Stage()
	require.NoError(t, err)
	require.NoError(t, stx.PutBytes(ctx, "r", []byte("resumed")))
	require.NoError(t, tx.Resume(stx.Entries()))
	resumed := filepath.Join(t.TempDir(), "r")
	require.NoError(t, os.WriteFile(resumed, []byte("resumed"), 0o644))
	proof := tx.NewReuseProof(ctx, 2)
	require.NoError(t, tx.PutFile(ctx, "r", resumed, proof.Option()))
	require.True(t, tx.Resumes("r"))
	require.NoError(t, tx.PutFile(ctx, "y", local, proof.Option()))
	close(held.release)

	require.ErrorIs(t, proof.Wait(), broken)
	require.ErrorIs(t, tx.VerifyReferences(ctx), broken)
	_, err = tx.BaseSnapshot(ctx)
	require.ErrorIs(t, err, broken)
	_, err = tx.Replaced(ctx)
	require.ErrorIs(t, err, broken)
	_, err = tx.Unchanged(ctx)
	require.ErrorIs(t, err, broken)
	assert.Nil(t, tx.Base())
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, broken)
	assert.Empty(t, keysUnder(t, s, generation.Prefix(tx.Generation())), "the uploads are deleted")
	assert.Equal(t, p1.Generation, checkComplete(t, d).Generation())
}

// TestAdoptWaitsForTheAheadStagingStart: a job's commit that adopts its
// tasks' objects on a Tx of BeginAhead keeps the job's staging start,
// which is earlier than the one the pointer GET gives, whenever the GET
// is answered.
func TestAdoptWaitsForTheAheadStagingStart(t *testing.T) {
	ctx := context.Background()
	held := &heldPointer{Store: mem.New()}
	d := commit.New(held)
	p1, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	stx, err := d.Stage()
	require.NoError(t, err)
	require.NoError(t, stx.PutBytes(ctx, "y", []byte("task")))
	jobStart := time.Now().Add(-time.Hour).UTC()

	held.hold()
	tx, err := d.BeginAhead(ctx, p1.ManifestSHA256)
	require.NoError(t, err)
	<-held.started
	adopted := make(chan error, 1)
	go func() { adopted <- tx.Adopt(jobStart, stx.Entries()) }()
	close(held.release)
	require.NoError(t, <-adopted)
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	m, err := d.ReadManifest(ctx, p.Generation, p.ManifestSHA256)
	require.NoError(t, err)
	assert.True(t, m.StagingStart.Equal(jobStart), "staging start %s, want the job's %s", m.StagingStart, jobStart)
}

// TestAheadProofCountsOnlyOnTheExpectedBase: a file that matches the
// expected manifest has its object proven while the pointer GET is held,
// and the object is lost. Either the base turns out to be another manifest
// (which references the same object) and the object is lost after that
// early proof, so the proof is not counted; or the base is the expected
// manifest and the object was lost before the proof, which found it
// missing. Either way the object is proven again before the manifest, and
// the file uploaded again: the commit is complete (I1).
func TestAheadProofCountsOnlyOnTheExpectedBase(t *testing.T) {
	for _, c := range []struct {
		name       string
		stale      bool // another writer commits after the expected manifest
		lostBefore bool // the object is lost before the early proof
	}{{"stale base, lost after the proof", true, false}, {"expected base, lost before the proof", false, true}} {
		t.Run(c.name, func(t *testing.T) { testAheadProofCountsOnlyOnTheExpectedBase(t, c.stale, c.lostBefore) })
	}
}

func testAheadProofCountsOnlyOnTheExpectedBase(t *testing.T, stale, lostBefore bool) {
	ctx := context.Background()
	s := mem.New()
	held := &heldPointer{Store: s}
	cache := t.TempDir()
	p1, err := publish(t, commit.New(held, commit.WithManifestCache(cache)), map[string]string{"a": "1", "b": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	other := commit.New(held)
	if stale {
		tx2, err := other.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx2.KeepAll(ctx))
		require.NoError(t, tx2.PutBytes(ctx, "b", []byte("2")))
		_, err = tx2.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
	}
	snap1, err := other.OpenPointer(ctx, p1)
	require.NoError(t, err)
	ea, ok := snap1.Manifest.Find("a")
	require.True(t, ok)
	if lostBefore {
		require.NoError(t, s.Delete(ctx, ea.Key, store.DeleteOptions{}))
	}

	dir := t.TempDir()
	for name, content := range map[string]string{"a": "1", "d": "4"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	proven := make(chan struct{})
	var once sync.Once
	held.mu.Lock()
	held.headed = func(key string) {
		if key == ea.Key {
			once.Do(func() { close(proven) })
		}
	}
	held.mu.Unlock()
	held.hold()
	tx, err := commit.New(held, commit.WithManifestCache(cache)).BeginAhead(ctx, p1.ManifestSHA256)
	require.NoError(t, err)
	<-held.started
	proof := tx.NewReuseProof(ctx, 2)
	require.NoError(t, tx.PutFile(ctx, "d", filepath.Join(dir, "d"), proof.Option()))
	matched := make(chan error, 1)
	go func() { matched <- tx.PutFile(ctx, "a", filepath.Join(dir, "a"), proof.Option()) }()
	select {
	case <-proven:
	case <-time.After(30 * time.Second):
		t.Fatal("the object of a, which matches the expected manifest, was not proven while the pointer GET was held")
	}
	if !lostBefore {
		require.NoError(t, s.Delete(ctx, ea.Key, store.DeleteOptions{}))
	}
	close(held.release)
	require.NoError(t, <-matched)
	require.NoError(t, proof.Wait())
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, 1, tx.Repaired(), "a is uploaded again")
	checkComplete(t, commit.New(s))
}

// TestAheadProofEndsWhenAFileFailsBeforeDeciding: a file that matched the
// expected manifest fails while it waits for the base; the batch's proof,
// started early, still ends when the batch does.
func TestAheadProofEndsWhenAFileFailsBeforeDeciding(t *testing.T) {
	ctx := context.Background()
	held := &heldPointer{Store: mem.New()}
	cache := t.TempDir()
	p1, err := publish(t, commit.New(held, commit.WithManifestCache(cache)), map[string]string{"a": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	dir := t.TempDir()
	for name, content := range map[string]string{"a": "1", "d": "4"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	held.hold()
	tx, err := commit.New(held, commit.WithManifestCache(cache)).BeginAhead(ctx, p1.ManifestSHA256)
	require.NoError(t, err)
	<-held.started
	proof := tx.NewReuseProof(ctx, 2)
	require.NoError(t, tx.PutFile(ctx, "d", filepath.Join(dir, "d"), proof.Option()))
	done, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, tx.PutFile(done, "a", filepath.Join(dir, "a"), proof.Option()), context.Canceled)
	close(held.release)
	waited := make(chan error, 1)
	go func() { waited <- proof.Wait() }()
	select {
	case err := <-waited:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the proof waits for a decision that never comes")
	}
}

// TestBaseReadIsReturnedOnADoneContext: once the pointer has been read,
// what needs the base has it even on a context that is done, as a file
// deciding whether it reuses its object after its batch was cancelled.
func TestBaseReadIsReturnedOnADoneContext(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	p1, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	done, cancel := context.WithCancel(ctx)
	cancel()
	for _, begin := range []func() (*commit.Tx, error){
		func() (*commit.Tx, error) { return d.Begin(ctx) },
		func() (*commit.Tx, error) {
			tx, err := d.BeginAhead(ctx, p1.ManifestSHA256)
			if err == nil {
				err = tx.WaitBase(ctx)
			}
			return tx, err
		},
	} {
		tx, err := begin()
		require.NoError(t, err)
		for range 20 {
			snap, err := tx.BaseSnapshot(done)
			require.NoError(t, err)
			require.Equal(t, p1.Generation, snap.Generation())
		}
	}
}

// TestAheadUploadOfTheBasesContentIsUnchanged: the expected manifest (a,
// b) is stale: another writer changed a, or added c, since. A file that
// differs from the expected manifest is uploaded while the pointer GET is
// held; when it has the base's content, it is still the base's file, and
// the Tx is unchanged, as long as the base's object is there. New
// content, or the base's object lost, is a change (the upload repairs the
// base).
func TestAheadUploadOfTheBasesContentIsUnchanged(t *testing.T) {
	for _, c := range []struct {
		name      string
		theirs    map[string]string // the other writer's change
		mine      map[string]string // the local files' change after it
		ahead     string            // the file staged ahead
		lose      bool              // the base's object of it is lost
		unchanged bool
	}{
		{"the base's content", map[string]string{"a": "2"}, nil, "a", false, true},
		{"a file new to the expected manifest", map[string]string{"c": "3"}, nil, "c", false, true},
		{"new content", map[string]string{"a": "2"}, map[string]string{"a": "3"}, "a", false, false},
		{"the base's object lost", map[string]string{"a": "2"}, nil, "a", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := mem.New()
			held := &heldPointer{Store: s}
			cache := t.TempDir()
			// Files staged by PutFile, as put stages them, with their modes.
			dir := t.TempDir()
			writeInto(t, dir, map[string]string{"a": "1", "b": "1"})
			_, p1 := putDir(t, commit.New(held, commit.WithManifestCache(cache)), dir)
			writeInto(t, dir, c.theirs)
			other := commit.New(held)
			_, p2 := putDir(t, other, dir)
			if c.lose {
				snap2, err := other.OpenPointer(ctx, p2)
				require.NoError(t, err)
				e, ok := snap2.Manifest.Find(c.ahead)
				require.True(t, ok)
				require.NoError(t, s.Delete(ctx, e.Key, store.DeleteOptions{}))
			}

			writeInto(t, dir, c.mine)
			held.hold()
			tx, err := commit.New(held, commit.WithManifestCache(cache)).BeginAhead(ctx, p1.ManifestSHA256)
			require.NoError(t, err)
			<-held.started
			stageAhead(t, tx, c.ahead, filepath.Join(dir, c.ahead))
			close(held.release)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, e := range entries {
				if e.Name() != c.ahead {
					require.NoError(t, tx.PutFile(ctx, e.Name(), filepath.Join(dir, e.Name())))
				}
			}
			same, err := tx.Unchanged(ctx)
			require.NoError(t, err)
			assert.Equal(t, c.unchanged, same)
		})
	}
}

// TestUploadOfTheBasesContentWithoutReuseIsAChange: with reuse off, a file
// the base has unchanged is uploaded again, and that is a change to commit.
func TestUploadOfTheBasesContentWithoutReuseIsAChange(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	dir := t.TempDir()
	local := filepath.Join(dir, "a")
	require.NoError(t, os.WriteFile(local, []byte("1"), 0o644))
	putDir(t, commit.New(s), dir)
	tx, err := commit.New(s, commit.WithReuse(false)).Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutFile(ctx, "a", local))
	same, err := tx.Unchanged(ctx)
	require.NoError(t, err)
	assert.False(t, same)
}
