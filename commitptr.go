// Package commitptr publishes datasets atomically on object stores: a
// writer stages files under a fresh generation and commits with one
// conditional write to a small pointer object, so that every reader sees
// exactly one complete generation. Any number of machines coordinate through
// the store alone (Amazon S3, an S3-compatible server, Google Cloud Storage,
// Azure Blob Storage,
// or a local directory).
//
// This package is the one-import entry point: Open opens a dataset by URL
// with every store driver registered. The work is done by the packages
// below it:
//
//	commit       datasets, transactions, snapshots, Update
//	lease        leases and leader election with fencing tokens
//	object       read-modify-write of one shared object (Update)
//	gc           the lease-guarded collector of old and orphaned generations
//	store        the object-store interface, URL opening, Probe
//	store/fs, store/mem, store/s3, store/minio, store/gcs, store/azblob   the drivers
//
// The command-line tool is cmd/publish; see README.md and docs/.
package commitptr

import (
	"context"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/store"
	_ "github.com/commitptr/commitptr/store/azblob" // registers az://
	_ "github.com/commitptr/commitptr/store/fs"     // registers file:// and plain paths
	_ "github.com/commitptr/commitptr/store/gcs"    // registers gs://
	_ "github.com/commitptr/commitptr/store/mem"    // registers mem://
	_ "github.com/commitptr/commitptr/store/minio"  // registers minio://
	_ "github.com/commitptr/commitptr/store/s3"     // registers s3://
)

// Open opens the dataset at url:
//
//	./dir, /abs/dir, file:///abs/dir   a local directory (safe across processes on one host)
//	s3://bucket/prefix                 Amazon S3 or an S3-compatible server
//	minio://bucket/prefix              the same, through minio-go
//	gs://bucket/prefix                 Google Cloud Storage
//	az://container/prefix              Azure Blob Storage (store/azblob)
//	mem://name/prefix                  in memory, shared by name within the process
//
// S3 settings come from the URL's query (endpoint, region, profile,
// path_style, sse, sse_kms_key_id, storage_class) and the standard AWS
// environment and shared config; use store.Open and commit.New to pass a
// store.Config instead (a customer key can only be passed that way). Open does not
// contact the store.
func Open(ctx context.Context, url string, opts ...commit.Option) (*commit.Dataset, error) {
	s, err := store.Open(ctx, url, store.Config{})
	if err != nil {
		return nil, err
	}
	return commit.New(s, opts...), nil
}
