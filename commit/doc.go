// Package commit publishes generations of a dataset atomically, and reads
// them back as snapshots.
//
// A writer stages data objects under a fresh generation id, writes the
// generation's manifest, and commits with one compare-and-swap on the
// dataset's pointer. Readers resolve through the pointer, so each reader sees
// exactly one generation. The same mechanism gives read-modify-write of a
// whole dataset (Dataset.Update). Read-modify-write of a single shared
// object needs no dataset: it is package object's (object.Update).
//
// # Guarantees
//
//   - The pointer only ever names a generation whose manifest and data
//     objects were all written before the pointer was (I1).
//   - A commit that returns success was the pointer's value at some point;
//     pointer values form a linearizable compare-and-swap register (I2).
//   - A Snapshot reads the files of exactly one generation, verifying the
//     size and sha256 of every file while streaming (I3).
//   - A commit is refused when the collector's horizon has passed its
//     staging start (ErrStale) or when the same lease has registered or
//     committed a higher fencing token (ErrFenced) (I6). Tokens are kept per
//     lease identity (CommitOptions.FenceLease); see Dataset.RegisterFence.
//   - A Tx with rebase (Tx.EnableRebase) that proves it lost rebases on
//     the new head when the generations committed since its base did not
//     change what it read: a new manifest, with the head as parent, holds
//     the head's files with this Tx's changes applied. No data is uploaded
//     again, every guard runs again against the head, and an overlap
//     loses as without rebase (ConflictError.Overlap names the paths).
//   - A writer discards its staged objects only after proving it lost.
//     When the outcome cannot be proven it returns ErrCommitUnknown and
//     deletes nothing.
//
// # Errors
//
// Errors are matched with errors.Is: ErrConflict (lost the race; a
// *ConflictError names the winner), ErrCommitUnknown, ErrStale, ErrFenced,
// ErrCollected (a snapshot outlived retention), ErrChecksum (a file did not
// match its manifest), ErrNoCommits, and the corrupt-input errors of the
// pointer and generation packages.
//
// # Layout
//
//	_pointer                 the commit pointer (package pointer)
//	_gen/<gen>/<path>        data objects, each written once
//	_gen/<gen>/_manifest     the manifest (package generation)
//	_pin/<gen>/<id>          reader pins
//	_intent/<write-id>/<id>  group commit: a writer's change, to be carried
//	                         only on the pointer value <write-id>
//
// # Cost
//
// A commit of K files costs K data PUTs, 1 manifest PUT, 1 pointer GET and
// 1 pointer PUT; a rebase adds 1 manifest GET, 1 manifest PUT and 1
// pointer PUT, besides the pointer GET that proved the loss. A commit
// with rebase that kept its base's files (KeepAll) LISTs the intents
// waiting on its base once, for group commit (see Rebase). A snapshot
// read costs 1 pointer GET, 1 manifest GET and one GET per file read.
// Nothing else on either path lists, so cost does not grow with history.
package commit
