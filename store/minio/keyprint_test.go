package minio_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/minio"
)

// TestStorePrintedShowsNoCustomerKey: a Store printed with %v or %+v
// shows no customer key.
func TestStorePrintedShowsNoCustomerKey(t *testing.T) {
	key := []byte(strings.Repeat("S", store.CustomerKeySize))
	s, err := minio.New(context.Background(), minio.Options{Bucket: "bkt", Endpoint: "http://127.0.0.1:1", Encryption: store.Encryption{CustomerKey: key}})
	require.NoError(t, err)
	testenv.CheckPrintsNoCustomerKey(t, s, key, "minio://bkt")
}
