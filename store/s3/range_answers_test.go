package s3_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/s3"
	"github.com/commitptr/commitptr/store/storetest"
)

func TestGetRangeTakesOnlyTheRangeAskedFor(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	storetest.RangeAnswers(t, func(t *testing.T, rt http.RoundTripper) store.Store {
		s, err := s3.New(context.Background(), s3.Options{Bucket: "bkt", Endpoint: "http://127.0.0.1:1", PathStyle: true,
			HTTPClient: &http.Client{Transport: rt}})
		require.NoError(t, err)
		return s
	})
}
