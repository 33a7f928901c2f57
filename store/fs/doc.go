// Package fs is the local-directory store.Store driver, commitptr's embedded
// default. It keeps every object in one file below a root directory and is
// safe for concurrent use by any number of goroutines and OS processes on one
// host, as long as they share the directory through a local file system that
// supports flock(2), link(2) and atomic rename(2) (not NFS).
//
// The URL file:///abs/dir opens the store rooted at /abs/dir; a plain path
// (./rel/dir or /abs/dir) is turned into such a URL by store.ParseURL. A
// root directory that does not exist yet reads as an empty store and is
// created (mode 0700) by the first write, so commands that only read leave
// nothing behind; a missing parent is an error matching store.ErrNoBucket.
// New, in contrast, requires the root to exist already.
//
// # Guarantees
//
//   - Writes are atomic and durable: the body and its attributes go to a temp
//     file in the object's directory, which is fsynced, then published with
//     one rename(2) or link(2), and the directory is fsynced (after its
//     lock is released, before the write reports success). A reader sees
//     either the old or the new object, never a mix: Get opens the file once,
//     and a later replacement does not affect the open file.
//   - Create-if-absent (PutOptions.IfNoneMatch) publishes with link(2), which
//     fails with EEXIST if the key exists; it never checks, then renames.
//   - Every mutation of a key (Put in all its forms, Delete) runs under an
//     exclusive flock(2) on the directory that holds the key's object file,
//     so a compare-and-swap (PutOptions.IfMatch, DeleteOptions.IfMatch)
//     reads the current ETag and replaces the object atomically with respect
//     to every other process. The lock belongs to the directory, not to a
//     spelling of the key: stores rooted at /r and at /r/sub, or at a
//     symbolic link to /r, reach the object "sub/k" of /r through the same
//     directory and so meet the same lock. Mutations of the keys of one
//     directory wait for each other; those of one process take turns in
//     the order they came, so none starves. Reads take no lock. A process paused
//     (SIGSTOP, a frozen container) while it holds the lock keeps it until
//     it resumes, and no one may take it over, since its write may still
//     complete; the others give up after the lock wait (Store.SetLockWait,
//     the header timeout for file:// URLs) with ErrLockWait, having
//     written nothing, instead of hanging.
//   - ETags are the hex MD5 of the body, as S3 computes them for single-part
//     uploads, so an identical body gives an identical ETag.
//   - LastModified is the file's modification time, set to the local clock
//     just before the object is published; ServerTime is the local clock.
//   - Listings are in lexical key order and page through any number of keys.
//     The page token (ListPage.Next) is opaque.
//   - Files are created with mode 0600 and directories with mode 0700.
//
// A process that crashes mid-write leaves a temp file ("#tmp-…") behind. It
// is never listed or read. SweepLeftovers removes the temp files older than
// an age (the collector does, past its orphan age), and the directories
// that leaves empty.
//
// # Errors
//
// Every error is a *store.OpError naming the operation and the key. Failures
// go through one classifier: a missing file is store.ErrNotExist (or
// store.ErrNoBucket when the root directory itself is gone), EACCES and EPERM
// are store.ErrAccess, and failed conditions are store.ErrPrecondition,
// including If-Match on a missing key. The driver never returns
// store.ErrConflict: concurrent conditional writes wait for the key's lock.
//
// Keys are validated before any file is touched. A key is invalid if it is
// empty, longer than 1024 bytes, not valid UTF-8, starts with "/", contains
// NUL or a backslash, or has an empty, "." or ".." segment (so "a//b" and
// "a/" are invalid), or a segment longer than 254 bytes once encoded. Such
// keys get an error that names the key; nothing is written, and no path
// outside the root is ever formed.
//
// # Layout
//
// A key's segments, split at "/", map to nested directories, and its last
// segment to a file whose name ends in "#":
//
//	key "a/b/c"   →  root/a/b/c#
//	key "a/b"     →  root/a/b#     (coexists with the directory root/a/b/)
//
// Because object files end in "#" and directories never do, a key may be
// both an object and a prefix of other keys, as on S3. In every segment the
// bytes "%" and "#" are percent-encoded ("%25", "%23"), so no encoded name
// contains "#" except as that suffix. Names that start with "#" are the
// driver's own: temp files (dir/#tmp-…), and root/#locks, where earlier
// versions of the driver kept lock files named by the key's hash. This
// version makes no lock files; it never lists "#" names, and its sweep of
// leftovers leaves an old root/#locks alone (it may be removed while no
// earlier version runs). The locks of an earlier version and of this one
// do not exclude each other: stop every process of the earlier version
// before one of this version writes to the same directory.
//
// Each object file holds the body, then a JSON trailer with the ETag, size,
// content type and encoding and user metadata, then a 12-byte footer: the
// trailer's length (4 bytes, big-endian) and the magic "cptrobj1". Delete
// removes the file and then, best effort, the directories it leaves empty,
// up to but not including the root. Through a root above another store's
// root, that can remove the other root when it is left empty; that store
// then fails with store.ErrNoBucket until its root is made again.
//
// Symbolic links inside the root are followed; do not place any there.
package fs
