// Package minio is the store.Store driver for Amazon S3 and S3-compatible
// servers, built on minio-go (github.com/minio/minio-go/v7). Importing it
// registers the "minio" URL scheme with store.Open:
//
//	minio://bucket/prefix?endpoint=http://127.0.0.1:7070&region=us-east-1&profile=dev&path_style=true
//
// The query parameters are optional; non-zero fields of store.Config
// override them. Everything left unset follows the AWS conventions: the
// endpoint from AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (else
// s3.amazonaws.com; an http:// endpoint turns TLS off), the region from
// AWS_REGION (else us-east-1), and credentials from the environment, the
// shared credentials file (AWS_PROFILE) or IAM. Opening a store sends no
// request: the region is always set, so minio-go never looks up a bucket's
// location.
//
// # Choosing minio or s3
//
// Both drivers are the same portable layer (package portable) over the
// same S3 requests, delete every version alike and open the same URLs;
// only the client calls differ, and both pass the same acceptance suite.
// Pick minio for minio-go's smaller dependency tree, for multipart uploads
// that hold one part in memory at a time, or to supply minio-go
// credentials (Options.Credentials). Pick s3 for everything the AWS
// configuration offers and minio-go's credential chain reads not: profiles
// of the shared config file (SSO, assumed roles, credential processes) and
// AWS_CA_BUNDLE.
//
// # Guarantees
//
// Conditional writes are the server's: Put with IfNoneMatch sends
// If-None-Match: *, Put and Delete with IfMatch send If-Match with the quoted
// ETag. Bodies of up to PartSize bytes (and bodies of unknown size that turn
// out to fit) go up in one PutObject; larger bodies go up as a multipart
// upload, one part in memory at a time, whose CompleteMultipartUpload
// carries the conditions, so that the write is atomic either way. Get sends
// exactly one GET. Attrs.ServerTime is the response's Date header (for Put,
// of the request that made the object: the PUT, or the completion of a
// multipart upload), and zero when the response has none: the local clock
// is never reported as the store's, and callers that judge ages refuse a
// zero one (store.CheckServerTime). SweepLeftovers refuses too.
//
// # Versioned buckets
//
// On a bucket that keeps versions (versioning enabled or suspended), Delete
// and DeleteMany delete every version of each key that ListObjectVersions
// shows, delete markers included, older versions before the latest, and
// only the version ids listed (see store.Versioner); what they freed goes
// to the tracker of store.TrackFreed. The first delete of a Store asks
// GetBucketVersioning, once; a Put answered with a version id, or
// versioning=on|off in the URL (Options.Versioning), settles it without a
// request.
//
// # Errors
//
// One classifier maps every minio-go error, by S3 error code and by HTTP
// status, to the store error classes: 404 NoSuchKey is store.ErrNotExist,
// or store.ErrPrecondition when the request carried If-Match; 412 is
// store.ErrPrecondition; 409 (ConditionalRequestConflict) is
// store.ErrConflict; NoSuchBucket is store.ErrNoBucket and names the bucket;
// 401/403 and the credential error codes are store.ErrAccess. A server that
// cannot be reached gives an error naming the endpoint. Errors never contain
// credentials. A HEAD response has no body, so Head cannot tell a missing
// bucket from a missing key and reports store.ErrNotExist for both.
package minio
