package store_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

func readRange(t *testing.T, s store.Store, key string, off, n int64) string {
	t.Helper()
	rc, _, err := s.GetRange(context.Background(), key, off, n)
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return string(b)
}

func TestPrefixedGetRangeReadsTheKeyUnderThePrefix(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	_, err := m.Put(ctx, "pfx/k", strings.NewReader("under"), store.PutOptions{})
	require.NoError(t, err)
	_, err = m.Put(ctx, "k", strings.NewReader("outside"), store.PutOptions{})
	require.NoError(t, err)
	assert.Equal(t, "nde", readRange(t, store.WithPrefix(m, "pfx/"), "k", 1, 3))
}

func TestCountedGetRangeIsAGet(t *testing.T) {
	ctx := context.Background()
	c := store.Count(mem.New())
	_, err := c.Put(ctx, "k", strings.NewReader("value"), store.PutOptions{})
	require.NoError(t, err)
	assert.Equal(t, "alu", readRange(t, c, "k", 1, 3))
	_, _, err = c.GetRange(ctx, "missing", 0, 1)
	require.ErrorIs(t, err, store.ErrNotExist)
	assert.Equal(t, "get=2 put=1", c.Counts().String(), "a request is counted whatever its outcome")
}

func TestLoggedGetRangeNamesItsRange(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	s := store.WithLog(mem.New(), slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	_, err := s.Put(ctx, "k", strings.NewReader("value"), store.PutOptions{})
	require.NoError(t, err)
	buf.Reset()
	assert.Equal(t, "lu", readRange(t, s, "k", 2, 2))
	_, _, err = s.GetRange(ctx, "k", 5, 1)
	require.ErrorIs(t, err, store.ErrInvalidRange)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	assert.Contains(t, lines[0], "op=get key=k")
	assert.Contains(t, lines[0], "offset=2 length=2")
	assert.NotContains(t, lines[0], "error=")
	assert.Contains(t, lines[1], "offset=5 length=1")
	assert.Contains(t, lines[1], "error=")
}
