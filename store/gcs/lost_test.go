package gcs_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/gcs"
)

// TestLostLastChunkIsUnknown: the response to the last chunk of a
// resumable upload is lost after the object landed, and the client's retry
// of that chunk finds the upload session gone (404). The bucket exists, so
// the Put's outcome is unknown: its error has no class, never
// store.ErrNoBucket, and names the key.
func TestLostLastChunkIsUnknown(t *testing.T) {
	ctx := context.Background()
	in := faults.New(faults.Config{})
	// The start of the session and the first chunk pass (held for no
	// time); the response to the last chunk is lost.
	in.Add(faults.Rule{Op: store.OpPut, Key: "big", Kind: faults.Held, Times: 2})
	in.Add(faults.Rule{Op: store.OpPut, Key: "big", Kind: faults.Lost, Times: 1})
	s := storeWith(t, in.TransportFor(faults.GCS, nil))
	body := bytes.Repeat([]byte("x"), gcs.PartSize+1<<20)
	_, err := s.Put(ctx, "big", bytes.NewReader(body), store.PutOptions{})
	require.Error(t, err)
	require.EqualValues(t, 1, in.Counts().Injected[store.OpPut][faults.Lost])
	for _, class := range []error{store.ErrNoBucket, store.ErrNotExist, store.ErrPrecondition, store.ErrConflict, store.ErrAccess} {
		assert.NotErrorIs(t, err, class)
	}
	assert.Contains(t, err.Error(), `"big"`)
	assert.NotContains(t, err.Error(), "bucket does not exist")
	a, err := s.Head(ctx, "big")
	require.NoError(t, err, "the upload landed")
	assert.EqualValues(t, len(body), a.Size)
}
