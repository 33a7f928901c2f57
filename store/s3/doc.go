// Package s3 is the store.Store driver for Amazon S3 and S3-compatible
// servers, built on aws-sdk-go-v2. Importing it registers the "s3" URL
// scheme with store.Open:
//
//	s3://bucket/prefix?endpoint=http://127.0.0.1:7070&region=us-east-1&profile=dev&path_style=true&versioning=auto
//
// The query parameters are optional; non-zero fields of store.Config
// override them. Everything left unset comes from the standard AWS
// configuration: the default credential chain, AWS_ENDPOINT_URL_S3 or
// AWS_ENDPOINT_URL, AWS_REGION, AWS_PROFILE and the shared config files.
// AWS_S3_USE_PATH_STYLE=true turns on path-style addressing as well. With no
// region anywhere the driver uses us-east-1. Opening a store sends no
// request.
//
// # Guarantees
//
// Conditional writes are the server's: Put with IfNoneMatch sends
// If-None-Match: *, Put and Delete with IfMatch send If-Match with the quoted
// ETag. Bodies of up to 16 MiB (and bodies of unknown size that turn out to
// fit) go up in one PutObject; larger bodies go up as a multipart upload
// whose conditions are checked by CompleteMultipartUpload, so that they too
// are atomic on servers that support conditional completion. Attrs.ServerTime
// is the response's Date header, and zero when the response has none: the
// local clock is never reported as the store's, and callers that judge ages
// refuse a zero one (store.CheckServerTime). SweepLeftovers refuses too.
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
// One classifier maps every SDK error, by S3 error code and by HTTP status,
// to the store error classes: 404 NoSuchKey/NotFound is store.ErrNotExist,
// or store.ErrPrecondition when the request carried If-Match; 412 is
// store.ErrPrecondition; 409 (ConditionalRequestConflict) is
// store.ErrConflict; NoSuchBucket is store.ErrNoBucket and names the bucket;
// 401/403 and the credential error codes are store.ErrAccess. A server that
// cannot be reached gives an error naming the endpoint. Errors never contain
// credentials.
package s3
