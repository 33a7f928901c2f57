package azblob_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/azblob"
	"github.com/commitptr/commitptr/store/storetest"
)

func TestGetRangeTakesOnlyTheRangeAskedFor(t *testing.T) {
	conn := "DefaultEndpointsProtocol=http;AccountName=" + testenv.AzuriteAccount + ";AccountKey=" + testenv.AzuriteKey +
		";BlobEndpoint=http://127.0.0.1:1/" + testenv.AzuriteAccount + ";"
	storetest.RangeAnswers(t, func(t *testing.T, rt http.RoundTripper) store.Store {
		s, err := azblob.New(azblob.Options{Container: "bkt", ConnectionString: conn,
			HTTPClient: &http.Client{Transport: rt}})
		require.NoError(t, err)
		return s
	})
}
