package s3_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/s3server"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/s3"
	"github.com/commitptr/commitptr/store/storetest"
)

// versionedOn returns the driver on a fresh bucket of srv with versioning
// enabled, and what storetest.RunVersioned needs beside it.
func versionedOn(t *testing.T, srv *s3server.Server) storetest.Versioned {
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
	srv := s3server.SharedVersioned(t)
	storetest.RunVersioned(t, srv.Versioned, func(t *testing.T) storetest.Versioned { return versionedOn(t, srv) })
}

func TestVersionedGofakes3(t *testing.T) {
	srv := s3server.SharedGofakes3(t)
	storetest.RunVersioned(t, srv.Versioned, func(t *testing.T) storetest.Versioned { return versionedOn(t, srv) })
}
