package minio_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/minio"
	"github.com/commitptr/commitptr/store/storetest"
)

func TestGetRangeTakesOnlyTheRangeAskedFor(t *testing.T) {
	storetest.RangeAnswers(t, func(t *testing.T, rt http.RoundTripper) store.Store {
		s, err := minio.New(context.Background(), minio.Options{Bucket: "bkt", Endpoint: "http://127.0.0.1:1", PathStyle: true,
			Region: "us-east-1", Transport: rt, Credentials: credentials.NewStaticV4("k", "s", "")})
		require.NoError(t, err)
		return s
	})
}
