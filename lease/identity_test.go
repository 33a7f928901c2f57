package lease_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/lease"
)

func TestIdentity(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"s3://bucket/jobs", "s3://bucket/jobs/_lease/nightly"},
		{"s3://bucket/jobs/?endpoint=http://127.0.0.1:9000&region=x", "s3://bucket/jobs/_lease/nightly"},
		{"s3://Bucket//jobs/./", "s3://bucket/jobs/_lease/nightly"},
		{"s3://key:secret@bucket/jobs", "s3://bucket/jobs/_lease/nightly"},
		{"s3://bucket", "s3://bucket/_lease/nightly"},
		{"minio://bucket/jobs?endpoint=http://127.0.0.1:9000", "s3://bucket/jobs/_lease/nightly"},
		{"file:///srv/locks/", "file:///srv/locks/_lease/nightly"},
		{"/srv/locks/../locks", "file:///srv/locks/_lease/nightly"},
	} {
		got, err := lease.Identity(c.url, "nightly")
		require.NoError(t, err, c.url)
		assert.Equal(t, c.want, got, c.url)
	}
	other, err := lease.Identity("s3://bucket/jobs", "weekly")
	require.NoError(t, err)
	assert.Equal(t, "s3://bucket/jobs/_lease/weekly", other)
	_, err = lease.Identity("s3://bucket/jobs", "a/b")
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = lease.Identity("", "x")
	assert.Error(t, err)
}

// TestIdentitySymlinks: a path through a symbolic link, to an existing
// directory or to one not created yet, names the lease of the real path.
func TestIdentitySymlinks(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	real := filepath.Join(dir, "real")
	require.NoError(t, os.Mkdir(real, 0o755))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(real, link))
	for _, c := range []struct{ url, want string }{
		{link, real},
		{"file://" + filepath.ToSlash(link) + "/", real},
		{filepath.Join(link, "not", "yet"), filepath.Join(real, "not", "yet")},
		{filepath.Join(dir, "none"), filepath.Join(dir, "none")},
	} {
		got, err := lease.Identity(c.url, "nightly")
		require.NoError(t, err, c.url)
		assert.Equal(t, "file://"+filepath.ToSlash(c.want)+"/_lease/nightly", got, c.url)
	}
}
