// Package object runs a read-modify-write of one object on a store, with
// nothing but conditional writes: Update reads the object and its ETag,
// calls a function for the new body, and writes it back If-Match the ETag
// read (If-None-Match when the object was absent). A lost race runs the
// function again on the version that won, after a jittered backoff (Retry).
// It needs no dataset: any key of any store will do.
//
// # The rule
//
// A failed write is settled by reading the object back, never by its
// status code (a 412 included: an SDK's own retry of a write whose
// response was lost meets that write and gets 412). A version that carries
// the write's id proves it landed; one that replaced the version the write
// was conditioned on, through writes that are all someone else's, proves it
// dead. Only a write proven dead counts as lost. A write proven neither
// stays open: Update may try again on the same version, where at most one
// of the two writes can land, but while a write is open every other way
// out (the context ends, fn fails, the attempts run out, the read-back
// fails) returns ErrUnknown: the write may still land.
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
// have landed, or may still land); when the attempts run out with every
// write proven lost, the last write's error (store.ErrPrecondition or
// store.ErrConflict after a lost race); and, while no write is open, the
// error of fn, of the context, or of a read. docs/PROTOCOL.md
// ("Read-modify-write of one object") has the whole protocol (U1 to U3).
package object
