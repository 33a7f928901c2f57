package s3_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/s3"
	"github.com/commitptr/commitptr/store/storetest"
)

// versionedOn returns the driver on a fresh bucket of srv with versioning
// enabled, and what storetest.RunVersioned needs beside it.
func versionedOn(t *testing.T, srv *testenv.S3Server) storetest.Versioned {
	t.Helper()
	withEnv(srv)
	bucket := srv.NewVersionedBucket(t)
	hook := &storetest.DeleteHook{Base: http.DefaultTransport}
	open := func(v store.Versioning, c *http.Client) store.Store {
		s, err := s3.New(context.Background(), s3.Options{Bucket: bucket, Endpoint: srv.Endpoint, PathStyle: true, Versioning: v, HTTPClient: c})
		require.NoError(t, err)
		return s
	}
	return storetest.Versioned{
		Store:               open(store.VersioningAuto, &http.Client{Transport: hook}),
		Plain:               open(store.VersioningOff, nil),
		Versions:            func(t *testing.T, prefix string) []storetest.ObjectVersion { return srv.Versions(t, bucket, prefix) },
		BeforeDeleteObjects: hook.Set,
	}
}

func TestVersioned(t *testing.T) {
	srv := testenv.VersionedS3(t)
	storetest.RunVersioned(t, srv.Versioned, func(t *testing.T) storetest.Versioned { return versionedOn(t, srv) })
}

func TestVersionedGofakes3(t *testing.T) {
	srv := testenv.Gofakes3(t)
	storetest.RunVersioned(t, srv.Versioned, func(t *testing.T) storetest.Versioned { return versionedOn(t, srv) })
}

// TestVersioningURL: versioning=on|off in the URL settles the question
// without asking the bucket.
func TestVersioningURL(t *testing.T) {
	srv := withEnv(testenv.VersionedS3(t))
	bucket := srv.NewVersionedBucket(t)
	for _, c := range []struct {
		query string
		want  store.Versioning
	}{
		{"", store.VersioningOn},
		{"&versioning=auto", store.VersioningOn},
		{"&versioning=off", store.VersioningOff},
	} {
		s, err := store.Open(context.Background(), "s3://"+bucket+"/p?path_style=true&endpoint="+srv.Endpoint+c.query, store.Config{})
		require.NoError(t, err)
		got, err := store.BucketVersioning(context.Background(), s)
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "query %q", c.query)
	}
	s, err := store.Open(context.Background(), "s3://no-such-bucket-here/p?versioning=on&path_style=true&endpoint="+srv.Endpoint, store.Config{})
	require.NoError(t, err)
	got, err := store.BucketVersioning(context.Background(), s)
	require.NoError(t, err, "declared: no request")
	assert.Equal(t, store.VersioningOn, got)
}
