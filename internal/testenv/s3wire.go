package testenv

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/store"
)

// S3ObjectSettingsCase is one setting of encryption and storage class
// that CheckS3ObjectSettings sends through a driver.
type S3ObjectSettingsCase struct {
	Name       string
	Encryption store.Encryption
	Class      string
}

// S3ObjectSettingsCases are the settings every S3 driver is checked with:
// each kind of encryption, a storage class, and none.
func S3ObjectSettingsCases() []S3ObjectSettingsCase {
	return []S3ObjectSettingsCase{
		{Name: "none"},
		{Name: "s3-managed", Encryption: store.Encryption{SSE: store.SSEAES256}, Class: "STANDARD_IA"},
		{Name: "kms", Encryption: store.Encryption{SSE: store.SSEKMS, KMSKeyID: "alias/datasets"}},
		{Name: "kms-default-key", Encryption: store.Encryption{SSE: store.SSEKMS}, Class: "GLACIER_IR"},
		{Name: "customer-key", Encryption: store.Encryption{CustomerKey: bytes.Repeat([]byte{0x5a}, store.CustomerKeySize)}, Class: "STANDARD"},
	}
}

// CheckS3ObjectSettings writes a small object, one large enough for parts
// (large bytes), a conditional one, and reads the small one back through s,
// whole and by a range; rec saw its requests, and c is the setting s was
// made with. It checks that every request that creates an object carries
// c's encryption and storage class, that a customer key goes with every
// part and every read, and that no other request carries any of them.
// Whether the server honours the headers is its own matter: a refusal
// fails the operation, and the check of the wire still runs.
func CheckS3ObjectSettings(t *testing.T, s store.Store, rec *faults.Recorder, c S3ObjectSettingsCase, large int) {
	t.Helper()
	ctx := context.Background()
	rec.Take()
	_, errSmall := s.Put(ctx, "small", bytes.NewReader([]byte("small")), store.PutOptions{})
	_, errLarge := s.Put(ctx, "large", bytes.NewReader(bytes.Repeat([]byte("l"), large)), store.PutOptions{})
	_, errCond := s.Put(ctx, "cond", bytes.NewReader([]byte("cond")), store.PutOptions{IfNoneMatch: true})
	var errGet, errRange, errHead error
	if errSmall == nil {
		var rc io.ReadCloser
		if rc, _, errGet = s.Get(ctx, "small"); errGet == nil {
			b, err := io.ReadAll(rc)
			rc.Close()
			require.NoError(t, err)
			assert.Equal(t, "small", string(b))
		}
		if rc, _, errRange = s.GetRange(ctx, "small", 1, 3); errRange == nil {
			b, err := io.ReadAll(rc)
			rc.Close()
			require.NoError(t, err)
			assert.Equal(t, "mal", string(b))
		}
		_, errHead = s.Head(ctx, "small")
	}
	reqs := rec.Take()
	t.Logf("%s: put %v, put in parts %v, conditional put %v, get %v, ranged get %v, head %v", c.Name, errSmall, errLarge, errCond, errGet, errRange, errHead)
	if c.Encryption.IsZero() && c.Class == "" {
		for _, err := range []error{errSmall, errLarge, errCond, errGet, errRange, errHead} {
			require.NoError(t, err)
		}
	}

	create := map[string]string{}
	if c.Encryption.SSE != "" {
		create["X-Amz-Server-Side-Encryption"] = c.Encryption.SSE
	}
	if c.Encryption.KMSKeyID != "" {
		create["X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"] = c.Encryption.KMSKeyID
	}
	if c.Class != "" {
		create["X-Amz-Storage-Class"] = c.Class
	}
	always := map[string]string{}
	if key, sum, ok := c.Encryption.CustomerKeyHeaders(); ok {
		always["X-Amz-Server-Side-Encryption-Customer-Algorithm"] = store.SSEAES256
		always["X-Amz-Server-Side-Encryption-Customer-Key"] = key
		always["X-Amz-Server-Side-Encryption-Customer-Key-Md5"] = sum
	}
	kinds := map[string]int{}
	for _, r := range reqs {
		kind := s3RequestKind(r)
		kinds[kind]++
		if kind == "get" && r.Header.Get("Range") != "" {
			kinds["ranged-get"]++
		}
		want := map[string]string{}
		switch kind {
		case "put", "create-upload":
			for k, v := range create {
				want[k] = v
			}
			fallthrough
		case "part", "get", "head":
			for k, v := range always {
				want[k] = v
			}
		}
		headers := []string{"X-Amz-Server-Side-Encryption", "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id", "X-Amz-Storage-Class"}
		if kind != "complete" { // S3 takes the customer key on a completion, and needs it only in rare cases
			headers = append(headers, "X-Amz-Server-Side-Encryption-Customer-Algorithm",
				"X-Amz-Server-Side-Encryption-Customer-Key", "X-Amz-Server-Side-Encryption-Customer-Key-Md5")
		}
		for _, h := range headers {
			assert.Equal(t, want[h], r.Header.Get(h), "%s: header %s of %s %s", c.Name, h, r.Method, r.Path)
		}
	}
	// The writes and reads above, as they reach the wire: each kind at
	// least once, or the check above looked at nothing.
	for _, kind := range []string{"put", "create-upload", "part"} {
		assert.NotZero(t, kinds[kind], "%s: no %s request was sent (saw %v)", c.Name, kind, kinds)
	}
	if errSmall == nil {
		assert.NotZero(t, kinds["get"], "%s: no GET was sent (saw %v)", c.Name, kinds)
		assert.NotZero(t, kinds["ranged-get"], "%s: no ranged GET was sent (saw %v)", c.Name, kinds)
		assert.NotZero(t, kinds["head"], "%s: no HEAD was sent (saw %v)", c.Name, kinds)
	}
}

// s3RequestKind names an S3 object request by what it does.
func s3RequestKind(r faults.Recorded) string {
	switch {
	case r.Method == http.MethodPost && r.Query.Has("uploads"):
		return "create-upload"
	case r.Method == http.MethodPost && r.Query.Has("uploadId"):
		return "complete"
	case r.Method == http.MethodPut && r.Query.Has("partNumber"):
		return "part"
	case r.Method == http.MethodPut:
		return "put"
	case r.Method == http.MethodGet && !r.Query.Has("list-type") && !r.Query.Has("versioning") && !r.Query.Has("versions") && !r.Query.Has("location"):
		return "get"
	case r.Method == http.MethodHead:
		return "head"
	}
	return "other"
}
