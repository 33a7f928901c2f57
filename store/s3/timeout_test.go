package s3_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/s3"
	"github.com/commitptr/commitptr/store/storetest"
)

// TestStalledEndpoint: requests to an endpoint that never answers, or whose
// answer stops partway, end with an error naming the endpoint and the limit.
func TestStalledEndpoint(t *testing.T) {
	server(t) // credentials to sign with
	limit := storetest.StallLimit
	storetest.Stalled(t, func(t *testing.T, endpoint string) store.Store {
		s, err := s3.New(context.Background(), s3.Options{
			Bucket: "stalled", Endpoint: endpoint, PathStyle: true,
			Timeouts: store.Timeouts{Connect: limit, Header: limit, Idle: limit},
		})
		require.NoError(t, err)
		return s
	})
}
