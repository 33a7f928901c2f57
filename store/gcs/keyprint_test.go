package gcs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/gcs"
)

// TestStorePrintedShowsNoCustomerKey: a Store printed with %v or %+v
// shows no customer key.
func TestStorePrintedShowsNoCustomerKey(t *testing.T) {
	key := []byte(strings.Repeat("S", store.CustomerKeySize))
	s, err := gcs.New(context.Background(), gcs.Options{Bucket: "bkt", Endpoint: "http://127.0.0.1:1", Encryption: store.Encryption{CustomerKey: key}})
	require.NoError(t, err)
	for _, format := range []string{"%v", "%+v", "%s"} {
		out := fmt.Sprintf(format, s)
		assert.NotContains(t, out, fmt.Sprint(key), format)
		assert.NotContains(t, out, string(key), format)
		assert.Contains(t, out, "gs://bkt", format)
	}
}
