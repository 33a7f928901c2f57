package store_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/commitptr/commitptr/store"
)

func TestKeyListNamesEveryKeyOfASmallBatch(t *testing.T) {
	assert.Equal(t, "", store.KeyList(nil))
	assert.Equal(t, `"a"`, store.KeyList([]string{"a"}))
	assert.Equal(t, `"a", "b\n"`, store.KeyList([]string{"a", "b\n"}), "keys are quoted")
}

func TestKeyListNamesTheFirstKeysAndCountsTheRest(t *testing.T) {
	keys := make([]string, store.KeyListShown+7)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	assert.Equal(t, `"k0", "k1", "k2", "k3", "k4" and 7 more`, store.KeyList(keys))
	assert.Equal(t, `"k0", "k1", "k2", "k3", "k4"`, store.KeyList(keys[:store.KeyListShown]), "exactly KeyListShown keys are all named")
}
