package commit

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// TestOverlapSeesEveryFieldOfAnEntry: a winner that changed any field of
// the entry of a path the Tx read (its object, size, checksum, encoding,
// mode or modification time) changed that path: the rebase refuses it.
func TestOverlapSeesEveryFieldOfAnEntry(t *testing.T) {
	gen, err := generation.New()
	require.NoError(t, err)
	base := generation.Entry{Path: "p", Key: generation.DataKey(gen, "p"), Size: 1, SHA256: strings.Repeat("a", 64),
		Mode: "0644", MTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	rs := &rebaseState{read: map[string]bool{"p": true}, base: map[string]generation.Entry{"p": base}}
	assert.Empty(t, rs.overlap(map[string]generation.Entry{"p": base}, ""), "the same entry is no change")
	for name, change := range map[string]func(e *generation.Entry){
		"object":   func(e *generation.Entry) { e.Key = generation.DataKey(gen, "q") },
		"size":     func(e *generation.Entry) { e.Size = 2 },
		"checksum": func(e *generation.Entry) { e.SHA256 = strings.Repeat("b", 64) },
		"encoding": func(e *generation.Entry) { e.Encoding = "zstd" },
		"mode":     func(e *generation.Entry) { e.Mode = "0755" },
		"mtime":    func(e *generation.Entry) { e.MTime = e.MTime.Add(time.Second) },
	} {
		e := base
		change(&e)
		assert.Equal(t, []string{"p"}, rs.overlap(map[string]generation.Entry{"p": e}, ""), name)
	}
}

// TestRebaseTakesHeldManifestOnlyForItsHead: the manifest a Dataset holds
// from its last read or write stands in for the head's only when it is
// that head's (the same generation and sha256). A Tx whose Dataset holds
// A's and that rebases on B, a later commit, must read B's manifest:
// rebased on A's entries, its commit would drop B's change, a lost update.
func TestRebaseTakesHeldManifestOnlyForItsHead(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := New(s)
	commitFiles := func(files map[string]string) (*pointer.Pointer, store.Attrs) {
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.KeepAll(ctx))
		for p, c := range files {
			require.NoError(t, tx.PutBytes(ctx, p, []byte(c)))
		}
		_, err = tx.Commit(ctx, CommitOptions{})
		require.NoError(t, err)
		p, attrs, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		return p, attrs
	}
	commitFiles(map[string]string{"seed": "0"})
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.KeepAll(ctx))
	require.NoError(t, tx.PutBytes(ctx, "mine", []byte("m")))
	require.NoError(t, tx.EnableRebase(Rebase{}))
	a, _ := commitFiles(map[string]string{"a": "a"})
	b, attrsB := commitFiles(map[string]string{"b": "b"})
	_, stored, err := d.readManifest(ctx, a.Generation, a.ManifestSHA256)
	require.NoError(t, err)
	rs, err := tx.prepareRebase(ctx, tx.Entries())
	require.NoError(t, err)
	d.last.put(a.Generation, a.ManifestSHA256, stored)
	h, entries, err := tx.rebaseHead(ctx, rs, b, attrsB, &ConflictError{Winner: b.Generation, Seq: b.Seq})
	require.NoError(t, err)
	assert.Contains(t, h.Entries, "b", "the head is B's manifest")
	var paths []string
	for _, e := range entries {
		paths = append(paths, e.Path)
	}
	assert.ElementsMatch(t, []string{"seed", "a", "b", "mine"}, paths)
}

// TestGroupableProperties: a writer that read its whole base, keeps files
// from another snapshot, asked for no group, whose base was not written
// by a commit, or is closed (its commit met no other writer), is never
// groupable, whatever else holds; a writer with none of these is.
func TestGroupableProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		hg, err := generation.New()
		require.NoError(t, err)
		m := &generation.Manifest{Generation: hg, Seq: 7}
		if r.IntN(4) > 0 {
			m.Rebased = 1
		}
		p := &pointer.Pointer{Seq: 7, Generation: hg, WriteID: "w7"}
		if r.IntN(4) == 0 {
			p.WriteID = ""
		}
		h := newHead(p, store.Attrs{}, m)
		gen, err := generation.New()
		require.NoError(t, err)
		tx := &Tx{d: New(nil), gen: gen, rebase: &Rebase{NoGroup: r.IntN(4) == 0}}
		if r.IntN(4) == 0 {
			tx.refSeq = 1 + r.Uint64N(5)
		}
		rs := &rebaseState{read: map[string]bool{"x": true}, mine: map[string]generation.Entry{
			"x": {Path: "x", Key: generation.DataKey(gen, "x"), Size: 1, SHA256: strings.Repeat("a", 64)}}, all: r.IntN(4) == 0}
		refused := tx.rebase.NoGroup || tx.refSeq != 0 || rs.all || p.WriteID == "" || m.Rebased == 0
		if got := tx.groupable(rs, h); got == refused {
			t.Fatalf("groupable %v: NoGroup %v, refSeq %d, all %v, write id %q, rebased %d", got, tx.rebase.NoGroup, tx.refSeq, rs.all, p.WriteID, m.Rebased)
		}
	}
}

// TestHeldManifestIsTheOneNamed: the held manifest is returned only for
// its generation and its sha256, never for a value that names another
// sha256 (another manifest under the same key) or none.
func TestHeldManifestIsTheOneNamed(t *testing.T) {
	var c lastManifest
	assert.Nil(t, c.get("g", "s"), "nothing held")
	c.put("g", "s", []byte("m"))
	assert.Equal(t, []byte("m"), c.get("g", "s"))
	assert.Nil(t, c.get("g", "t"), "another sha256")
	assert.Nil(t, c.get("h", "s"), "another generation")
	assert.Nil(t, c.get("g", ""), "no sha256 to check")
}
