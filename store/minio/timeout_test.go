package minio_test

import (
	"context"
	"testing"

	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/minio"
	"github.com/commitptr/commitptr/store/storetest"
)

// TestStalledEndpoint: requests to an endpoint that never answers, or whose
// answer stops partway, end with an error naming the endpoint and the limit.
func TestStalledEndpoint(t *testing.T) {
	limit := storetest.StallLimit
	storetest.Stalled(t, func(t *testing.T, endpoint string) store.Store {
		s, err := minio.New(context.Background(), minio.Options{
			Bucket: "stalled", Endpoint: endpoint, PathStyle: true,
			Credentials: credentials.NewStaticV4("a", "b", ""),
			Timeouts:    store.Timeouts{Connect: limit, Header: limit, Idle: limit},
		})
		require.NoError(t, err)
		return s
	})
}
