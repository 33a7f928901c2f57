package azblob_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/azblob"
)

// TestEncryptionAndStorageClassReachTheWire: a customer key goes with
// every write, block and read, and the access tier with every request
// that creates a blob.
func TestEncryptionAndStorageClassReachTheWire(t *testing.T) {
	key := bytes.Repeat([]byte{0x5a}, store.CustomerKeySize)
	for _, c := range []struct {
		name  string
		enc   store.Encryption
		class string
		tier  string
	}{
		{"none", store.Encryption{}, "", ""},
		{"tier", store.Encryption{}, "cool", "Cool"},
		{"customer-key", store.Encryption{CustomerKey: key}, "Hot", "Hot"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &faults.Recorder{Buffer: true}
			s, _ := newStore(t, func(o *azblob.Options) {
				o.HTTPClient = &http.Client{Transport: rec}
				o.Encryption, o.StorageClass = c.enc, c.class
			})
			ctx := context.Background()
			_, errSmall := s.Put(ctx, "small", bytes.NewReader([]byte("small")), store.PutOptions{})
			_, errLarge := s.Put(ctx, "large", bytes.NewReader(bytes.Repeat([]byte("l"), azblob.PartThreshold+1)), store.PutOptions{})
			_, errCond := s.Put(ctx, "cond", bytes.NewReader([]byte("cond")), store.PutOptions{IfNoneMatch: true})
			// Azurite answers a customer-provided key with 500
			// FeatureNotSupported: the writes then fail, and the reads,
			// of a blob that is not there, still show what they send.
			rc, _, errGet := s.Get(ctx, "small")
			if errGet == nil {
				_, err := io.Copy(io.Discard, rc)
				require.NoError(t, err)
				rc.Close()
			}
			rc, _, errRange := s.GetRange(ctx, "small", 1, 3)
			if errRange == nil {
				got, err := io.ReadAll(rc)
				require.NoError(t, err)
				rc.Close()
				assert.Equal(t, "mal", string(got))
			}
			_, errHead := s.Head(ctx, "small")
			t.Logf("%s: put %v, put in blocks %v, conditional put %v, get %v, ranged get %v, head %v", c.name, errSmall, errLarge, errCond, errGet, errRange, errHead)
			if c.enc.CustomerKey == nil {
				for _, err := range []error{errSmall, errLarge, errCond, errGet, errRange, errHead} {
					require.NoError(t, err)
				}
			}

			wantKey, wantSum := "", ""
			if c.enc.CustomerKey != nil {
				sum := sha256.Sum256(c.enc.CustomerKey)
				wantKey, wantSum = base64.StdEncoding.EncodeToString(c.enc.CustomerKey), base64.StdEncoding.EncodeToString(sum[:])
			}
			kinds := map[string]int{}
			for _, r := range rec.Take() {
				comp := r.Query.Get("comp")
				kind := ""
				switch {
				case r.Method == http.MethodPut && comp == "":
					kind = "put"
				case r.Method == http.MethodPut && comp == "blocklist":
					kind = "blocklist"
				case r.Method == http.MethodPut && comp == "block":
					kind = "block"
				case r.Method == http.MethodGet && comp == "" && header(r.Header, "x-ms-range") != "":
					kind = "ranged-get"
				case r.Method == http.MethodGet && comp == "":
					kind = "get"
				case r.Method == http.MethodHead:
					kind = "head"
				default:
					continue
				}
				kinds[kind]++
				wantTier := ""
				if kind == "put" || kind == "blocklist" {
					wantTier = c.tier
				}
				assert.Equal(t, wantTier, header(r.Header, "x-ms-access-tier"), "%s %s", kind, r.Path)
				assert.Equal(t, wantKey, header(r.Header, "x-ms-encryption-key"), "%s %s", kind, r.Path)
				assert.Equal(t, wantSum, header(r.Header, "x-ms-encryption-key-sha256"), "%s %s", kind, r.Path)
			}
			want := []string{"put", "block", "get", "ranged-get", "head"}
			if errLarge == nil {
				want = append(want, "blocklist")
			}
			for _, kind := range want {
				assert.NotZero(t, kinds[kind], "no %s request was sent (saw %v)", kind, kinds)
			}
		})
	}
}

// header returns the value of header name in h, however its name is
// spelt: the Azure SDK sets its x-ms- headers in lower case, outside
// http.Header's canonical form.
func header(h http.Header, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// TestEncryptionRefused: what Azure cannot do as asked is refused when
// the store is made.
func TestEncryptionRefused(t *testing.T) {
	for _, c := range []struct {
		enc   store.Encryption
		class string
		want  string
	}{
		{store.Encryption{SSE: store.SSEAES256}, "", "encryption scopes are not supported"},
		{store.Encryption{SSE: store.SSEKMS, KMSKeyID: "k"}, "", "encryption scopes are not supported"},
		{store.Encryption{}, "STANDARD_IA", `unknown access tier "STANDARD_IA"`},
	} {
		_, err := azblob.New(azblob.Options{Container: "container", ServiceURL: "http://127.0.0.1:1/acct", Encryption: c.enc, StorageClass: c.class})
		require.Error(t, err, "%+v", c)
		assert.Contains(t, err.Error(), c.want)
	}
}
