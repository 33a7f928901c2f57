package store_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	_ "github.com/commitptr/commitptr/store/fs" // registers file://
)

// TestEncryptionCheck: the settings a service can take pass, and each
// that none can is refused with a message that says why.
func TestEncryptionCheck(t *testing.T) {
	key := bytes.Repeat([]byte{1}, store.CustomerKeySize)
	for _, e := range []store.Encryption{
		{},
		{SSE: store.SSEAES256},
		{SSE: store.SSEKMS},
		{SSE: store.SSEKMS, KMSKeyID: "alias/k"},
		{CustomerKey: key},
	} {
		assert.NoError(t, e.Check(), "%v", e)
	}
	for _, c := range []struct {
		e    store.Encryption
		want string
	}{
		{store.Encryption{SSE: "aes256"}, `unknown server-side encryption "aes256"`},
		{store.Encryption{KMSKeyID: "k"}, "needs server-side encryption aws:kms"},
		{store.Encryption{SSE: store.SSEAES256, KMSKeyID: "k"}, "needs server-side encryption aws:kms"},
		{store.Encryption{CustomerKey: key[:31]}, "32 bytes (AES-256), not 31"},
		{store.Encryption{CustomerKey: []byte{}}, "not 0"},
		{store.Encryption{SSE: store.SSEKMS, CustomerKey: key}, "excludes server-side encryption aws:kms"},
		{store.Encryption{SSE: store.SSEAES256, CustomerKey: key}, "excludes server-side encryption AES256"},
	} {
		err := c.e.Check()
		require.Error(t, err, "%v", c.e)
		assert.Contains(t, err.Error(), c.want)
	}
}

// TestEncryptionNeverShowsTheKey: neither String nor %v of a Config
// prints a customer key.
func TestEncryptionNeverShowsTheKey(t *testing.T) {
	key := []byte(strings.Repeat("S", store.CustomerKeySize))
	e := store.Encryption{CustomerKey: key}
	assert.Equal(t, "customer key", e.String())
	assert.NotContains(t, e.String(), string(key))
	for _, format := range []string{"%v", "%+v", "%s"} {
		cfg := fmt.Sprintf(format, store.Config{Encryption: e})
		assert.NotContains(t, cfg, string(key), format)
		assert.NotContains(t, cfg, fmt.Sprint(key), format)
		assert.Contains(t, cfg, "customer key", format)
	}
	assert.Equal(t, "bucket default", store.Encryption{}.String())
	assert.Equal(t, "sse=aws:kms, kms-key-id=k", store.Encryption{SSE: store.SSEKMS, KMSKeyID: "k"}.String())
}

// TestCustomerKeyHeaders: the key and its MD5 go in base64, and there are
// none without a key.
func TestCustomerKeyHeaders(t *testing.T) {
	_, _, ok := store.Encryption{SSE: store.SSEAES256}.CustomerKeyHeaders()
	assert.False(t, ok)
	k, sum, ok := store.Encryption{CustomerKey: bytes.Repeat([]byte{0x5a}, 32)}.CustomerKeyHeaders()
	require.True(t, ok)
	assert.Equal(t, "WlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlo=", k)
	assert.Equal(t, "BuASUiSbvhMWBKAmsiYRhg==", sum) // md5 of 32 bytes of 'Z'
}

// TestParseCustomerKey: 32 bytes, or their base64 in any of its forms,
// with white space around it; anything else is refused.
func TestParseCustomerKey(t *testing.T) {
	key := []byte{}
	for i := range store.CustomerKeySize {
		key = append(key, byte(250-i)) // bytes that are not text, some of them '+' and '/' in base64
	}
	for _, in := range []string{
		string(key),
		base64.StdEncoding.EncodeToString(key) + "\n",
		"  " + base64.RawStdEncoding.EncodeToString(key),
		base64.URLEncoding.EncodeToString(key),
		base64.RawURLEncoding.EncodeToString(key) + "\r\n",
	} {
		got, err := store.ParseCustomerKey([]byte(in))
		require.NoError(t, err, "%q", in)
		assert.Equal(t, key, got, "%q", in)
	}
	text := strings.Repeat("p", 32)
	got, err := store.ParseCustomerKey([]byte(text + "\n"))
	require.NoError(t, err)
	assert.Equal(t, []byte(text), got)
	for _, in := range []string{"", "short", base64.StdEncoding.EncodeToString(key[:16]), strings.Repeat("p", 33)} {
		_, err := store.ParseCustomerKey([]byte(in))
		assert.Error(t, err, "%q", in)
	}
}

// TestBucketURLEncryption: sse, sse_kms_key_id and storage_class come
// from the URL unless the Config sets them, the customer key only from
// the Config, and a bad combination is refused naming the URL.
func TestBucketURLEncryption(t *testing.T) {
	u, err := url.Parse("s3://b/p?sse=aws:kms&sse_kms_key_id=alias/u&storage_class=STANDARD_IA")
	require.NoError(t, err)
	_, _, c, err := store.BucketURL(u, store.Config{})
	require.NoError(t, err)
	assert.Equal(t, store.Encryption{SSE: store.SSEKMS, KMSKeyID: "alias/u"}, c.Encryption)
	assert.Equal(t, "STANDARD_IA", c.StorageClass)

	key := bytes.Repeat([]byte{2}, 32)
	s3managed, err := url.Parse("s3://b/p?sse=AES256&storage_class=STANDARD_IA")
	require.NoError(t, err)
	_, _, c, err = store.BucketURL(s3managed, store.Config{Encryption: store.Encryption{SSE: store.SSEKMS, KMSKeyID: "alias/c"}, StorageClass: "GLACIER_IR"})
	require.NoError(t, err)
	assert.Equal(t, store.Encryption{SSE: store.SSEKMS, KMSKeyID: "alias/c"}, c.Encryption)
	assert.Equal(t, "GLACIER_IR", c.StorageClass)

	_, _, _, err = store.BucketURL(u, store.Config{Encryption: store.Encryption{CustomerKey: key}})
	require.Error(t, err, "a customer key beside the URL's sse")
	assert.Contains(t, err.Error(), `"s3://b/p?`)
	assert.Contains(t, err.Error(), "excludes")

	plain, err := url.Parse("s3://b/p")
	require.NoError(t, err)
	_, _, c, err = store.BucketURL(plain, store.Config{Encryption: store.Encryption{CustomerKey: key}})
	require.NoError(t, err)
	assert.Equal(t, key, c.Encryption.CustomerKey)
}

// TestStoresWithoutObjectSettingsRefuseThem: a store that cannot encrypt
// on request or keep a storage class says so rather than ignore the
// setting (the CLI's tests cover the other drivers).
func TestStoresWithoutObjectSettingsRefuseThem(t *testing.T) {
	for _, cfg := range []store.Config{
		{StorageClass: "STANDARD_IA"},
		{Encryption: store.Encryption{SSE: store.SSEAES256}},
		{Encryption: store.Encryption{CustomerKey: bytes.Repeat([]byte{3}, 32)}},
	} {
		_, err := store.Open(t.Context(), "mem://refuse", cfg)
		require.Error(t, err, "%+v", cfg)
		assert.Contains(t, err.Error(), "mem:// stores take no server-side encryption, customer key or storage class")
	}
	assert.NoError(t, store.Config{}.RefuseObjectSettings("file"))
}

// TestStoresWithoutObjectSettingsRefuseThemInTheURL: a file:// or mem://
// URL whose query asks for encryption or a storage class, as a remote's
// sse or storage-class key puts it there, is refused too, never opened
// with the setting dropped.
func TestStoresWithoutObjectSettingsRefuseThemInTheURL(t *testing.T) {
	dir := t.TempDir()
	for _, raw := range []string{
		"mem://refuse-url?sse=AES256",
		"mem://refuse-url/p?storage_class=STANDARD_IA",
		"mem://refuse-url?sse=aws:kms&sse_kms_key_id=alias/k",
		"mem://refuse-url?sse_kms_key_id=alias/k",
		"file://" + dir + "?sse=AES256",
		"file://" + dir + "?storage_class=GLACIER_IR",
	} {
		_, err := store.Open(t.Context(), raw, store.Config{})
		require.Error(t, err, raw)
		assert.Contains(t, err.Error(), "stores take no server-side encryption, customer key or storage class", raw)
	}
}

// TestBucketURLConfigKMSKeyWins: a KMS key id in the Config (the command
// line's) wins over the URL's (or a remote's), as sse and the storage
// class do.
func TestBucketURLConfigKMSKeyWins(t *testing.T) {
	u, err := url.Parse("s3://b/p?sse=aws:kms&sse_kms_key_id=alias/u")
	require.NoError(t, err)
	_, _, c, err := store.BucketURL(u, store.Config{Encryption: store.Encryption{KMSKeyID: "alias/c"}})
	require.NoError(t, err)
	assert.Equal(t, store.Encryption{SSE: store.SSEKMS, KMSKeyID: "alias/c"}, c.Encryption)
}
