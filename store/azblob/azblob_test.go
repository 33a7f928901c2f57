package azblob_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/azurite"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/azblob"
	"github.com/commitptr/commitptr/store/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	azurite.StopShared()
	os.Exit(code)
}

// newStore returns a driver on a fresh container of the shared emulator.
func newStore(t *testing.T, mods ...func(*azblob.Options)) (*azblob.Store, string) {
	t.Helper()
	srv := azurite.Shared(t)
	name := srv.NewContainer(t)
	opts := azblob.Options{Container: name, ServiceURL: srv.Endpoint, ConnectionString: srv.ConnectionString}
	for _, m := range mods {
		m(&opts)
	}
	s, err := azblob.New(opts)
	require.NoError(t, err)
	return s, name
}

func TestConformance(t *testing.T) {
	srv := azurite.Shared(t)
	storetest.RunWith(t, srv.Conformance, func(t *testing.T) store.Store {
		s, _ := newStore(t)
		return s
	})
}

func TestLargeConditional(t *testing.T) {
	s, _ := newStore(t)
	storetest.LargeConditional(t, s)
}

func TestProbe(t *testing.T) {
	s, _ := newStore(t)
	require.NoError(t, store.Probe(context.Background(), s))
}
