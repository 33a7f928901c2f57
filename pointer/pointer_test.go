package pointer_test

import (
	"context"
	"strings"
	"testing"
	"testing/quick"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

func valid(t *testing.T) *pointer.Pointer {
	t.Helper()
	gen, err := generation.New()
	require.NoError(t, err)
	return &pointer.Pointer{Seq: 1, Generation: gen, Manifest: generation.ManifestKey(gen), ManifestSHA256: strings.Repeat("0", 64)}
}

func TestWriteRead(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	p := valid(t)
	a1, err := pointer.Write(ctx, s, p, "")
	require.NoError(t, err)
	id1 := p.WriteID
	_, err = pointer.Write(ctx, s, p, "")
	require.ErrorIs(t, err, store.ErrPrecondition, "the first write is create-if-absent")

	got, attrs, err := pointer.Read(ctx, s)
	require.NoError(t, err)
	assert.Equal(t, a1.ETag, attrs.ETag)
	assert.Equal(t, p.Generation, got.Generation)

	// Rewriting the same content still changes the body: no ABA.
	a2, err := pointer.Write(ctx, s, got, attrs.ETag)
	require.NoError(t, err)
	assert.NotEqual(t, a1.ETag, a2.ETag)
	assert.NotEqual(t, id1, got.WriteID)
	_, err = pointer.Write(ctx, s, got, a1.ETag)
	require.ErrorIs(t, err, store.ErrPrecondition, "a stale ETag loses")
}

func TestEncodeRefusesInvalid(t *testing.T) {
	for name, mutate := range map[string]func(p *pointer.Pointer){
		"seq zero":         func(p *pointer.Pointer) { p.Seq = 0 },
		"bad generation":   func(p *pointer.Pointer) { p.Generation = "x" },
		"foreign manifest": func(p *pointer.Pointer) { p.Manifest = "_gen/other/_manifest" },
		"short sha":        func(p *pointer.Pointer) { p.ManifestSHA256 = "abc" },
		"huge meta":        func(p *pointer.Pointer) { p.Message = strings.Repeat("m", pointer.MaxSize) },
	} {
		t.Run(name, func(t *testing.T) {
			p := valid(t)
			p.WriteID = "w"
			mutate(p)
			_, err := pointer.Encode(p)
			require.Error(t, err)
		})
	}
}

// TestRaiseFenceNeverLowers: after any sequence of raises, each lease's
// fence is the highest token raised for it, and raising one lease leaves
// every other lease's fence as it was, in the copy it was made from too.
func TestRaiseFenceNeverLowers(t *testing.T) {
	leases := []string{"", "s3://b/_lease/a", "s3://b/_lease/b"}
	prop := func(ops []struct {
		Lease uint8
		Token uint16
	}) bool {
		var p pointer.Pointer
		want := map[string]uint64{}
		for _, op := range ops {
			lease, token := leases[int(op.Lease)%len(leases)], uint64(op.Token)
			before := p
			p.RaiseFence(lease, token)
			want[lease] = max(want[lease], token)
			for _, l := range leases {
				if p.FenceOf(l) != want[l] {
					return false
				}
				if l != lease && before.FenceOf(l) != p.FenceOf(l) {
					return false
				}
			}
			if before.FenceOf(lease) > want[lease] {
				return false // the copy was changed under it
			}
		}
		return true
	}
	require.NoError(t, quick.Check(prop, &quick.Config{MaxCount: 2000}))

	var p pointer.Pointer
	p.RaiseFence("s3://b/_lease/a", 9)
	p.RaiseFence("s3://b/_lease/a", 5)
	p.RaiseFence("", 9)
	p.RaiseFence("", 5)
	assert.Equal(t, uint64(9), p.FenceOf("s3://b/_lease/a"), "a lower token of a named lease")
	assert.Equal(t, uint64(9), p.FenceOf(""), "a lower token of the unnamed lease")
}
