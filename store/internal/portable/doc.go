// Package portable is what every cloud driver does the same way, whatever
// its service. A driver's Store embeds a Bucket over its Driver, the
// narrow interface of the service's requests; the Bucket is the
// store.Store, and holds the rules:
//
//   - Put: a nil body, a Size below zero or above the service's largest
//     object, and IfMatch with IfNoneMatch are refused before any request
//     (Check). A conditional write is one request of at most
//     store.MaxConditionalSize bytes, since some servers check the
//     condition on a single PUT but not when they complete a multipart
//     upload. A body whose length differs from a declared Size fails,
//     before the upload is completed. A seekable body is measured, not
//     copied, so that an SDK can rewind it to retry; Seek(0, io.SeekStart)
//     rewinds it to its offset at the call (Read).
//   - GetRange: an offset below zero or a length below one is refused
//     before any request (CheckRange); a range from the object's end on
//     is store.ErrInvalidRange, however the service answers it.
//   - Delete: a key that is gone is deleted, with or without IfMatch
//     (Deleted). On a bucket that keeps versions, the driver deletes
//     every version (Versions).
//   - DeleteMany: batches of at most store.MaxDeleteBatch keys, one after
//     another; the error names every key not deleted (store.KeyList), the
//     first failure's class and cause.
//   - List: a page of at most store.MaxListPage entries.
//   - Errors: a Driver classifies its service's failures (Classify); the
//     Bucket names the operation and the key, once (Wrap).
package portable
