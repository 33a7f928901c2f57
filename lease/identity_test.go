package lease_test

import (
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
