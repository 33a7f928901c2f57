package gc_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// storeState is every object of a store, leases included, by key: its ETag
// and Last-Modified as listed, and the pointer's bytes and attributes as
// read.
type storeState struct {
	objects  map[string]string
	pointer  string
	etag     string
	modified time.Time
}

func stateOf(t testing.TB, s store.Store) storeState {
	t.Helper()
	ctx := context.Background()
	st := storeState{objects: map[string]string{}}
	for o, err := range store.List(ctx, s, "", "", "") {
		require.NoError(t, err)
		st.objects[o.Key] = o.ETag + " " + o.LastModified.UTC().Format(time.RFC3339Nano)
	}
	rc, attrs, err := s.Get(ctx, pointer.Key)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	st.pointer = string(b)
	st.etag, st.modified = attrs.ETag, attrs.LastModified
	return st
}

// TestCorruptPointerWritesNothing: a pointer that does not decode, or that
// disagrees with the manifest it names (its seq, its parent, or the sha256
// it records for it), stops the collection, dry run or not, before its
// first write: no lease, no registration of a lease token in the pointer,
// no delete. The pointer keeps its bytes, ETag and Last-Modified, for the
// operator to inspect. The error names the pointer's key and what is
// wrong, and the report does not claim that there is no pointer.
func TestCorruptPointerWritesNothing(t *testing.T) {
	rewrite := func(t *testing.T, s store.Store, edit func(p *pointer.Pointer)) {
		t.Helper()
		ctx := context.Background()
		p, attrs, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		edit(p)
		_, err = pointer.Write(ctx, s, p, attrs.ETag)
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, s store.Store, gens []string)
		is      error
		// mention is what the error says is wrong.
		mention func(gens []string) string
	}{
		{"seq", func(t *testing.T, s store.Store, _ []string) {
			rewrite(t, s, func(p *pointer.Pointer) { p.Seq = 7 })
		}, pointer.ErrCorrupt, func(gens []string) string {
			return fmt.Sprintf("seq 7 does not match manifest %q (seq 3)", generation.ManifestKey(gens[2]))
		}},
		{"parent", func(t *testing.T, s store.Store, gens []string) {
			rewrite(t, s, func(p *pointer.Pointer) { p.Parent = gens[0] })
		}, pointer.ErrCorrupt, func(gens []string) string {
			return fmt.Sprintf("parent %s does not match manifest %q (parent %s)", gens[0], generation.ManifestKey(gens[2]), gens[1])
		}},
		{"manifest sha256", func(t *testing.T, s store.Store, _ []string) {
			sum := sha256.Sum256([]byte("not the manifest"))
			rewrite(t, s, func(p *pointer.Pointer) { p.ManifestSHA256 = hex.EncodeToString(sum[:]) })
		}, generation.ErrCorrupt, func(gens []string) string {
			return fmt.Sprintf("manifest %q does not match the sha256 recorded by the pointer", generation.ManifestKey(gens[2]))
		}},
		{"garbage", func(t *testing.T, s store.Store, _ []string) {
			body := []byte("\x00not a pointer")
			_, err := s.Put(context.Background(), pointer.Key, bytes.NewReader(body), store.PutOptions{Size: int64(len(body))})
			require.NoError(t, err)
		}, pointer.ErrCorrupt, func([]string) string { return pointer.ErrCorrupt.Error() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testenv.EachStore(t, func(t *testing.T, s store.Store) {
				ctx := context.Background()
				d := dataset(s)
				var gens []string
				for i := range 3 {
					gens = append(gens, publish(t, d, false, files(1, fmt.Sprint(i))).Generation)
				}
				tc.corrupt(t, s, gens)
				want := stateOf(t, s)

				for _, dry := range []bool{false, true} {
					counted := store.Count(s)
					opts := strict()
					opts.DryRun = dry
					rep, err := gc.Run(ctx, counted, opts)
					require.ErrorIs(t, err, gc.ErrRefused, "dry run %v", dry)
					require.ErrorIs(t, err, tc.is)
					t.Log(err)
					assert.Contains(t, err.Error(), fmt.Sprintf("pointer %q: ", pointer.Key), "the error names the pointer")
					assert.Contains(t, err.Error(), tc.mention(gens))

					n := counted.Counts()
					assert.Zero(t, n[store.OpPut], "dry run %v: no PUT (%s)", dry, n)
					assert.Zero(t, n[store.OpDelete], "dry run %v: no DELETE (%s)", dry, n)
					assert.Zero(t, n[store.OpDeleteMany], "dry run %v: no DeleteMany (%s)", dry, n)
					assert.Equal(t, want, stateOf(t, s), "dry run %v: nothing changed, the pointer least of all", dry)

					var text strings.Builder
					require.NoError(t, rep.WriteText(&text))
					assert.NotContains(t, text.String(), "no pointer", "dry run %v: the pointer is there", dry)
				}
			})
		})
	}
}

// corruptAfterRead serves the first read of the pointer as it is, then
// rewrites the pointer with a seq its manifest does not have: a pointer
// that turns corrupt between the collector's check and its registration.
type corruptAfterRead struct {
	store.Store
	t    testing.TB
	once bool
}

func (c *corruptAfterRead) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	rc, attrs, err := c.Store.Get(ctx, key)
	if err != nil || key != pointer.Key || c.once {
		return rc, attrs, err
	}
	c.once = true
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, store.Attrs{}, err
	}
	p, err := pointer.Decode(b)
	if assert.NoError(c.t, err) {
		p.Seq += 5
		_, err = pointer.Write(ctx, c.Store, p, attrs.ETag)
		assert.NoError(c.t, err)
	}
	return io.NopCloser(bytes.NewReader(b)), attrs, nil
}

// TestPointerCorruptedBeforeRegistrationIsNotRewritten: when the pointer
// changes between the collector's check and its registration, the
// registration's CAS fails and the pointer is read again; read corrupt,
// it is refused like one found corrupt at first, and left as it is.
func TestPointerCorruptedBeforeRegistrationIsNotRewritten(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := dataset(s)
		var last *pointer.Pointer
		for i := range 3 {
			last = publish(t, d, false, files(1, fmt.Sprint(i)))
		}
		gens := keysUnder(t, s, generation.Dir)
		hook := &corruptAfterRead{Store: s, t: t}
		counted := store.Count(hook)

		_, err := gc.Run(ctx, counted, strict())
		require.ErrorIs(t, err, gc.ErrRefused)
		require.ErrorIs(t, err, pointer.ErrCorrupt)
		assert.Contains(t, err.Error(), fmt.Sprintf("pointer %q: ", pointer.Key))
		assert.Contains(t, err.Error(), fmt.Sprintf("seq 8 does not match manifest %q (seq 3)", last.Manifest))
		require.True(t, hook.once, "the pointer was corrupted after the run read it")

		after, _, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		assert.EqualValues(t, 8, after.Seq)
		assert.Zero(t, after.GCToken, "no lease token was registered in the corrupt pointer")
		n := counted.Counts()
		assert.Zero(t, n[store.OpDelete]+n[store.OpDeleteMany], "nothing was deleted (%s)", n)
		assert.Equal(t, gens, keysUnder(t, s, generation.Dir), "every generation is still there")
	})
}

// TestCorruptPointerSeqRefused: a pointer whose seq differs from its
// manifest's is corrupt; the collector refuses to plan from it and writes
// nothing, its lease and the pointer included (I8).
func TestCorruptPointerSeqRefused(t *testing.T) {
	ctx := context.Background()
	s := storeFor(t)
	d := dataset(s)
	for i := range 4 {
		publish(t, d, false, files(1, string(rune('a'+i))))
	}
	p, attrs, err := pointer.Read(ctx, s)
	require.NoError(t, err)
	p.Seq += 5
	_, err = pointer.Write(ctx, s, p, attrs.ETag)
	require.NoError(t, err)
	before := stateOf(t, s)

	_, err = gc.Run(ctx, s, strict())
	require.ErrorIs(t, err, gc.ErrRefused)
	require.ErrorIs(t, err, pointer.ErrCorrupt)
	assert.Equal(t, before, stateOf(t, s), "nothing was deleted or written")
}
