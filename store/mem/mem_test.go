package mem_test

import (
	"testing"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
	"github.com/commitptr/commitptr/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return mem.New() })
}
