package commit_test

// Tests that kill mutations of scripts/mutants/list which no other test
// caught.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/faultstore"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// TestUpdateObjectUnknownWhenReadBackFails: the write lands but its
// response is lost, and every read-back fails. On its last attempt the call
// cannot tell whether the write landed, so it must return ErrCommitUnknown,
// not give up as though the write had lost.
func TestUpdateObjectUnknownWhenReadBackFails(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	fs := faultstore.New(m)
	fs.Add(faultstore.Rule{Op: store.OpPut, Key: "counter", Mode: faultstore.After, Times: 1})
	fs.Add(faultstore.Rule{Op: store.OpHead, Key: "counter", Mode: faultstore.Before})
	calls := 0
	_, err := commit.UpdateObject(ctx, fs, "counter", commit.Retry{Attempts: 1, Base: time.Millisecond, Max: time.Millisecond},
		func(old []byte, exists bool) ([]byte, error) {
			calls++
			return []byte("1"), nil
		})
	require.ErrorIs(t, err, commit.ErrCommitUnknown)
	assert.Equal(t, 1, calls)
	_, err = m.Head(ctx, "counter")
	require.NoError(t, err, "the write did land")
}
