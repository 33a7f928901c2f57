package commit_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

const testPart = generation.MinPartSize

// seededBytes returns n bytes from rng.
func seededBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// putOne commits data at path in a fresh dataset of s, with opts, and
// returns the snapshot and the file's entry.
func putOne(t *testing.T, s store.Store, path string, data []byte, opts ...commit.Option) (*commit.Snapshot, generation.Entry) {
	t.Helper()
	ctx := context.Background()
	d := commit.New(s, opts...)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutBytes(ctx, path, data))
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	e, ok := snap.Manifest.Find(path)
	require.True(t, ok)
	return snap, e
}

// TestPutRecordsPartChecksumsOfFilesLongerThanAPart: a file stored as is
// and longer than one part gets the sha256 of each part; a file of one
// part, a compressed one, or a dataset that records none, gets none.
func TestPutRecordsPartChecksumsOfFilesLongerThanAPart(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	data := seededBytes(rng, 2*testPart+1)
	_, e := putOne(t, mem.New(), "f", data, commit.WithPartSize(testPart))
	require.Equal(t, int64(testPart), e.PartSize)
	require.Equal(t, 3, e.NumParts())
	for i := range 3 {
		off, n, sum := e.Part(i)
		h := sha256.Sum256(data[off : off+n])
		assert.Equal(t, hex.EncodeToString(h[:]), sum, "part %d", i)
	}
	for name, c := range map[string]struct {
		size int
		opts []commit.Option
	}{
		"one part":        {testPart, []commit.Option{commit.WithPartSize(testPart)}},
		"compressed":      {3 * testPart, []commit.Option{commit.WithPartSize(testPart), commit.WithCompression(true)}},
		"none recorded":   {3 * testPart, []commit.Option{commit.WithPartSize(0)}},
		"the default":     {3 * testPart, nil},
		"below the least": {testPart + 1, []commit.Option{commit.WithPartSize(1)}},
	} {
		t.Run(name, func(t *testing.T) {
			_, e := putOne(t, mem.New(), "f", seededBytes(rng, c.size), c.opts...)
			if name == "below the least" {
				assert.Equal(t, int64(generation.MinPartSize), e.PartSize, "held at the least")
				return
			}
			assert.False(t, e.HasParts())
		})
	}
}

// TestOpenRangeReadsOnlyThePartsItTouches: over random ranges, OpenRange
// delivers the range's bytes from one ranged GET of exactly the parts the
// range touches.
func TestOpenRangeReadsOnlyThePartsItTouches(t *testing.T) {
	for _, name := range []string{"mem", "s3"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(5, 6))
			data := seededBytes(rng, 4*testPart+100)
			log := &testenv.Gets{Store: testenv.StoreNamed(t, name)}
			snap, e := putOne(t, log, "f", data, commit.WithPartSize(testPart))
			log.Take()
			// Ranges that start or end at a part's bounds, then random ones.
			ranges := [][2]int64{{0, testPart}, {testPart, testPart}, {testPart - 1, 2}, {testPart - 1, 1},
				{0, int64(len(data))}, {4 * testPart, 100}, {int64(len(data)) - 1, 1}, {3*testPart + 1, testPart - 1}}
			for range 40 {
				off := rng.Int64N(int64(len(data)))
				ranges = append(ranges, [2]int64{off, 1 + rng.Int64N(int64(len(data))-off)})
			}
			for _, r := range ranges {
				off, n := r[0], r[1]
				rc, err := snap.OpenRange(ctx, e, off, n)
				require.NoError(t, err)
				got, err := io.ReadAll(rc)
				require.NoError(t, err)
				require.NoError(t, rc.Close())
				require.True(t, bytes.Equal(data[off:off+n], got), "bytes %d+%d", off, n)
				first, last := off/testPart, (off+n-1)/testPart
				end := min((last+1)*testPart, int64(len(data)))
				require.Equal(t, [][2]int64{{first * testPart, end - first*testPart}}, log.Ranges(), "bytes %d+%d", off, n)
			}
		})
	}
}

// cutBody is a store whose ranged bodies end after at most keep bytes:
// cleanly (a server that sends less than it said), or with err.
type cutBody struct {
	store.Store
	keep int64
	err  error
}

func (c *cutBody) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	rc, attrs, err := c.Store.GetRange(ctx, key, off, n)
	if err != nil {
		return nil, attrs, err
	}
	var r io.Reader = io.LimitReader(rc, c.keep)
	if c.err != nil {
		r = io.MultiReader(r, iotest.ErrReader(c.err))
	}
	return struct {
		io.Reader
		io.Closer
	}{r, rc}, attrs, nil
}

// failingRanges is a store whose ranged GETs fail with err.
type failingRanges struct {
	store.Store
	err error
}

func (f *failingRanges) GetRange(context.Context, string, int64, int64) (io.ReadCloser, store.Attrs, error) {
	return nil, store.Attrs{}, f.err
}

// TestOpenRangeReportsAFailedRequestAsItIs: a ranged GET that fails, or
// whose body breaks off, is reported with its cause, not as a mismatch.
func TestOpenRangeReportsAFailedRequestAsItIs(t *testing.T) {
	ctx := context.Background()
	data := seededBytes(rand.New(rand.NewPCG(15, 16)), 3*testPart)
	refused := fmt.Errorf("get %q: %w", "k", store.ErrAccess)
	fail := &failingRanges{Store: mem.New(), err: refused}
	snap, e := putOne(t, fail, "f", data, commit.WithPartSize(testPart))
	_, err := snap.OpenRange(ctx, e, 0, 10)
	require.ErrorIs(t, err, store.ErrAccess)
	require.NotErrorIs(t, err, commit.ErrChecksum)

	broken := errors.New("connection reset")
	cut := &cutBody{Store: mem.New(), keep: testPart + 10, err: broken}
	snap, e = putOne(t, cut, "f", data, commit.WithPartSize(testPart))
	rc, err := snap.OpenRange(ctx, e, 0, 2*testPart)
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	rc.Close()
	require.ErrorIs(t, err, broken)
	require.NotErrorIs(t, err, commit.ErrChecksum)
	require.Equal(t, data[:testPart], got, "the part that matched, and nothing of the broken one")
}

// TestOpenRangeTakesABodyEndingWithinAPartAsAMismatch: a body that ends
// before the part it holds is a checksum mismatch, and none of the part's
// bytes is delivered.
func TestOpenRangeTakesABodyEndingWithinAPartAsAMismatch(t *testing.T) {
	ctx := context.Background()
	data := seededBytes(rand.New(rand.NewPCG(13, 14)), 3*testPart)
	for _, keep := range []int64{0, 10, testPart + 10} {
		cut := &cutBody{Store: mem.New(), keep: keep}
		snap, e := putOne(t, cut, "f", data, commit.WithPartSize(testPart))
		rc, err := snap.OpenRange(ctx, e, 0, 2*testPart)
		require.NoError(t, err)
		got, err := io.ReadAll(rc)
		require.ErrorIs(t, err, commit.ErrChecksum, "a body of %d bytes", keep)
		require.ErrorContains(t, err, "ends after")
		require.Equal(t, data[:keep/testPart*testPart], got, "only whole parts that matched")
		rc.Close()
	}
}

// corruptPart stores the file's object again with one byte of part i
// changed: same size, other bytes.
func corruptPart(t *testing.T, s store.Store, e generation.Entry, data []byte, i int) {
	t.Helper()
	bad := bytes.Clone(data)
	off, _, _ := e.Part(i)
	bad[off] ^= 0xff
	_, err := s.Put(context.Background(), e.Key, bytes.NewReader(bad), store.PutOptions{})
	require.NoError(t, err)
}

// TestOpenRangeDeliversNoByteOfAPartThatDoesNotMatch: a range over a
// damaged part delivers the parts before it, then fails with ErrChecksum;
// ranges that do not touch it are read as they are; ReadPart of it fails.
func TestOpenRangeDeliversNoByteOfAPartThatDoesNotMatch(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	data := seededBytes(rng, 4*testPart)
	s := mem.New()
	snap, e := putOne(t, s, "f", data, commit.WithPartSize(testPart))
	corruptPart(t, s, e, data, 2)

	rc, err := snap.OpenRange(ctx, e, 10, int64(len(data))-20)
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	require.ErrorIs(t, err, commit.ErrChecksum)
	require.ErrorContains(t, err, `"f"`)
	require.ErrorContains(t, err, "part 2")
	require.True(t, bytes.Equal(data[10:2*testPart], got), "the two good parts, and nothing of the bad one")
	rc.Close()

	for _, r := range [][2]int64{{0, 2 * testPart}, {3 * testPart, testPart}} {
		rc, err := snap.OpenRange(ctx, e, r[0], r[1])
		require.NoError(t, err)
		got, err := io.ReadAll(rc)
		require.NoError(t, err)
		require.True(t, bytes.Equal(data[r[0]:r[0]+r[1]], got))
		rc.Close()
	}
	_, err = snap.ReadPart(ctx, e, 2)
	require.ErrorIs(t, err, commit.ErrChecksum)
	for _, i := range []int{-1, 4} {
		_, err = snap.ReadPart(ctx, e, i)
		require.ErrorContains(t, err, "no part", "part %d of 4", i)
	}
	b, err := snap.ReadPart(ctx, e, 3)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data[3*testPart:], b))
}

// TestOpenRangeRefusesAnObjectOfAnotherSize: an object stored shorter or
// longer than its manifest says fails with ErrChecksum before any byte,
// and one that is gone with ErrMissing.
func TestOpenRangeRefusesAnObjectOfAnotherSize(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	data := seededBytes(rng, 3*testPart)
	for name, stored := range map[string][]byte{
		"shorter":             data[:testPart+5],
		"shorter than a part": data[:testPart-5],
		"longer":              append(bytes.Clone(data), 'x'),
	} {
		t.Run(name, func(t *testing.T) {
			s := mem.New()
			snap, e := putOne(t, s, "f", data, commit.WithPartSize(testPart))
			_, err := s.Put(ctx, e.Key, bytes.NewReader(stored), store.PutOptions{})
			require.NoError(t, err)
			_, err = snap.OpenRange(ctx, e, 2*testPart, 10)
			require.ErrorIs(t, err, commit.ErrChecksum)
		})
	}
	s := mem.New()
	snap, e := putOne(t, s, "f", data, commit.WithPartSize(testPart))
	require.NoError(t, s.Delete(ctx, e.Key, store.DeleteOptions{}))
	_, err := snap.OpenRange(ctx, e, 0, 10)
	require.ErrorIs(t, err, commit.ErrMissing)
}

// TestOpenRangeOfAFileWithoutPartsVerifiesItWhole: without part
// checksums, a range is read from the file's start, and a damaged file
// withholds the range's end and fails with ErrChecksum.
func TestOpenRangeOfAFileWithoutPartsVerifiesItWhole(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 12))
	data := seededBytes(rng, 3*testPart)
	s := mem.New()
	snap, e := putOne(t, s, "f", data, commit.WithPartSize(0))
	require.False(t, e.HasParts())
	rc, err := snap.OpenRange(ctx, e, 100, testPart)
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.True(t, bytes.Equal(data[100:100+testPart], got))
	rc.Close()

	bad := bytes.Clone(data)
	bad[len(bad)-1] ^= 1
	_, err = s.Put(ctx, e.Key, bytes.NewReader(bad), store.PutOptions{})
	require.NoError(t, err)
	rc, err = snap.OpenRange(ctx, e, 100, 50)
	require.NoError(t, err)
	got, err = io.ReadAll(rc)
	require.ErrorIs(t, err, commit.ErrChecksum)
	require.Empty(t, got, "a 50-byte range comes in one read, withheld")
	rc.Close()
}

// TestOpenRangeRefusesARangeOutsideTheFile: a range that starts before the
// file, is empty, or ends past the file, even where its end overflows, is
// refused before any request, with part checksums or without.
func TestOpenRangeRefusesARangeOutsideTheFile(t *testing.T) {
	data := seededBytes(rand.New(rand.NewPCG(21, 22)), 3*testPart)
	for name, opts := range map[string][]commit.Option{
		"with parts":    {commit.WithPartSize(testPart)},
		"without parts": {commit.WithPartSize(0)},
	} {
		t.Run(name, func(t *testing.T) {
			s := store.Count(mem.New())
			snap, e := putOne(t, s, "f", data, opts...)
			before := s.Counts()
			for _, r := range [][2]int64{{-1, 2}, {0, 0}, {e.Size - 1, 2}, {e.Size, 1},
				{1, math.MaxInt64}, {e.Size - 1, math.MaxInt64}, {2, math.MaxInt64 - 1}} {
				_, err := snap.OpenRange(context.Background(), e, r[0], r[1])
				require.ErrorContains(t, err, "outside", "range %v", r)
			}
			require.Equal(t, before, s.Counts(), "no request")
		})
	}
}

// TestReusedFileWithoutPartChecksumsGetsThemFromTheLocalFile: a file
// reused from a generation written without part checksums gets them, from
// the local file that matched it.
func TestReusedFileWithoutPartChecksumsGetsThemFromTheLocalFile(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	local := filepath.Join(t.TempDir(), "big")
	data := seededBytes(rand.New(rand.NewPCG(31, 32)), 3*testPart)
	require.NoError(t, os.WriteFile(local, data, 0o644))
	var keys []string
	for _, opts := range [][]commit.Option{{commit.WithPartSize(0)}, {commit.WithPartSize(testPart)}} {
		d := commit.New(s, opts...)
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.PutFile(ctx, "big", local))
		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
		snap, err := d.Open(ctx)
		require.NoError(t, err)
		e, _ := snap.Manifest.Find("big")
		keys = append(keys, e.Key)
		if len(keys) == 2 {
			require.Equal(t, keys[0], e.Key, "reused, not uploaded again")
			require.Equal(t, 3, e.NumParts())
			for i := range 3 {
				b, err := snap.ReadPart(ctx, e, i)
				require.NoError(t, err)
				require.Equal(t, data[i*testPart:(i+1)*testPart], b)
			}
		}
	}
}
