package portable_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/portable"
)

// fake is a Driver that records its calls and answers as told.
type fake struct {
	err     error                                   // every call's error
	missing map[string]bool                         // keys Head reports missing
	batch   func(keys []string) []portable.KeyError // DeleteBatch's per-key failures
	batches [][]string
	puts    int
	list    store.ListRequest
	ranges  [][2]int64 // the off and n of each GetRange
	size    int64      // the object's size GetRange reports
	closed  bool       // GetRange's body was closed
}

func (f *fake) Get(context.Context, string) (io.ReadCloser, store.Attrs, error) {
	return io.NopCloser(strings.NewReader("")), store.Attrs{}, f.err
}

func (f *fake) GetRange(_ context.Context, _ string, off, n int64) (io.ReadCloser, store.Attrs, error) {
	f.ranges = append(f.ranges, [2]int64{off, n})
	return &closer{Reader: strings.NewReader(""), closed: &f.closed}, store.Attrs{Size: f.size}, f.err
}

type closer struct {
	io.Reader
	closed *bool
}

func (c *closer) Close() error { *c.closed = true; return nil }

func (f *fake) Head(_ context.Context, key string) (store.Attrs, error) {
	if f.missing[key] {
		return store.Attrs{}, portable.Classify(store.ErrNotExist, nil)
	}
	return store.Attrs{}, f.err
}

func (f *fake) Put(context.Context, string, portable.Body, store.PutOptions) (store.Attrs, error) {
	f.puts++
	return store.Attrs{}, f.err
}

func (f *fake) Delete(context.Context, string, string) error { return f.err }

func (f *fake) DeleteBatch(_ context.Context, keys []string) ([]portable.KeyError, error) {
	f.batches = append(f.batches, keys)
	if f.err != nil {
		return nil, f.err
	}
	if f.batch != nil {
		return f.batch(keys), nil
	}
	return nil, nil
}

func (f *fake) List(_ context.Context, req store.ListRequest) (store.ListPage, error) {
	f.list = req
	return store.ListPage{}, f.err
}

func newBucket(f *fake) *portable.Bucket {
	return portable.New(f, portable.Limits{MaxObject: 100, Part: func(int64) int64 { return 10 }})
}

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("k%04d", i)
	}
	return out
}

func TestDeleteManyGoesInBatches(t *testing.T) {
	f := &fake{}
	require.NoError(t, newBucket(f).DeleteMany(context.Background(), keys(2500)))
	var sizes []int
	for _, b := range f.batches {
		sizes = append(sizes, len(b))
	}
	assert.Equal(t, []int{store.MaxDeleteBatch, store.MaxDeleteBatch, 500}, sizes)
	require.NoError(t, newBucket(f).DeleteMany(context.Background(), nil))
	assert.Len(t, f.batches, 3, "no keys, no request")
}

func TestDeleteManyNamesEveryKeyNotDeleted(t *testing.T) {
	f := &fake{batch: func(keys []string) []portable.KeyError {
		return []portable.KeyError{
			{Key: keys[0], Err: portable.Classify(store.ErrNotExist, errors.New("NoSuchKey"))}, // gone: not a failure
			{Key: keys[1], Err: portable.Classify(store.ErrAccess, errors.New("AccessDenied"))},
			{Key: keys[2], Err: portable.Classify(nil, errors.New("InternalError"))},
		}
	}}
	err := newBucket(f).DeleteMany(context.Background(), keys(1500))
	require.Error(t, err)
	var oe *store.OpError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "delete-many", oe.Op)
	assert.Equal(t, "k0001", oe.Key, "the first key not deleted")
	assert.ErrorIs(t, err, store.ErrAccess, "the first failure's class")
	assert.Contains(t, err.Error(), `4 keys not deleted ("k0001", "k0002", "k1001", "k1002")`)
	assert.Contains(t, err.Error(), `the first failed with "k0001"`)
	assert.Contains(t, err.Error(), "AccessDenied")
}

func TestDeleteManyNamesTheKeysAfterAFailedBatch(t *testing.T) {
	f := &fake{}
	b := newBucket(f)
	ks := keys(2500)
	f.batch = func(batch []string) []portable.KeyError {
		f.err = portable.Classify(store.ErrNoBucket, errors.New("NoSuchBucket")) // the next batch fails whole
		return []portable.KeyError{{Key: batch[5], Err: errors.New("SlowDown")}}
	}
	err := b.DeleteMany(context.Background(), ks)
	var oe *store.OpError
	require.ErrorAs(t, err, &oe)
	assert.Equal(t, "k0005", oe.Key)
	assert.ErrorIs(t, err, store.ErrNoBucket)
	assert.Contains(t, err.Error(), `1501 keys not deleted ("k0005", "k1000", "k1001", "k1002", "k1003" and 1496 more)`)
	assert.Len(t, f.batches, 2, "no batch after one that failed")
}

func TestErrorsNameTheOperationAndKey(t *testing.T) {
	ctx := context.Background()
	f := &fake{err: portable.Classify(store.ErrAccess, errors.New("denied"))}
	b := newBucket(f)
	_, _, getErr := b.Get(ctx, "g")
	_, _, rangeErr := b.GetRange(ctx, "r", 0, 1)
	_, headErr := b.Head(ctx, "h")
	_, putErr := b.Put(ctx, "p", strings.NewReader("x"), store.PutOptions{})
	delErr := b.Delete(ctx, "d", store.DeleteOptions{})
	_, listErr := b.List(ctx, store.ListRequest{Prefix: "l/"})
	for _, c := range []struct {
		err     error
		op, key string
	}{{getErr, "get", "g"}, {rangeErr, "get", "r"}, {headErr, "head", "h"}, {putErr, "put", "p"}, {delErr, "delete", "d"}, {listErr, "list", "l/"}} {
		var oe *store.OpError
		require.ErrorAs(t, c.err, &oe, c.op)
		assert.Equal(t, c.op, oe.Op)
		assert.Equal(t, c.key, oe.Key)
		assert.ErrorIs(t, c.err, store.ErrAccess, c.op)
		assert.Equal(t, fmt.Sprintf("%s %q: store: access denied: denied", c.op, c.key), c.err.Error())
	}

	// An error that names its key already is passed on.
	named := store.Wrap("delete", "other", store.ErrAccess, nil)
	f.err = named
	assert.Same(t, named, b.Delete(ctx, "d", store.DeleteOptions{}))
}

func TestPutIsCheckedBeforeAnyRequest(t *testing.T) {
	ctx := context.Background()
	f := &fake{}
	b := newBucket(f)
	for _, c := range []struct {
		name string
		opts store.PutOptions
		want string
	}{
		{"both conditions", store.PutOptions{IfMatch: "e", IfNoneMatch: true}, "exclusive"},
		{"above the largest object", store.PutOptions{Size: 101}, "out of range"},
	} {
		_, err := b.Put(ctx, "k", strings.NewReader("x"), c.opts)
		require.ErrorContains(t, err, c.want, c.name)
		var oe *store.OpError
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, "k", oe.Key)
	}
	assert.Zero(t, f.puts, "a refused Put sent a request")
	_, err := b.Put(ctx, "k", strings.NewReader("x"), store.PutOptions{Size: 1, IfMatch: "e"})
	require.NoError(t, err)
	assert.Equal(t, 1, f.puts)
}

func TestListAsksForAtMostAPage(t *testing.T) {
	f := &fake{}
	b := newBucket(f)
	for _, c := range []struct{ in, want int }{{0, store.MaxListPage}, {-1, store.MaxListPage}, {store.MaxListPage + 1, store.MaxListPage}, {7, 7}} {
		_, err := b.List(context.Background(), store.ListRequest{MaxKeys: c.in})
		require.NoError(t, err)
		assert.Equal(t, c.want, f.list.MaxKeys, "MaxKeys %d", c.in)
	}
}

func TestDeleteOfAMissingKeySucceeds(t *testing.T) {
	ctx := context.Background()
	f := &fake{err: portable.Classify(store.ErrNotExist, errors.New("404"))}
	require.NoError(t, newBucket(f).Delete(ctx, "k", store.DeleteOptions{}))
	f = &fake{err: portable.Classify(store.ErrPrecondition, errors.New("412")), missing: map[string]bool{"k": true}}
	require.NoError(t, newBucket(f).Delete(ctx, "k", store.DeleteOptions{IfMatch: "e"}), "412 for a key that is gone")
}

func TestGetRangeIsCheckedBeforeAnyRequest(t *testing.T) {
	ctx := context.Background()
	f := &fake{size: 10}
	b := newBucket(f)
	for _, c := range []struct{ off, n int64 }{{-1, 1}, {0, 0}, {5, -1}, {math.MinInt64, math.MaxInt64}} {
		_, _, err := b.GetRange(ctx, "k", c.off, c.n)
		require.ErrorContains(t, err, "bad range", "offset %d, length %d", c.off, c.n)
		var oe *store.OpError
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, "k", oe.Key)
	}
	assert.Empty(t, f.ranges, "a refused GetRange sent a request")
	_, _, err := b.GetRange(ctx, "k", 0, 1)
	require.NoError(t, err)
	assert.Equal(t, [][2]int64{{0, 1}}, f.ranges)
}

// TestGetRangeToTheEndDoesNotOverflow: a length past the largest offset
// asks for the rest of the object, with a last byte (off+n-1) that does
// not wrap around.
func TestGetRangeToTheEndDoesNotOverflow(t *testing.T) {
	f := &fake{size: 100}
	_, _, err := newBucket(f).GetRange(context.Background(), "k", 10, math.MaxInt64)
	require.NoError(t, err)
	require.Len(t, f.ranges, 1)
	off, n := f.ranges[0][0], f.ranges[0][1]
	assert.Equal(t, int64(10), off)
	assert.GreaterOrEqual(t, off+n-1, off, "the last byte wrapped around")
}

func TestRangeHeaderNamesTheLastByte(t *testing.T) {
	for _, c := range []struct {
		off, n int64
		want   string
	}{{0, 1, "bytes=0-0"}, {0, 10, "bytes=0-9"}, {7, 3, "bytes=7-9"}, {1, math.MaxInt64 - 1, "bytes=1-9223372036854775806"}} {
		assert.Equal(t, c.want, portable.RangeHeader(c.off, c.n))
	}
}

// TestRangeOfChecksTheAnsweredRange: the Content-Range of a ranged GET's
// answer gives the whole object's size, and one that is not the range asked
// for (absent: the whole object; another start; past the range's end) is
// refused; one that says the object ends at or before the range's start is
// store.ErrInvalidRange.
func TestRangeOfChecksTheAnsweredRange(t *testing.T) {
	for _, c := range []struct {
		contentRange string
		off, n       int64
		want         int64 // -2: refused
	}{
		{"bytes 0-9/1234", 0, 10, 1234},
		{"bytes 5-5/6", 5, 1, 6},
		{"bytes 5-7/8", 5, 10, 8},  // the object ends first
		{"bytes 0-9/*", 0, 10, -1}, // the service does not know
		{"", 0, 10, -2},            // no Content-Range: the whole object
		{"bytes 0-2/10", 5, 3, -2}, // another start
		{"bytes 5-9/10", 5, 3, -2}, // past the range's end
		{"bytes 5-8/10", 5, 3, -2}, // a byte past it
		{"bytes 5-9/9", 5, 5, -2},  // past the object's end
		{"bytes 7-5/10", 7, 3, -2},
		{"bytes 0-9/x", 0, 10, -2},
		{"bytes 0-9/-3", 0, 10, -2},
		{"items 0-9/10", 0, 10, -2},
		{"bytes 0-x/10", 0, 10, -2},
		{"bytes 10-9/10", 10, 1, -3}, // from the end: Azurite's answer
		{"bytes 0--1/0", 0, 1, -3},   // an empty object
		{"bytes 12-12/10", 12, 1, -3},
	} {
		got, err := portable.RangeOf(c.contentRange, c.off, c.n)
		if c.want == -3 {
			assert.ErrorIs(t, err, store.ErrInvalidRange, "%q for %d+%d", c.contentRange, c.off, c.n)
			continue
		}
		if c.want == -2 {
			assert.NotErrorIs(t, err, store.ErrInvalidRange, "%q for %d+%d", c.contentRange, c.off, c.n)
			assert.Error(t, err, "%q for %d+%d", c.contentRange, c.off, c.n)
			continue
		}
		assert.NoError(t, err, "%q", c.contentRange)
		assert.Equal(t, c.want, got, "%q", c.contentRange)
	}
}

// TestGetRangeFromTheEndIsInvalid: a service that answers a range from the
// object's end on with an empty body (Azurite does) gets
// store.ErrInvalidRange all the same, and its body is closed.
func TestGetRangeFromTheEndIsInvalid(t *testing.T) {
	ctx := context.Background()
	f := &fake{size: 10}
	_, _, err := newBucket(f).GetRange(ctx, "k", 10, 1)
	require.ErrorIs(t, err, store.ErrInvalidRange)
	assert.Contains(t, err.Error(), `get "k"`)
	assert.True(t, f.closed, "the body was left open")

	f = &fake{size: 10}
	rc, a, err := newBucket(f).GetRange(ctx, "k", 9, 1)
	require.NoError(t, err, "the last byte")
	assert.EqualValues(t, 10, a.Size)
	require.NoError(t, rc.Close())

	f = &fake{size: -1}
	rc, _, err = newBucket(f).GetRange(ctx, "k", 10, 1)
	require.NoError(t, err, "a service that does not say the size is taken at its word")
	require.NoError(t, rc.Close())
}
