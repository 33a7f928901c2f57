// Package portable is what every cloud driver does the same way, whatever
// its service: the checks and the body split that start a Put, and the
// reading of a Delete's outcome. A driver calls it and keeps only its
// service's requests and error codes.
//
// Put's rules:
//   - a nil body, a Size below zero or above the service's largest object,
//     and IfMatch with IfNoneMatch are refused before any request;
//   - a conditional write is one request of at most
//     store.MaxConditionalSize bytes, since some servers check the
//     condition on a single PUT but not when they complete a multipart
//     upload;
//   - a body whose length differs from a declared Size fails, before the
//     upload is completed;
//   - a seekable body is measured, not copied, so that an SDK can rewind it
//     to retry; Seek(0, io.SeekStart) rewinds it to its offset at the call,
//     not to the start of what the caller handed over.
//
// Delete's rule: a key that is gone is deleted, with or without IfMatch.
package portable
