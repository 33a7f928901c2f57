package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

func TestFullKeyAddsThePrefixOfEveryWrapper(t *testing.T) {
	s := store.WithPrefix(store.Count(store.WithPrefix(mem.New(), "a/b/")), "c/")
	assert.Equal(t, "a/b/c/k", store.FullKey(s, "k"))
	assert.Equal(t, "k", store.FullKey(mem.New(), "k"))
}

// TestKeyLengthCountsThePrefix: a key of MaxKeyBytes with the prefixes
// passes; one byte more is refused, naming the key, as ErrInvalidKey.
func TestKeyLengthCountsThePrefix(t *testing.T) {
	s := store.Count(store.WithPrefix(mem.New(), "pfx/"))
	fits := strings.Repeat("k", store.MaxKeyBytes-len("pfx/"))
	require.NoError(t, store.CheckKeyLength(s, fits))
	err := store.CheckKeyLength(s, fits+"k")
	require.Error(t, err)
	assert.True(t, errors.Is(err, store.ErrInvalidKey), "%v", err)
	assert.Contains(t, err.Error(), `"pfx/kkk`)
	assert.Contains(t, err.Error(), "1025 bytes")
}
