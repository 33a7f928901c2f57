package commit

import (
	"context"
	"fmt"
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

// leaseIntent returns an intent on h, staged under a fresh generation,
// that writes path and holds token of lease.
func leaseIntent(t *testing.T, h *head, path, lease string, token uint64) *intent {
	t.Helper()
	gen, err := generation.New()
	require.NoError(t, err)
	e := generation.Entry{Path: path, Key: generation.DataKey(gen, path), Size: 1, SHA256: strings.Repeat("e", 64)}
	return &intent{Format: intentFormat, Generation: gen, Head: h.ptr.WriteID, Seq: h.ptr.Seq + 1,
		StagingStart: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Fence: token, FenceLease: lease,
		Reads: []intentRead{{Path: path, Set: &e}}}
}

// carrierOn returns a carrier of the subtree "m/" on h and its entries.
func carrierOn(t *testing.T, h *head) (*Tx, *rebaseState, []generation.Entry) {
	t.Helper()
	mine, err := generation.New()
	require.NoError(t, err)
	tx := &Tx{d: New(nil), gen: mine, rebase: &Rebase{Scope: "m/"}}
	rs := &rebaseState{read: map[string]bool{"m/x": true}}
	own := []generation.Entry{h.entries["keep"], h.entries["p/a"],
		{Path: "m/x", Key: generation.DataKey(mine, "m/x"), Size: 1, SHA256: strings.Repeat("c", 64)}}
	return tx, rs, own
}

func carriedGens(g group) []string {
	var out []string
	for _, c := range g.carried {
		out = append(out, c.Generation)
	}
	return out
}

// TestCarryLeavesNoLeaseBeyondTheFenceLimit: the pointer keeps the fences
// of at most pointer.MaxFences leases. A carrier whose own token is of a
// new lease, on a head that keeps MaxFences-2 of them, carries one writer
// of yet another new lease (the pointer then keeps MaxFences) and no
// second one, though each alone would fit: its commit could not raise
// their fences, and it would be refused. A writer of a lease the pointer
// keeps already still fits.
func TestCarryLeavesNoLeaseBeyondTheFenceLimit(t *testing.T) {
	h, _ := testHead(t)
	h.ptr.Fences = map[string]uint64{}
	for i := range pointer.MaxFences - 2 {
		h.ptr.Fences[fmt.Sprintf("l%d", i)] = 1
	}
	tx, rs, own := carrierOn(t, h)
	first := leaseIntent(t, h, "a", "new-a", 1)
	second := leaseIntent(t, h, "b", "new-b", 1)
	known := leaseIntent(t, h, "c", "l0", 2)
	g := tx.carry(rs, h, own, []*intent{first, second, known}, CommitOptions{Fence: 1, FenceLease: "mine"})
	assert.Equal(t, []string{first.Generation, known.Generation}, carriedGens(g))
	assert.Equal(t, []fenceToken{{"new-a", 1}, {"l0", 2}}, g.fences)
}

// TestCarryLeavesRoomInThePointer: a carried writer's fence must fit in
// the pointer the carrier sends, with the carrier's message and meta:
// near pointer.MaxSize, a writer with a long lease identity is left out
// (the carrier's commit would be refused, as one that does not fit), and
// one with a short identity still comes in.
func TestCarryLeavesRoomInThePointer(t *testing.T) {
	h, _ := testHead(t)
	tx, rs, own := carrierOn(t, h)
	// The largest meta value with which the pointer the carrier sends
	// still fits, less a margin that takes a short identity and not a
	// long one.
	opts := func(n int) CommitOptions {
		return CommitOptions{Message: "m", Meta: map[string]string{"k": strings.Repeat("v", n)}}
	}
	fits := func(n int) bool {
		p := *h.ptr
		o := opts(n)
		p.Seq, p.Parent, p.Writer, p.Message, p.Meta = h.ptr.Seq+1, h.ptr.Generation, tx.d.writer, o.Message, o.Meta
		p.CommittedAt = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
		return encodes(&p) == nil
	}
	lo, hi := 0, pointer.MaxSize // fits(lo), !fits(hi)
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	n := lo - 100
	long := leaseIntent(t, h, "a", strings.Repeat("x", pointer.MaxIdentity), 1)
	short := leaseIntent(t, h, "b", "s", 1)
	g := tx.carry(rs, h, own, []*intent{long, short}, opts(n))
	assert.Equal(t, []string{short.Generation}, carriedGens(g))
}

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

// TestRebaseTakesSettledManifestOnlyForItsHead: the manifest that settled
// a dead intent stands in for the head's only when it is that head's (the
// same generation and sha256). A Tx that settled on A and then rebases on
// B, a later commit, must read B's manifest: rebased on A's entries, its
// commit would drop B's change, a lost update.
func TestRebaseTakesSettledManifestOnlyForItsHead(t *testing.T) {
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
	ma, err := d.loadManifest(ctx, a.Generation, a.ManifestSHA256)
	require.NoError(t, err)
	rs, err := tx.prepareRebase(ctx, tx.Entries())
	require.NoError(t, err)
	tx.settledOn, tx.settledOnSHA = ma, a.ManifestSHA256
	h, entries, err := tx.rebaseHead(ctx, rs, b, attrsB, &ConflictError{Winner: b.Generation, Seq: b.Seq})
	require.NoError(t, err)
	assert.Contains(t, h.entries, "b", "the head is B's manifest")
	var paths []string
	for _, e := range entries {
		paths = append(paths, e.Path)
	}
	assert.ElementsMatch(t, []string{"seed", "a", "b", "mine"}, paths)
}
