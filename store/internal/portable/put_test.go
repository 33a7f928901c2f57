package portable

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
)

// onlyReader hides a reader's other methods, so that it cannot seek.
type onlyReader struct{ io.Reader }

// TestReadSplitsEveryBodyByItsLength checks Read's rules over random
// bodies, declared sizes, limits, conditions and kinds of reader: a body
// that fits the limit goes in one request, a longer one in parts unless it
// is conditional, and a body whose length is not its declared size fails,
// at Read or while its parts are read, never silently.
func TestReadSplitsEveryBodyByItsLength(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range 5000 {
		limit := int64(1 + r.IntN(200))
		n := int64(r.IntN(400))
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		var want int64 // the declared size
		switch r.IntN(4) {
		case 1:
			want = n
		case 2:
			want = max(1, n+int64(r.IntN(5))-2)
		case 3:
			want = 1 + int64(r.IntN(400))
		}
		offset := int64(0)
		var body io.Reader
		seekable := r.IntN(2) == 0
		if seekable {
			// A seekable body is read from its offset, which Read keeps.
			offset = int64(r.IntN(3))
			br := bytes.NewReader(append(make([]byte, offset), data...))
			_, err := br.Seek(offset, io.SeekStart)
			require.NoError(t, err)
			body = br
		} else {
			body = onlyReader{iotestHalfReader{bytes.NewReader(data)}}
		}

		opts := store.PutOptions{Size: want}
		maxConditional := int64(1 + r.IntN(300))
		switch r.IntN(4) {
		case 1:
			opts.IfNoneMatch = true
		case 2:
			opts.IfMatch = "e"
		}
		conditional := opts.IfNoneMatch || opts.IfMatch != ""
		if conditional {
			limit = maxConditional
		}

		b, err := read(body, opts, limit, 1000, maxConditional)
		mismatch := want > 0 && want != n
		tooLarge := conditional && max(n, want) > maxConditional
		if err != nil {
			require.Truef(t, mismatch || tooLarge, "case %d: n=%d want=%d limit=%d conditional=%v: %v", i, n, want, limit, conditional, err)
			continue
		}
		require.Falsef(t, tooLarge, "case %d: a conditional body of %d bytes (Size %d) was accepted over %d", i, n, want, maxConditional)
		if b.Single != nil {
			require.Falsef(t, mismatch, "case %d: a body of %d bytes went in one request under Size %d", i, n, want)
			require.LessOrEqualf(t, n, limit, "case %d", i)
			require.Equalf(t, n, b.Size, "case %d", i)
			if seekable {
				assert.Same(t, body, b.Single.(*seekBody).rs, "a seekable body is sent as it is, not copied")
			}
			for range 2 { // an attempt, and a retry that rewinds the body
				got, err := io.ReadAll(b.Single)
				require.NoError(t, err)
				require.Equalf(t, data, got, "case %d", i)
				_, err = b.Single.Seek(0, io.SeekStart)
				require.NoError(t, err)
			}
			continue
		}
		require.Greaterf(t, n, limit, "case %d: a body of %d bytes went in parts under a limit of %d", i, n, limit)
		var got []byte
		if r.IntN(2) == 0 {
			got, err = io.ReadAll(b.Parts)
		} else {
			got, err = readParts(b.Parts, int(limit)) // as minio does
		}
		if mismatch {
			require.Errorf(t, err, "case %d: parts of %d bytes read to the end under Size %d", i, n, want)
			continue
		}
		require.NoError(t, err)
		require.Equalf(t, data, got, "case %d", i)
	}
}

// readParts reads r in parts of n bytes with Fill, into one buffer.
func readParts(r io.Reader, n int) ([]byte, error) {
	var all, buf []byte
	for {
		var eof bool
		var err error
		buf, eof, err = Fill(r, buf, n)
		all = append(all, buf...)
		if err != nil || eof || len(buf) == 0 {
			return all, err
		}
	}
}

// TestFillTakesTheBytesReadHolds checks that the first part of a streamed
// body in parts is the buffer Read filled, not a copy of it, and that the
// parts after it are read into that buffer.
func TestFillTakesTheBytesReadHolds(t *testing.T) {
	data := []byte("0123456789abcdefghij")
	b, err := Read(onlyReader{bytes.NewReader(data)}, store.PutOptions{Size: 20}, 8, 100)
	require.NoError(t, err)
	require.NotNil(t, b.Parts)
	head := b.Parts.(*sized).head
	var parts []string
	var buf []byte
	for {
		var eof bool
		buf, eof, err = Fill(b.Parts, buf, 8)
		require.NoError(t, err)
		require.Same(t, &head[0], &buf[:1][0], "a part is read into a buffer of its own")
		parts = append(parts, string(buf))
		if eof {
			break
		}
	}
	assert.Equal(t, []string{"01234567", "89abcdef", "ghij"}, parts)
}

// iotestHalfReader returns at most half of what is asked each time, so
// that reading to a limit takes several calls.
type iotestHalfReader struct{ r io.Reader }

func (h iotestHalfReader) Read(p []byte) (int, error) {
	return h.r.Read(p[:(len(p)+1)/2])
}

func TestCheckRefusesWhatNoDriverSends(t *testing.T) {
	for _, c := range []struct {
		name string
		body io.Reader
		opts store.PutOptions
		want string
	}{
		{"nil body", nil, store.PutOptions{}, "nil body"},
		{"negative size", strings.NewReader("x"), store.PutOptions{Size: -1}, "out of range"},
		{"size above the largest object", strings.NewReader("x"), store.PutOptions{Size: 11}, "out of range"},
		{"both conditions", strings.NewReader("x"), store.PutOptions{IfMatch: "e", IfNoneMatch: true}, "exclusive"},
	} {
		err := Check(c.body, c.opts, 10)
		require.Error(t, err, c.name)
		assert.Contains(t, err.Error(), c.want, c.name)
	}
	require.NoError(t, Check(strings.NewReader("x"), store.PutOptions{Size: 10, IfMatch: "e"}, 10))
}

func TestConditionalBodyIsOneRequestWhateverTheLimit(t *testing.T) {
	for _, opts := range []store.PutOptions{{IfNoneMatch: true}, {IfMatch: "e"}} {
		b, err := Read(onlyReader{strings.NewReader("0123456789")}, opts, 4, 1<<40)
		require.NoError(t, err)
		require.NotNil(t, b.Single, "a conditional body under MaxConditionalSize goes in one request")
		assert.EqualValues(t, 10, b.Size)

		opts.Size = store.MaxConditionalSize + 1
		_, err = Read(onlyReader{strings.NewReader("x")}, opts, 4, 1<<40)
		require.ErrorContains(t, err, "conditional write is one request")
	}
}

// unseekable fails every Seek, as a pipe does.
type unseekable struct{ io.Reader }

func (unseekable) Seek(int64, int) (int64, error) { return 0, errors.New("illegal seek") }

func TestBodyThatCannotSeekIsRead(t *testing.T) {
	b, err := Read(unseekable{strings.NewReader("abc")}, store.PutOptions{}, 8, 100)
	require.NoError(t, err)
	require.NotNil(t, b.Single)
	got, err := io.ReadAll(b.Single)
	require.NoError(t, err)
	assert.Equal(t, "abc", string(got))
}

func TestFillStopsAtTheLimit(t *testing.T) {
	buf, eof, err := Fill(strings.NewReader("abcdef"), nil, 4)
	require.NoError(t, err)
	assert.False(t, eof)
	assert.Equal(t, "abcd", string(buf))
	buf, eof, err = Fill(strings.NewReader("ab"), buf, 4)
	require.NoError(t, err)
	assert.True(t, eof)
	assert.Equal(t, "ab", string(buf))
}

// endless is a body that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestPartsFailOnceTheyPassTheSize checks that a body longer than its
// declared Size fails as soon as it passes it, not when it ends: a body
// that never ends must not upload forever.
func TestPartsFailOnceTheyPassTheSize(t *testing.T) {
	b, err := Read(onlyReader{endless{}}, store.PutOptions{Size: 100}, 10, 1000)
	require.NoError(t, err)
	require.NotNil(t, b.Parts)
	n, err := io.Copy(io.Discard, io.LimitReader(b.Parts, 10_000))
	require.ErrorContains(t, err, "longer than Size 100")
	assert.Less(t, n, int64(10_000))
}

// TestSingleRewindsToTheBodysOffset checks that a seekable body sent in
// one request reads, and rewinds, as the body from the caller's offset:
// minio-go seeks a body to 0 before each attempt, and azblob refuses one
// whose offset is not 0, so Single must start at 0 where the body starts.
func TestSingleRewindsToTheBodysOffset(t *testing.T) {
	data := []byte("skip-the-body")
	for _, opts := range []store.PutOptions{{}, {Size: 9}, {IfNoneMatch: true}} {
		body := bytes.NewReader(data)
		_, err := body.Seek(4, io.SeekStart)
		require.NoError(t, err)
		b, err := Read(body, opts, 100, 1000)
		require.NoError(t, err)
		require.NotNil(t, b.Single)
		require.EqualValues(t, 9, b.Size)

		pos, err := b.Single.Seek(0, io.SeekCurrent)
		require.NoError(t, err)
		assert.Zero(t, pos, "Single does not start at 0")
		end, err := b.Single.Seek(0, io.SeekEnd)
		require.NoError(t, err)
		assert.EqualValues(t, 9, end, "Single does not end at Size")
		for range 2 { // an attempt, then a retry that rewinds
			pos, err := b.Single.Seek(0, io.SeekStart)
			require.NoError(t, err)
			require.Zero(t, pos)
			got, err := io.ReadAll(b.Single)
			require.NoError(t, err)
			assert.Equal(t, "-the-body", string(got), "Single is not the body from its offset")
		}
		_, err = b.Single.Seek(-1, io.SeekStart)
		require.Error(t, err, "Single seeks before its start")
	}
}

// noEnd is a body whose Seek works for io.SeekCurrent and io.SeekStart but not
// io.SeekEnd, as for a file in /proc.
type noEnd struct{ *bytes.Reader }

func (r noEnd) Seek(off int64, whence int) (int64, error) {
	if whence == io.SeekEnd {
		return 0, errors.New("invalid argument")
	}
	return r.Reader.Seek(off, whence)
}

// TestBodyThatCannotSeekToItsEndIsRead checks that a body that can tell
// its offset but not seek to its end (a file in /proc: lseek SEEK_END is
// EINVAL) is read from its offset like a stream, as every driver did
// before Read measured seekable bodies, instead of failing the Put.
func TestBodyThatCannotSeekToItsEndIsRead(t *testing.T) {
	for _, limit := range []int64{100, 4} {
		body := noEnd{bytes.NewReader([]byte("..status"))}
		_, err := body.Seek(2, io.SeekStart)
		require.NoError(t, err)
		b, err := Read(body, store.PutOptions{}, limit, 1000)
		require.NoError(t, err, "limit %d", limit)
		r := b.Parts
		if b.Single != nil {
			r = b.Single
			assert.EqualValues(t, 6, b.Size)
		}
		got, err := io.ReadAll(r)
		require.NoError(t, err)
		assert.Equal(t, "status", string(got), "limit %d", limit)
	}
}

// moved is a body whose end, as Seek finds it, is by off bytes not where
// its reads end: a file that grew (off < 0) or shrank (off > 0) after its
// size was taken.
type moved struct {
	*bytes.Reader
	off int64
}

func (m *moved) Seek(offset int64, whence int) (int64, error) {
	if whence == io.SeekEnd {
		offset += m.off
	}
	return m.Reader.Seek(offset, whence)
}

// TestSeekableBodyThatMovedFailsBeforeItsEnd checks that a seekable body
// whose reads do not end at its declared Size fails, in one request and
// in parts, and that one that grew fails before it hands over its last
// byte: an HTTP transport sends Content-Length bytes, and the server
// stores them, before it reads on to find that the body is longer.
func TestSeekableBodyThatMovedFailsBeforeItsEnd(t *testing.T) {
	for _, c := range []struct {
		name  string
		data  string
		off   int64
		limit int64
	}{
		{"grew", "hello, world", -7, 100},
		{"shrank", "hello", 7, 100},
		{"grew-parts", "hello, world", -7, 2},
		{"shrank-parts", "hello", 7, 2},
	} {
		size := int64(len(c.data)) + c.off
		b, err := Read(&moved{bytes.NewReader([]byte(c.data)), c.off}, store.PutOptions{Size: size}, c.limit, 1000)
		require.NoError(t, err, c.name)
		r := b.Parts
		if b.Single != nil {
			r = b.Single
		}
		// As net/http sends a body of known length: Size bytes, then a read
		// to check that there is no more.
		n, err := io.Copy(io.Discard, io.LimitReader(r, size))
		if err == nil {
			assert.Less(t, n, size, "%s: a body that is not Size bytes handed over all of them", c.name)
		}
		_, err = io.ReadAll(r)
		require.Error(t, err, c.name)
	}
}

// TestSmallBodyIsReadIntoASmallBuffer checks that a small streamed body
// costs about its size, not the limit: a conditional Put's limit is
// store.MaxConditionalSize (1 GiB), and every lease and pointer write is
// a small conditional Put of known size.
func TestSmallBodyIsReadIntoASmallBuffer(t *testing.T) {
	for _, opts := range []store.PutOptions{
		{Size: 100}, {Size: 100, IfNoneMatch: true}, {Size: 100, IfMatch: "e"}, {}, {IfNoneMatch: true},
	} {
		body := onlyReader{bytes.NewReader(make([]byte, 100))}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b, err := Read(body, opts, 16<<20, 1<<40)
		runtime.ReadMemStats(&after)
		require.NoError(t, err)
		require.EqualValues(t, 100, b.Size)
		alloc := after.TotalAlloc - before.TotalAlloc
		assert.Less(t, alloc, uint64(1<<20), "%+v: a 100-byte body allocated %d KiB", opts, alloc>>10)
	}
}
