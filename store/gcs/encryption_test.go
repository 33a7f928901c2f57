package gcs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/gcs"
)

// TestEncryptionAndStorageClassReachTheWire: a customer key goes with
// every upload and every read, a KMS key name with every upload, and the
// storage class is the stored object's.
func TestEncryptionAndStorageClassReachTheWire(t *testing.T) {
	key := bytes.Repeat([]byte{0x5a}, store.CustomerKeySize)
	kms := "projects/p/locations/l/keyRings/r/cryptoKeys/k"
	for _, c := range []struct {
		name  string
		enc   store.Encryption
		class string
	}{
		{"none", store.Encryption{}, ""},
		{"kms", store.Encryption{SSE: store.SSEKMS, KMSKeyID: kms}, "NEARLINE"},
		{"customer-key", store.Encryption{CustomerKey: key}, "COLDLINE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := testenv.GCS(t)
			bucket := srv.NewBucket(t)
			rec := &faults.Recorder{}
			s, err := gcs.New(context.Background(), gcs.Options{
				Bucket: bucket, Endpoint: srv.Endpoint, Transport: rec,
				Encryption: c.enc, StorageClass: c.class,
			})
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			ctx := context.Background()
			_, err = s.Put(ctx, "small", bytes.NewReader([]byte("small")), store.PutOptions{})
			require.NoError(t, err)
			_, err = s.Put(ctx, "large", bytes.NewReader(bytes.Repeat([]byte("l"), gcs.PartSize+1)), store.PutOptions{})
			require.NoError(t, err)
			_, err = s.Put(ctx, "cond", bytes.NewReader([]byte("cond")), store.PutOptions{IfNoneMatch: true})
			require.NoError(t, err)
			rc, _, err := s.Get(ctx, "small")
			require.NoError(t, err)
			_, err = io.Copy(io.Discard, rc)
			require.NoError(t, err)
			rc.Close()
			rc, _, err = s.GetRange(ctx, "small", 1, 3)
			require.NoError(t, err)
			got, err := io.ReadAll(rc)
			require.NoError(t, err)
			rc.Close()
			assert.Equal(t, "mal", string(got))
			_, err = s.Head(ctx, "small")
			require.NoError(t, err)

			wantKey, wantSum := "", ""
			if c.enc.CustomerKey != nil {
				sum := sha256.Sum256(c.enc.CustomerKey)
				wantKey, wantSum = base64.StdEncoding.EncodeToString(c.enc.CustomerKey), base64.StdEncoding.EncodeToString(sum[:])
			}
			kinds := map[string]int{}
			for _, r := range rec.Take() {
				if r.Query.Has("upload_id") {
					continue // a resumable upload's chunk: the session it continues carries the keys
				}
				kind := "read"
				if r.Method == http.MethodPost {
					kind = "upload"
					assert.Equal(t, c.enc.KMSKeyID, r.Query.Get("kmsKeyName"), "%s %s", r.Method, r.Path)
				}
				kinds[kind]++
				if r.Header.Get("Range") != "" {
					kinds["ranged read"]++
				}
				assert.Equal(t, wantKey, r.Header.Get("X-Goog-Encryption-Key"), "%s %s", r.Method, r.Path)
				assert.Equal(t, wantSum, r.Header.Get("X-Goog-Encryption-Key-Sha256"), "%s %s", r.Method, r.Path)
			}
			assert.NotZero(t, kinds["upload"], "no upload was sent")
			assert.NotZero(t, kinds["read"], "no read was sent")
			assert.NotZero(t, kinds["ranged read"], "no ranged read was sent")

			for _, k := range []string{"small", "large", "cond"} {
				assert.Equal(t, cmpOr(c.class, "STANDARD"), storedClass(t, srv.Endpoint, bucket, k), k)
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// storedClass asks the server for the storage class of an object.
func storedClass(t *testing.T, endpoint, bucket, key string) string {
	t.Helper()
	resp, err := http.Get(endpoint + "/storage/v1/b/" + bucket + "/o/" + url.PathEscape(key))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var o struct {
		StorageClass string `json:"storageClass"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&o))
	return o.StorageClass
}

// TestEncryptionRefused: what Cloud Storage cannot do as asked is refused
// when the store is made.
func TestEncryptionRefused(t *testing.T) {
	for sse, want := range map[string]string{
		store.SSEAES256: "asks for nothing more",
		store.SSEKMS:    "needs a KMS key id",
		"x":             `unknown server-side encryption "x"`,
	} {
		_, err := gcs.New(context.Background(), gcs.Options{Bucket: "bucket", Endpoint: "http://127.0.0.1:1", Encryption: store.Encryption{SSE: sse}})
		require.Error(t, err, sse)
		assert.Contains(t, err.Error(), want)
	}
}
