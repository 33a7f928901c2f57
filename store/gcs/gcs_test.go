package gcs_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/gcsserver"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/gcs"
	"github.com/commitptr/commitptr/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(gcsserver.Main(m)) }

func newStore(t *testing.T) *gcs.Store {
	t.Helper()
	srv := gcsserver.Shared(t)
	s, err := gcs.New(context.Background(), gcs.Options{Bucket: srv.NewBucket(t), Endpoint: srv.Endpoint})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	srv := gcsserver.Shared(t)
	storetest.RunWith(t, srv.Conformance, func(t *testing.T) store.Store { return newStore(t) })
}
