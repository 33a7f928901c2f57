// Package object runs a read-modify-write of one object on a store, with
// nothing but conditional writes: Update reads the object and its ETag,
// calls a function for the new body, and writes it back If-Match the ETag
// read (If-None-Match when the object was absent). A lost race runs the
// function again on the version that won, after a jittered backoff (Retry).
// It needs no dataset: any key of any store will do.
//
// # The rule
//
// A write is retried only after a version of the object read back proves
// the earlier write dead (the version replaced the one it was conditioned
// on, through writes that are all someone else's) or landed (the version
// carries its write id). A write that is proven neither stays open, and
// while one is open Update returns ErrUnknown, whatever else ends it: the
// write may still land. A status code alone, a 412 included, proves
// nothing: an SDK's own retry of a write whose response was lost meets
// that write and gets 412.
//
// Each write carries, in its metadata, the write ids of the last 40
// versions of the object (its lineage, newest first) and the id of the
// write that created it (its origin); that is how a version read back
// proves a write landed or dead. A plain PUT by a writer that does not keep
// them leaves nothing to prove with: then the outcome is ErrUnknown.
//
// # Errors
//
// Errors are matched with errors.Is: ErrUnknown (a write of this call may
// have landed, or may still land); store.ErrPrecondition and
// store.ErrConflict when the attempts run out on lost races, each proven
// lost; the error of fn, of the context, or of a read, when no write is
// open. docs/PROTOCOL.md ("Read-modify-write of one object") has the whole
// protocol (U1 to U3).
package object
