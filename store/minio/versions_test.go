package minio_test

import (
	"context"
	"testing"

	miniogo "github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/minio"
	"github.com/commitptr/commitptr/store/storetest"
)

// versionedOn returns the driver on a fresh bucket of srv with versioning
// enabled, and what storetest.RunVersioned needs beside it.
func versionedOn(t *testing.T, srv *testenv.S3Server) storetest.Versioned {
	t.Helper()
	opts := optionsOn(t, srv)
	opts.Bucket = srv.NewVersionedBucket(t)
	tr, err := miniogo.DefaultTransport(false)
	require.NoError(t, err)
	hook := &storetest.DeleteHook{Base: tr}
	plain := opts
	plain.Versioning = store.VersioningOff
	opts.Transport = hook
	s, err := minio.New(context.Background(), opts)
	require.NoError(t, err)
	return storetest.Versioned{
		Store: s,
		Plain: newStore(t, plain),
		Versions: func(t *testing.T, prefix string) []storetest.ObjectVersion {
			return srv.Versions(t, opts.Bucket, prefix)
		},
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
