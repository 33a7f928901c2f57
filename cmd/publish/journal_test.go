package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// journalLines is a journal's content: h, then entries.
func journalLines(t *testing.T, h journalHeader, entries ...generation.Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	require.NoError(t, enc.Encode(h))
	for _, e := range entries {
		require.NoError(t, enc.Encode(e))
	}
	return b.Bytes()
}

func entryAt(path, key string) generation.Entry {
	return generation.Entry{Path: path, Key: key, Size: 1, SHA256: strings.Repeat("0", 64)}
}

// A journal's content gives, for each path, the entry recorded last; a
// line cut short (a put killed while it wrote) is dropped and cut off;
// another header, or a line that is not an entry, starts it again.
func TestJournalParsing(t *testing.T) {
	h := journalHeader{Format: journalFormat, Dataset: "s3://b/d", Source: "/src"}
	whole := journalLines(t, h, entryAt("a", "_gen/g1/a"), entryAt("b", "_gen/g1/b"), entryAt("a", "_gen/g2/a"))

	entries, keep := parseJournal(whole, h)
	assert.Equal(t, len(whole), keep)
	assert.Equal(t, []generation.Entry{entryAt("a", "_gen/g2/a"), entryAt("b", "_gen/g1/b")}, entries)

	cut := append(append([]byte{}, whole...), []byte(`{"path":"c","key":"_gen/g2/`)...)
	entries, keep = parseJournal(cut, h)
	assert.Equal(t, len(whole), keep, "the line cut short is cut off")
	assert.Len(t, entries, 2)

	other := h
	other.Source = "/elsewhere"
	entries, keep = parseJournal(whole, other)
	assert.Zero(t, keep)
	assert.Empty(t, entries)

	bad := append(append([]byte{}, whole...), []byte("{\"path\":\"\"}\n")...)
	entries, keep = parseJournal(bad, h)
	assert.Zero(t, keep)
	assert.Empty(t, entries)

	entries, keep = parseJournal(nil, h)
	assert.Zero(t, keep)
	assert.Empty(t, entries)
}

// Whatever prefix of a journal a killed put left, parsing keeps only
// whole lines, and each entry it returns is one that was recorded.
func TestJournalAnyPrefixParses(t *testing.T) {
	h := journalHeader{Format: journalFormat, Dataset: "file:///d", Source: "/s", Into: "p/"}
	var recorded []generation.Entry
	for i := range 50 {
		recorded = append(recorded, entryAt(strings.Repeat("x", i%7+1), "_gen/g/"+strings.Repeat("k", i+1)))
	}
	whole := journalLines(t, h, recorded...)
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		n := r.IntN(len(whole) + 1)
		entries, keep := parseJournal(whole[:n], h)
		require.LessOrEqual(t, keep, n)
		if keep > 0 {
			require.Equal(t, byte('\n'), whole[keep-1])
		}
		for _, e := range entries {
			require.Contains(t, recorded, e)
		}
	}
}

// A journal is kept or removed as finish says, records what it is given,
// and is held by one put at a time.
func TestJournalKeepsRecordsAndLocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resume", journalName("mem://x", "/src", "", nil))
	h := journalHeader{Format: journalFormat, Dataset: "mem://x", Source: "/src"}
	j, entries, err := openJournal(path, h)
	require.NoError(t, err)
	assert.Empty(t, entries)
	_, _, err = openJournal(path, h)
	require.ErrorIs(t, err, errJournalBusy)
	j.record(entryAt("a", "_gen/g/a"))
	assert.Equal(t, 1, j.recorded())
	require.NoError(t, j.finish(true))

	j, entries, err = openJournal(path, h)
	require.NoError(t, err)
	assert.Equal(t, []generation.Entry{entryAt("a", "_gen/g/a")}, entries)
	assert.Zero(t, j.recorded(), "counts what this put recorded")
	require.NoError(t, j.finish(false))
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// Each of the dataset, the source, the prefix and the object settings
// names a journal of its own.
func TestJournalNames(t *testing.T) {
	base := journalName("s3://b/d", "/src", "", []string{"", "", ""})
	for _, other := range []string{
		journalName("s3://b/e", "/src", "", []string{"", "", ""}),
		journalName("s3://b/d", "/src2", "", []string{"", "", ""}),
		journalName("s3://b/d", "/src", "p/", []string{"", "", ""}),
		journalName("s3://b/d", "/src", "", []string{"AES256", "", ""}),
		journalName("s3://b/d", "/src", "", []string{"", "", "GLACIER"}),
		journalName("s3://b/d", "/sr", "c", []string{"", "", ""}),
	} {
		assert.NotEqual(t, base, other)
	}
}

// A put that fails or is interrupted before it recorded anything deletes
// what it staged, but keeps the journal of the earlier put it resumes
// from, and says what is left of that one and where.
func TestFailedPutKeepsTheJournalOfAnEarlierPut(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "resume", journalName("mem://x", "/src", "", nil))
	h := journalHeader{Format: journalFormat, Dataset: "mem://x", Source: "/src"}
	j, _, err := openJournal(path, h)
	require.NoError(t, err)
	earlier, err := generation.New()
	require.NoError(t, err)
	j.record(entryAt("a", generation.DataKey(earlier, "a")))
	j.record(entryAt("b", generation.DataKey(earlier, "b")))
	require.NoError(t, j.finish(true))

	s := mem.New()
	tx, err := commit.New(s).Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.PutBytes(ctx, "c", []byte("c")))
	j, entries, err := openJournal(path, h)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	var stderr bytes.Buffer
	cause := errors.New("the network is down")
	err = keepOrDiscard(ctx, putOptions{URL: "mem://x", Src: "/src"}, tx, j, cause, &stderr)
	require.ErrorIs(t, err, cause)

	_, err = os.Stat(path)
	require.NoError(t, err, "the earlier put's journal is kept")
	assert.Contains(t, stderr.String(), "kept what an earlier put staged, 2 files under "+generation.Prefix(earlier)+" of mem://x")
	for o, err := range store.List(ctx, s, generation.Prefix(tx.Generation()), "", "") {
		require.NoError(t, err)
		t.Errorf("%s is left: this put staged it and recorded nothing", o.Key)
	}
}
