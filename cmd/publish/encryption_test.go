package main

import (
	"context"
	"encoding/base64"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// spiedConfigs are the Configs that spy://NAME URLs were opened with, by
// NAME, merged with their query parameters as the S3 drivers merge them.
var spiedConfigs sync.Map

func init() {
	store.Register("spy", func(_ context.Context, u *url.URL, cfg store.Config) (store.Store, error) {
		_, _, merged, err := store.BucketURL(u, cfg)
		if err != nil {
			return nil, err
		}
		spiedConfigs.Store(u.Host, merged)
		return mem.New(), nil
	})
}

// spied returns the Config spy://name was last opened with.
func spied(t *testing.T, name string) store.Config {
	t.Helper()
	c, ok := spiedConfigs.Load(name)
	require.True(t, ok, "spy://%s was not opened", name)
	return c.(store.Config)
}

// TestEncryptionSettingsReachTheStore: --sse, --sse-kms-key-id,
// --storage-class and --sse-c-key, their PUBLISH_ variables and a
// remote's keys all reach the store's Config; the command line wins.
func TestEncryptionSettingsReachTheStore(t *testing.T) {
	key := strings.Repeat("k", store.CustomerKeySize)
	src := writeTree(t, map[string]string{"f": "x"})
	keyFile := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString([]byte(key))+"\n"), 0o600))

	ok(t, "put", src, "--sse", "aws:kms", "--sse-kms-key-id", "alias/k", "--storage-class", "STANDARD_IA", "spy://flags")
	assert.Equal(t, store.Encryption{SSE: store.SSEKMS, KMSKeyID: "alias/k"}, spied(t, "flags").Encryption)
	assert.Equal(t, "STANDARD_IA", spied(t, "flags").StorageClass)

	ok(t, "put", src, "--sse-c-key", keyFile, "spy://keyfile")
	assert.Equal(t, []byte(key), spied(t, "keyfile").Encryption.CustomerKey)

	t.Setenv("TEST_PUBLISH_KEY", key)
	t.Setenv("PUBLISH_SSE_C_KEY", "env:TEST_PUBLISH_KEY")
	t.Setenv("PUBLISH_STORAGE_CLASS", "GLACIER_IR")
	ok(t, "put", src, "spy://env")
	assert.Equal(t, []byte(key), spied(t, "env").Encryption.CustomerKey)
	assert.Equal(t, "GLACIER_IR", spied(t, "env").StorageClass)
	t.Setenv("PUBLISH_SSE_C_KEY", "")
	t.Setenv("PUBLISH_STORAGE_CLASS", "")

	cfg := writeConfig(t, "[enc]\nurl = spy://remote\nsse = AES256\nstorage-class = ONEZONE_IA\n")
	ok(t, "put", src, "--config", cfg, "enc:x")
	assert.Equal(t, store.Encryption{SSE: store.SSEAES256}, spied(t, "remote").Encryption)
	assert.Equal(t, "ONEZONE_IA", spied(t, "remote").StorageClass)
	ok(t, "put", src, "--config", cfg, "--storage-class", "STANDARD", "enc:x")
	assert.Equal(t, "STANDARD", spied(t, "remote").StorageClass, "the command line wins over a remote's key")
}

// TestEncryptionSettingsRefused: a setting no service takes, a key that
// cannot be read, and a setting for a store that cannot honour it are
// usage errors naming what is wrong, before any request.
func TestEncryptionSettingsRefused(t *testing.T) {
	short := filepath.Join(t.TempDir(), "short")
	require.NoError(t, os.WriteFile(short, []byte("too short"), 0o600))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sse", "aes"}, `unknown server-side encryption "aes"`},
		{[]string{"--sse-kms-key-id", "k"}, "a KMS key id needs server-side encryption aws:kms"},
		{[]string{"--sse-c-key", short}, short},
		{[]string{"--sse-c-key", filepath.Join(t.TempDir(), "nosuch")}, "nosuch"},
		{[]string{"--sse-c-key", "env:TEST_PUBLISH_NO_SUCH_KEY"}, "TEST_PUBLISH_NO_SUCH_KEY is not set"},
	} {
		code, _, errs := cli(t, "", append(append([]string{"ls"}, c.args...), "spy://refused")...)
		assert.Equal(t, exitUsage, code, "%v: %s", c.args, errs)
		assert.Contains(t, errs, c.want, "%v", c.args)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--storage-class", "STANDARD_IA", dir}, "file:// stores take no server-side encryption, customer key or storage class"},
		{[]string{"--sse", "AES256", memURL()}, "mem:// stores take no server-side encryption, customer key or storage class"},
		{[]string{"--sse", "AES256", "gs://bucket"}, "Cloud Storage encrypts every object with Google-managed keys"},
		{[]string{"--sse", "aws:kms", "az://container"}, "encryption scopes are not supported"},
		{[]string{"--storage-class", "STANDARD_IA", "az://container"}, `unknown access tier "STANDARD_IA"`},
	} {
		code, _, errs := cli(t, "", append([]string{"ls"}, c.args...)...)
		assert.Equal(t, exitUsage, code, "%v: %s", c.args, errs)
		assert.Contains(t, errs, c.want, "%v", c.args)
	}
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, ents, "a refused command wrote into %s", dir)
}

// TestRemoteEncryptionOnAStoreWithoutIt: a remote whose url is a
// file:// or mem:// store and that sets sse or storage-class is refused
// when it is used, before anything is written; the setting is never
// dropped.
func TestRemoteEncryptionOnAStoreWithoutIt(t *testing.T) {
	dir := t.TempDir()
	src := writeTree(t, map[string]string{"f": "x"})
	for _, c := range []struct{ remote, want string }{
		{"[local]\nurl = file://" + dir + "\nsse = AES256\n", "file:// stores take no server-side encryption"},
		{"[local]\nurl = file://" + dir + "\nstorage-class = STANDARD_IA\n", "file:// stores take no server-side encryption"},
		{"[local]\nurl = " + memURL() + "\nsse = aws:kms\nsse-kms-key-id = alias/k\n", "mem:// stores take no server-side encryption"},
	} {
		code, _, errs := cli(t, "", "put", "--config", writeConfig(t, c.remote), src, "local:x")
		assert.Equal(t, exitUsage, code, "%s: %s", c.remote, errs)
		assert.Contains(t, errs, c.want, c.remote)
	}
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, ents, "a refused put wrote into %s", dir)
}

// TestCustomerKeyGivenAsItselfIsNeverEchoed: --sse-c-key (or
// PUBLISH_SSE_C_KEY) given the key itself, as the AWS CLI's
// --sse-customer-key takes it, instead of a file or env:NAME, is refused
// without the key in the message.
func TestCustomerKeyGivenAsItselfIsNeverEchoed(t *testing.T) {
	raw := strings.Repeat("Q", store.CustomerKeySize)
	for _, key := range []string{base64.StdEncoding.EncodeToString([]byte(raw)), raw} {
		code, out, errs := cli(t, "", "ls", "--sse-c-key", key, "spy://echo")
		assert.Equal(t, exitUsage, code, errs)
		assert.NotContains(t, out+errs, key)
		assert.Contains(t, errs, "--sse-c-key")

		t.Setenv("PUBLISH_SSE_C_KEY", key)
		code, out, errs = cli(t, "", "-vv", "ls", "spy://echo")
		assert.Equal(t, exitUsage, code, errs)
		assert.NotContains(t, out+errs, key)
		t.Setenv("PUBLISH_SSE_C_KEY", "")
	}
}
