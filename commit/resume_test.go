package commit_test

import (
	"context"
	"fmt"
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
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// stageOnly stages dir on a Tx that never commits, as a put that was
// interrupted leaves it, and returns what it staged.
func stageOnly(t *testing.T, d *commit.Dataset, dir string) (*commit.Tx, []generation.Entry) {
	t.Helper()
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.AddDir(ctx, dir))
	return tx, tx.Entries()
}

// A put that resumes references what the interrupted one staged, for
// every file whose size and sha256 still match, and uploads only the rest;
// the committed generation reads completely.
func TestResumeUploadsOnlyWhatChanged(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		_, err := publish(t, d, map[string]string{"other": "1"}, commit.CommitOptions{})
		require.NoError(t, err)
		dir := writeFiles(t, 10, "1")
		first, staged := stageOnly(t, d, dir)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "d", "0002"), []byte("changed since"), 0o644))

		c := store.Count(s)
		tx, err := commit.New(c).Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.Resume(staged))
		require.NoError(t, tx.AddDir(ctx, dir))
		assert.Equal(t, 9, tx.Resumed())
		assert.Equal(t, 0, tx.Reused(), "resumed files are not reuses of the base")
		assert.True(t, tx.Resumes("d/0001"))
		assert.False(t, tx.Resumes("d/0002"))
		assert.False(t, tx.Reuses("d/0001"))
		p, err := tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		assert.Equal(t, int64(3), c.Counts()[store.OpPut], "PUTs: the changed file, the manifest and the pointer")

		snap := checkComplete(t, d)
		assert.Equal(t, p.Generation, snap.Generation())
		for _, e := range snap.Files() {
			want := first.Generation()
			if e.Path == "d/0002" {
				want = p.Generation
			}
			assert.Equal(t, want, generation.FromKey(e.Key), e.Path)
		}
		got, err := snap.ReadFile(ctx, "d/0002")
		require.NoError(t, err)
		assert.Equal(t, "changed since", string(got))
	})
}

// The base is matched first: a file that the base holds unchanged is a
// reuse, not a resume, even when the interrupted put staged it too.
func TestResumeComesAfterTheBase(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	dir := writeFiles(t, 3, "1")
	_, staged := stageOnly(t, d, dir)
	putDir(t, d, dir)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Resume(staged))
	require.NoError(t, tx.AddDir(ctx, dir))
	assert.Equal(t, 3, tx.Reused())
	assert.Equal(t, 0, tx.Resumed())
	require.NoError(t, tx.Discard(ctx))
}

// A resumed object that is gone, or has another size, is uploaded again
// from the local file, and the generation reads completely.
func TestResumeUploadsAgainWhatIsMissing(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		dir := writeFiles(t, 4, "1")
		_, staged := stageOnly(t, d, dir)
		require.NoError(t, s.Delete(ctx, staged[0].Key, store.DeleteOptions{}))
		_, err := s.Put(ctx, staged[1].Key, strings.NewReader("x"), store.PutOptions{})
		require.NoError(t, err)

		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.Resume(staged))
		require.NoError(t, tx.AddDir(ctx, dir))
		p, err := tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		assert.Equal(t, 2, tx.Resumed())
		assert.Equal(t, 0, tx.Repaired(), "a staged object that is gone is no damage to the dataset")
		snap := checkComplete(t, d)
		for _, e := range staged[:2] {
			got, ok := snap.Manifest.Find(e.Path)
			require.True(t, ok)
			assert.Equal(t, p.Generation, generation.FromKey(got.Key), e.Path)
		}
	})
}

// The staging start of a Tx that resumes moves back to the time of the
// oldest object it resumed, so the collector's horizon guards those
// objects: a collector that deletes them as an orphan's makes the commit
// fail with ErrStale, never commit a generation whose objects are gone.
func TestResumedObjectsAreGuardedByTheHorizon(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := mem.New(mem.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	d := commit.New(s)
	p1, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	dir := writeFiles(t, 3, "1")
	first, staged := stageOnly(t, d, dir)

	const orphanAge = time.Minute
	advance(orphanAge / 2)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Resume(staged))
	require.NoError(t, tx.AddDir(ctx, dir))
	require.NoError(t, tx.VerifyReferences(ctx), "the resumed objects are there")
	require.Equal(t, 3, tx.Resumed())

	// The collector runs once the interrupted put's objects are an
	// orphan's, though not those of the Tx that resumes them.
	advance(orphanAge/2 + time.Second)
	rep, err := gc.Run(ctx, s, gc.Options{Keep: 1, Grace: -1, OrphanAge: orphanAge})
	require.NoError(t, err)
	require.Len(t, rep.Orphans, 1)
	assert.Equal(t, first.Generation(), rep.Orphans[0].Generation)

	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.ErrorIs(t, err, commit.ErrStale)
	assert.Equal(t, p1.Generation, checkComplete(t, d).Generation())
}

// The manifest of a generation that resumed records, as its staging
// start, the time of the oldest object it resumed.
func TestResumeRecordsTheResumedObjectsTime(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := mem.New(mem.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	d := commit.New(s)
	_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	// Twenty files, each staged a second after the one before, in
	// another order than their keys'.
	const n = 20
	dir := writeFiles(t, n, "1")
	tx0, err := d.Begin(ctx)
	require.NoError(t, err)
	advance(time.Minute)
	staged := now
	for i := range n {
		name := fmt.Sprintf("d/%04d", (i*7)%n)
		require.NoError(t, tx0.PutFile(ctx, name, filepath.Join(dir, filepath.FromSlash(name))))
		advance(time.Second)
	}
	entries := tx0.Entries()
	advance(time.Hour)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Resume(entries))
	require.NoError(t, tx.AddDir(ctx, dir))
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	m, err := d.ReadManifest(ctx, p.Generation, p.ManifestSHA256)
	require.NoError(t, err)
	assert.True(t, m.StagingStart.Equal(staged), "staging start %s, the objects were staged at %s", m.StagingStart, staged)
}

// A resumed object that the base pointer's horizon has passed already is
// uploaded again rather than referenced: the collector may delete it
// before the commit.
func TestResumeUploadsAgainWhatTheHorizonPassed(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s := mem.New(mem.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	d := commit.New(s)
	_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	dir := writeFiles(t, 2, "1")
	_, staged := stageOnly(t, d, dir)
	cur, attrs, err := pointer.Read(ctx, s)
	require.NoError(t, err)
	cur.GCHorizon = now
	_, err = pointer.Write(ctx, s, cur, attrs.ETag)
	require.NoError(t, err)
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Resume(staged))
	require.NoError(t, tx.AddDir(ctx, dir))
	require.Equal(t, 2, tx.Resumed(), "matched before the proof")
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, 0, tx.Resumed(), "both uploaded again")
	for _, e := range checkComplete(t, d).Files() {
		if e.Path != "x" {
			assert.Equal(t, p.Generation, generation.FromKey(e.Key), e.Path)
		}
	}
}

// timeless is a store that reports no modification time.
type timeless struct{ store.Store }

func (s timeless) Head(ctx context.Context, key string) (store.Attrs, error) {
	a, err := s.Store.Head(ctx, key)
	a.LastModified = time.Time{}
	return a, err
}

func (s timeless) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	page, err := s.Store.List(ctx, req)
	for i := range page.Objects {
		page.Objects[i].LastModified = time.Time{}
	}
	return page, err
}

// A resumed object whose time the store does not report is uploaded
// again: nothing would bound the staging start that guards it.
func TestResumeUploadsAgainAnObjectWithoutATime(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	dir := writeFiles(t, 2, "1")
	_, staged := stageOnly(t, d, dir)
	tx, err := commit.New(timeless{s}).Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Resume(staged))
	require.NoError(t, tx.AddDir(ctx, dir))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, 0, tx.Resumed(), "both uploaded again")
}

// A file reused from the base is not judged by the horizon: the base
// keeps its objects, however old they are.
func TestReuseOfTheBaseIsNotJudgedByTheHorizon(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s := mem.New(mem.WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	d := commit.New(s)
	dir := writeFiles(t, 3, "1")
	putDir(t, d, dir)
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	cur, attrs, err := pointer.Read(ctx, s)
	require.NoError(t, err)
	cur.GCHorizon = now.Add(-time.Minute)
	_, err = pointer.Write(ctx, s, cur, attrs.ETag)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d", "0000"), []byte("changed"), 0o644))

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.AddDir(ctx, dir))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, 2, tx.Reused())
	assert.Equal(t, 0, tx.Repaired())
}

// Resume takes only data keys of other generations and valid paths.
func TestResumeRefusesKeysThatAreNotAnotherGenerationsData(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	other, err := generation.New()
	require.NoError(t, err)
	entry := func(path, key string) []generation.Entry {
		return []generation.Entry{{Path: path, Key: key, Size: 1, SHA256: "0000000000000000000000000000000000000000000000000000000000000000"}}
	}
	require.Error(t, tx.Resume(entry("x", generation.ManifestKey(other))), "a manifest")
	require.Error(t, tx.Resume(entry("x", generation.DataKey(tx.Generation(), "x"))), "the Tx's own key")
	require.Error(t, tx.Resume(entry("x", "_pointer")), "outside _gen/")
	require.Error(t, tx.Resume(entry("../x", generation.DataKey(other, "x"))), "a bad path")
	require.NoError(t, tx.Resume(entry("x", generation.DataKey(other, "x"))))
	assert.Empty(t, tx.Entries(), "offered, not staged")
	require.NoError(t, tx.Discard(ctx))
}

// A put whose pointer write had an unknown outcome keeps what it staged
// for the next put, but its generation may have landed: its objects are
// then a committed generation's, which the collector deletes once they
// are outside the retention window, without moving the horizon. So an
// object of a generation that wrote its manifest is uploaded again, not
// resumed, and the generation that resumes reads completely.
func TestResumeUploadsAgainWhatACommittedGenerationHolds(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	dir := writeFiles(t, 3, "1")
	landed, _ := putDir(t, d, dir)
	staged := landed.Entries()
	// Later commits replace every file that generation holds.
	_, err := publish(t, d, map[string]string{"x": "1"}, commit.CommitOptions{})
	require.NoError(t, err)
	_, err = publish(t, d, map[string]string{"x": "2"}, commit.CommitOptions{})
	require.NoError(t, err)

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Resume(staged))
	require.NoError(t, tx.AddDir(ctx, dir))
	require.NoError(t, tx.VerifyReferences(ctx))

	rep, err := gc.Run(ctx, s, gc.Options{Keep: 1, Grace: -1})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Deleted, "the generation that landed is outside the window")

	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, 0, tx.Resumed(), "all uploaded again")
	checkComplete(t, d)
}

// A file changed since the interrupted put staged it, to the same size
// but other content, is uploaded, not resumed: the generation holds the
// file as it is now.
func TestResumeUploadsAFileChangedToTheSameSize(t *testing.T) {
	ctx := context.Background()
	d := commit.New(mem.New())
	dir := writeFiles(t, 2, "1")
	_, staged := stageOnly(t, d, dir)
	// "version 1" becomes "version 2": the same size.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d", "0001"), []byte("file 1 version 2"), 0o644))

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Resume(staged))
	require.NoError(t, tx.AddDir(ctx, dir))
	assert.True(t, tx.Resumes("d/0000"))
	assert.False(t, tx.Resumes("d/0001"))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	got, err := checkComplete(t, d).ReadFile(ctx, "d/0001")
	require.NoError(t, err)
	assert.Equal(t, "file 1 version 2", string(got))
}
