// Package gcs is the store.Store driver for Google Cloud Storage, built on
// the Go client (cloud.google.com/go/storage). Importing it registers the
// "gs" URL scheme with store.Open:
//
//	gs://bucket/prefix?endpoint=http://127.0.0.1:4443&connect_timeout=10s&timeout=30s&idle_timeout=60s
//
// The query parameters are optional; non-zero fields of store.Config
// override them. Without an endpoint the driver talks to Cloud Storage
// with Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS,
// the gcloud user credentials, or the metadata server on Google Cloud).
// An http:// endpoint, or STORAGE_EMULATOR_HOST as Google's libraries read
// it, is an emulator or an authenticating proxy: it gets no credentials,
// and no credential source is consulted. Opening a store sends no request.
//
// # Version tokens and conditions
//
// Attrs.ETag, the store's version token, is the object's generation in
// decimal: Cloud Storage conditions writes on generations, not on ETags.
// Put with IfMatch sends ifGenerationMatch=<generation>, Put with
// IfNoneMatch ifGenerationMatch=0 ("does not exist"), Delete with IfMatch
// ifGenerationMatch. A token that is not the canonical decimal form of a
// positive generation (among them "0", which would turn a compare-and-swap
// into a create) names no generation of the object: the call fails with
// store.ErrPrecondition without a request.
//
// A conditional Put goes up in one request (an upload of type multipart:
// metadata and body together), read into memory first and at most
// store.MaxConditionalSize bytes; the client retries it up to PartSize
// bytes and not beyond, where it would need a second copy of the body. An
// unconditional Put of at most PartSize bytes (or of unknown size that
// turns out to fit) is one request too; a larger one is a resumable upload
// in chunks of PartSize. Get is one GET of the stored bytes (the XML API;
// gzip objects are not transcoded), Head one metadata GET (JSON API),
// Delete one DELETE, List one objects.list request per page. DeleteMany
// sends one DELETE per key, 16 at a time: the JSON API deletes one object
// per request (store.Count still counts one request per
// store.MaxDeleteBatch keys, as for S3). A request that fails with a
// retryable error is sent at most 3 times in all, and one the service
// throttles (429, 503) at most 10 times.
//
// # Clocks
//
// The client hides response headers, so the driver's HTTP transport
// records them per operation (the operation's context carries a record of
// its own; concurrent operations never share one). Attrs.ServerTime is
// the Date of the operation's last response, and zero when it had none:
// the local clock is never reported as the store's (store.CheckServerTime).
// User metadata of a Get comes from the same headers (x-goog-meta-*).
//
// # Leftovers
//
// An interrupted resumable upload holds no object, shows in no listing and
// cannot be listed; Cloud Storage drops the session after a week. The
// driver therefore implements no store.LeftoverSweeper, and the
// collector's sweep reports nothing to do on gs://.
//
// # Errors
//
// 404 is store.ErrNotExist, except for an upload, where it is the bucket's
// (store.ErrNoBucket; Cloud Storage answers a generation condition on a
// missing object with 412); 412 is store.ErrPrecondition; 409 is
// store.ErrConflict; 401 and 403 are store.ErrAccess. A server that cannot
// be reached, or that runs into a timeout, gives an error naming the
// endpoint. A download that fails part way and cannot be resumed names
// the first failure as well.
package gcs
