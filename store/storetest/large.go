package storetest

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
)

// LargeConditional checks that conditions hold for a body far above any
// driver's single-request threshold (20 MiB): a create of an existing key
// and a compare-and-swap against a replaced ETag both fail, whatever path
// the driver takes. Run it against a server that cannot complete a
// multipart upload conditionally (some ignore the conditions there) to
// prove the driver never takes that path for a conditional write.
func LargeConditional(t *testing.T, s store.Store) {
	ctx := context.Background()
	const size = 20 << 20
	body := func(fill byte) *bytes.Reader { return bytes.NewReader(bytes.Repeat([]byte{fill}, size)) }
	a, err := s.Put(ctx, "large/cas", body('a'), store.PutOptions{IfNoneMatch: true, Size: size})
	require.NoError(t, err)
	_, err = s.Put(ctx, "large/cas", body('x'), store.PutOptions{IfNoneMatch: true, Size: size})
	RequireRefused(t, err, "create-if-absent of an existing key, 20 MiB")

	// Two writers read ETag a; the first swap wins, the second must lose.
	b, err := s.Put(ctx, "large/cas", body('b'), store.PutOptions{IfMatch: a.ETag, Size: size})
	require.NoError(t, err)
	_, err = s.Put(ctx, "large/cas", body('c'), store.PutOptions{IfMatch: a.ETag, Size: size})
	RequireRefused(t, err, "a compare-and-swap against a replaced ETag, 20 MiB: a lost update")

	h, err := s.Head(ctx, "large/cas")
	require.NoError(t, err)
	assert.Equal(t, b.ETag, h.ETag)
	rc, _, err := s.Get(ctx, "large/cas")
	require.NoError(t, err)
	defer rc.Close()
	first := make([]byte, 1)
	_, err = rc.Read(first)
	require.NoError(t, err)
	assert.Equal(t, "b", string(first), "the winner's body is stored")
}

// RequireRefused requires that a conditional write of a large body failed
// its condition. Normally that is ErrPrecondition; but a server may answer
// 412 and close the connection before it has read a large body, and the
// client then sees the connection reset while sending. That is no proof of
// a refusal (callers settle it by reading back), so the caller must also
// check that the object is unchanged.
func RequireRefused(t *testing.T, err error, msg string) {
	t.Helper()
	require.Error(t, err, msg)
	if errors.Is(err, store.ErrPrecondition) {
		return
	}
	require.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE),
		"%s: want a precondition failure (or a reset while sending the body), got %v", msg, err)
	t.Logf("%s: the server closed the connection while the body was sent: %v", msg, err)
}
