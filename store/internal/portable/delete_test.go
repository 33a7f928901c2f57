package portable_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/portable"
	"github.com/commitptr/commitptr/store/mem"
)

func TestDeletedReadsADeleteOutcome(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	_, err := s.Put(ctx, "present", strings.NewReader("x"), store.PutOptions{})
	require.NoError(t, err)
	precondition := store.Wrap("delete", "k", store.ErrPrecondition, nil)
	refused := store.Wrap("delete", "k", store.ErrAccess, nil)
	for _, c := range []struct {
		name, key, ifMatch string
		err, want          error
	}{
		{"answered", "present", "", nil, nil},
		{"missing key", "gone", "", store.Wrap("delete", "gone", store.ErrNotExist, nil), nil},
		{"missing key, conditional", "gone", "e", store.Wrap("delete", "gone", store.ErrNotExist, nil), nil},
		{"412 for a missing key", "gone", "e", precondition, nil},
		{"412 for a key that exists", "present", "e", precondition, precondition},
		{"412 without a condition", "gone", "", precondition, precondition},
		{"any other error", "gone", "e", refused, refused},
	} {
		got := portable.Deleted(ctx, s, c.key, c.ifMatch, c.err)
		if c.want == nil {
			assert.NoError(t, got, c.name)
		} else {
			assert.True(t, errors.Is(got, c.want), "%s: %v", c.name, got)
		}
	}
}
