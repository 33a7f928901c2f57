package azblob

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/stretchr/testify/assert"

	"github.com/commitptr/commitptr/store"
)

func TestClassOf(t *testing.T) {
	for _, c := range []struct {
		code    bloberror.Code
		status  int
		ifMatch bool
		want    error
	}{
		{bloberror.BlobNotFound, 404, false, store.ErrNotExist},
		{bloberror.BlobNotFound, 404, true, store.ErrPrecondition},
		{"", 404, false, store.ErrNotExist}, // HEAD: no body
		{"", 404, true, store.ErrPrecondition},
		{bloberror.ConditionNotMet, 412, false, store.ErrPrecondition},
		{"", 412, false, store.ErrPrecondition},
		// Azure's answer to a failed If-None-Match: * on Put Blob.
		{bloberror.BlobAlreadyExists, 409, false, store.ErrPrecondition},
		// Other 409s are no condition of the request, and not retryable.
		{bloberror.LeaseIDMissing, 409, false, nil},
		{"", 409, false, nil},
		{bloberror.ContainerNotFound, 404, false, store.ErrNoBucket},
		{bloberror.ContainerNotFound, 404, true, store.ErrNoBucket},
		{bloberror.AuthorizationFailure, 403, false, store.ErrAccess},
		{bloberror.AuthenticationFailed, 403, false, store.ErrAccess},
		{"", 403, false, store.ErrAccess},
		{"", 401, false, store.ErrAccess},
		{bloberror.InternalError, 500, false, nil},
	} {
		assert.Equal(t, c.want, classOf(c.code, c.status, c.ifMatch), "%s %d ifMatch=%v", c.code, c.status, c.ifMatch)
	}
}

func TestMetadataNames(t *testing.T) {
	for name, stored := range map[string]string{
		"writer":            "writer",
		"seq7":              "seq7",
		"commitptr-lineage": "commitptr_2dlineage",
		"a_b":               "a_5fb",
		"7up":               "_37up",
		"x.y":               "x_2ey",
	} {
		got, err := encodeName(name)
		assert.NoError(t, err)
		assert.Equal(t, stored, got, name)
		assert.Equal(t, name, decodeName(got), name)
		assert.Equal(t, name, decodeName(stringsToUpper(got)), "Azure may return names in another case")
	}
	_, err := encodeName("Upper")
	assert.Error(t, err)
	_, err = encodeName("")
	assert.Error(t, err)
}

func stringsToUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func TestParseConnectionString(t *testing.T) {
	m, err := parseConnectionString("DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=a2V5=;BlobEndpoint=http://127.0.0.1:1/acct;")
	assert.NoError(t, err)
	assert.Equal(t, map[string]string{
		"defaultendpointsprotocol": "http", "accountname": "acct", "accountkey": "a2V5=", "blobendpoint": "http://127.0.0.1:1/acct",
	}, m)
	_, err = parseConnectionString("AccountName=acct;s3cr3t")
	assert.ErrorContains(t, err, "Key=Value")
	assert.NotContains(t, err.Error(), "s3cr3t")
}

// TestListTokenRoundTrip: a page token gives back the filter and the
// marker it was made of, whatever bytes the filter holds, and a marker
// without a filter is its own token.
func TestListTokenRoundTrip(t *testing.T) {
	for _, after := range []string{"", "a", "sa/12", "3:x", "12:ab:", "a\x00b", "\x00", "ünï/cødé"} {
		for _, marker := range []string{"sa/03", "2!80!MDAwMDE2IXNhLzAzITAwMDAyOCE5OTk5LTEyLTMxVDIzOjU5OjU5Ljk5OTk5OTlaIQ--", "7:abcdefg"} {
			tok := makeToken(after, marker)
			a, m, ok := parseToken(tok)
			assert.True(t, ok, "token %q", tok)
			assert.Equal(t, after, a, "the filter of %q", tok)
			assert.Equal(t, marker, m, "the marker of %q", tok)
		}
		assert.Empty(t, makeToken(after, ""), "the last page has no token")
	}
	assert.Equal(t, "sa/03", makeToken("", "sa/03"))
	for _, bad := range []string{"\x00", "\x00:x", "\x00x:abc", "\x003:abc", "\x005:abc", "\x00-1:ab", "\x000:ab", "\x003abcd"} {
		_, _, ok := parseToken(bad)
		assert.False(t, ok, "token %q", bad)
	}
}
