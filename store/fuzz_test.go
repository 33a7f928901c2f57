package store_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
)

// FuzzParseURL: ParseURL and CleanPrefix never panic, and every key prefix
// CleanPrefix accepts is relative, ends with a slash, and has no empty,
// "." or ".." segment.
func FuzzParseURL(f *testing.F) {
	for _, u := range []string{
		"s3://bucket/prefix/", "s3://bucket", "minio://b/p?endpoint=http://127.0.0.1:9000&path_style=true",
		"file:///tmp/x", "/abs/dir", "./rel/dir", "rel", "mem://name/a/b", "mem://n/../x", "s3://b/%2e%2e/x",
		"s3://b/a%2Fb", "s3://user:secret@b/p", "S3://B/P", "://x", "s3://", "s3:///x", "%", "s3://b/a//b",
		"s3://b/./a", "s3://b/\x00", "file://host/share", `C:\dir`, "s3://[::1]:9000/b",
	} {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		checkPrefix(t, raw) // CleanPrefix takes any string
		u, err := store.ParseURL(raw)
		if err != nil {
			require.Nil(t, u)
			return
		}
		require.NotEmpty(t, u.Scheme)
		require.Equal(t, strings.ToLower(u.Scheme), u.Scheme)
		checkPrefix(t, u.Path)
	})
}

func checkPrefix(t *testing.T, path string) {
	t.Helper()
	p, err := store.CleanPrefix(path)
	if err != nil || p == "" {
		return
	}
	require.False(t, strings.HasPrefix(p, "/"), "prefix %q of %q is absolute", p, path)
	require.True(t, strings.HasSuffix(p, "/"), "prefix %q of %q", p, path)
	for _, seg := range strings.Split(strings.TrimSuffix(p, "/"), "/") {
		require.NotContains(t, []string{"", ".", ".."}, seg, "prefix %q of %q", p, path)
	}
}
