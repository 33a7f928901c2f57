// Package store defines the small object-store interface that the rest of
// commitptr is built on, the error classes every driver maps its failures to,
// URL opening, request accounting and the precondition probe.
//
// The interface follows S3 semantics: whole-object writes, strong
// read-after-write consistency, and conditional writes: compare-and-swap
// on a version token (If-Match) and create-if-absent (If-None-Match: *).
// Everything above this package (pointer CAS, leases, the collector)
// relies on those two preconditions being enforced atomically by the store.
//
// A version token (Attrs.ETag, Object.ETag) is opaque: each driver
// defines its form, and it changes with every write of the object. The
// S3 drivers and fs and mem use the entity tag without its quotes; the
// gcs driver uses the object's generation number in decimal. Callers only
// compare tokens for equality and pass them back to the driver that
// issued them, in PutOptions.IfMatch and DeleteOptions.IfMatch; they never
// parse, quote, unquote or make one up. A token of a form the driver
// never issues names no version of the object, so a condition on it fails
// (ErrPrecondition), possibly without a request.
package store

import (
	"context"
	"io"
	"time"
)

// Store is an object store. Keys are slash-separated strings without a
// leading slash. Implementations must be safe for concurrent use.
//
// Every method that fails because of the object's state returns an error that
// matches one of the sentinel errors below with errors.Is; any other failure
// is wrapped with the operation name and the key.
type Store interface {
	// Get opens the object for reading. The caller must close the body.
	// If the key does not exist, Get returns an error matching ErrNotExist.
	Get(ctx context.Context, key string) (io.ReadCloser, Attrs, error)

	// GetRange opens at most n bytes of the object from byte offset off
	// (off >= 0, n >= 1; anything else is refused without a request). The
	// body is shorter than n when the object ends first. A range that
	// starts at or past the object's end returns an error matching
	// ErrInvalidRange; a missing key, ErrNotExist. The Attrs are Get's:
	// Size is the whole object's, not the range's.
	GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, Attrs, error)

	// Head returns the object's attributes without its body.
	// If the key does not exist, Head returns an error matching ErrNotExist.
	Head(ctx context.Context, key string) (Attrs, error)

	// Put writes the whole object. With opts.IfNoneMatch the write succeeds
	// only if the key does not exist; with opts.IfMatch only if the current
	// version token equals it. A failed condition returns ErrPrecondition, also when
	// IfMatch names a key that does not exist. A concurrent conditional write
	// may return ErrConflict, which callers should retry.
	Put(ctx context.Context, key string, body io.Reader, opts PutOptions) (Attrs, error)

	// Delete removes the object. With opts.IfMatch it removes it only if
	// the current version token equals it, and returns ErrPrecondition
	// otherwise.
	// Deleting a missing key is not an error, with or without IfMatch: S3
	// servers differ there, and either way the object is gone.
	// A conditional delete is a capability, not a guarantee: some
	// servers (gofakes3, MinIO, fake-gcs-server) ignore the condition on
	// delete and remove the object anyway, so commitptr never relies on it.
	Delete(ctx context.Context, key string, opts DeleteOptions) error

	// DeleteMany removes the keys, sending at most MaxDeleteBatch keys per
	// request. Missing keys are not an error. The returned error, if any,
	// names the keys that could not be deleted.
	DeleteMany(ctx context.Context, keys []string) error

	// List returns one page of at most MaxListPage entries whose keys start
	// with req.Prefix, in lexical order. Use the package function List to
	// iterate over all pages.
	List(ctx context.Context, req ListRequest) (ListPage, error)
}

// MaxConditionalSize is the largest body a conditional Put (IfNoneMatch or
// IfMatch) may carry. Drivers send every conditional write as one request,
// never as a multipart upload: some S3-compatible servers enforce the
// conditions on PutObject but ignore them on CompleteMultipartUpload, and a
// single request is the one path the probe proves. S3 takes up to 5 GiB in
// one PutObject; commitptr's largest conditional write is a manifest of at
// most 256 MiB, and a body that is not an io.ReadSeeker may be buffered in
// memory, so the cap is lower.
const MaxConditionalSize = 1 << 30

// MaxDeleteBatch is the most keys one DeleteMany request carries (the S3 limit).
const MaxDeleteBatch = 1000

// MaxListPage is the most entries one List page holds (the S3 limit).
const MaxListPage = 1000

// Attrs are the attributes of an object, as returned by Get, GetRange, Head
// and Put.
type Attrs struct {
	// ETag is the object's version token: opaque, defined by the driver
	// (an S3 entity tag without its quotes; a Cloud Storage generation),
	// and different after every write of the key. Compare it for
	// equality, or pass it back in IfMatch; nothing else.
	ETag string
	// Size is the object's length in bytes; -1 if the store did not say.
	Size int64
	// LastModified is the store's modification time of the object.
	// Put may leave it zero if the store does not return it.
	LastModified time.Time
	// ServerTime is the store's clock at the time of the response (the HTTP
	// Date header; the local clock for the mem and fs drivers, which are
	// the store's clock). Leases and the collector judge ages as
	// ServerTime - LastModified, never by the local wall clock. It is zero
	// when the response had no Date: a driver never invents it, and
	// whoever would judge an age by it refuses (CheckServerTime).
	ServerTime time.Time
	// Metadata holds user metadata. Keys are lower case.
	Metadata map[string]string
	// ContentType and ContentEncoding are the stored HTTP headers.
	ContentType     string
	ContentEncoding string
}

// PutOptions are the conditions and headers of a Put.
type PutOptions struct {
	// IfNoneMatch makes the write create-if-absent (If-None-Match: *).
	IfNoneMatch bool
	// IfMatch, when not empty, makes the write succeed only if the object's
	// current version token (Attrs.ETag) equals it (compare-and-swap). The
	// gcs driver sends it as ifGenerationMatch.
	IfMatch string
	// Size is the body length when the caller knows it; zero means unknown,
	// and the driver reads the body to its end. Drivers use it to choose
	// between a single PUT and a multipart upload.
	Size int64
	// Metadata is stored as user metadata. Keys must be lower case ASCII.
	Metadata        map[string]string
	ContentType     string
	ContentEncoding string
}

// DeleteOptions are the conditions of a Delete.
type DeleteOptions struct {
	// IfMatch, when not empty, deletes only if the object's current
	// version token (Attrs.ETag) equals it.
	IfMatch string
}

// ListRequest selects one page of a listing.
type ListRequest struct {
	Prefix string
	// Delimiter, when not empty, groups keys that contain it after the
	// prefix into common prefixes, as S3 does.
	Delimiter string
	// StartAfter lists only keys lexically greater than it.
	StartAfter string
	// Token continues a previous listing; it is ListPage.Next of the page
	// before. When set, StartAfter is ignored.
	Token string
	// MaxKeys limits the page; 0 or more than MaxListPage means MaxListPage.
	MaxKeys int
}

// ListPage is one page of a listing.
type ListPage struct {
	Objects []Object
	// Prefixes are the common prefixes (only with a delimiter), each ending
	// with the delimiter.
	Prefixes []string
	// Next continues the listing; empty when this is the last page.
	Next string
}

// Object is one entry of a listing.
type Object struct {
	Key  string
	Size int64
	// ETag is the version token, as Attrs.ETag.
	ETag         string
	LastModified time.Time
}
