// Package gc is the lease-guarded mark-and-sweep collector of a dataset: it
// removes superseded generations, the orphaned objects of writers that lost,
// aborted or crashed, and expired reader pins.
//
// One call to Run is one collection:
//
//  1. Read the pointer and check it against the manifest it names: the
//     manifest's sha256, seq and parent. A pointer that does not read,
//     decode or pass stops the run before its first write, the lease's:
//     it is left exactly as it was found, for an operator to inspect.
//     Then, unless it is a dry run, try-acquire the lease "gc". If another
//     collector holds it, Run does nothing and returns its
//     *lease.HeldError. Then register the lease token as the pointer's
//     gc_token with a compare-and-swap, before planning and whether or not
//     anything will be deleted. It fences former holders (see Guarantees).
//     A dataset without a pointer has nothing to register. A dry run takes
//     no lease and registers nothing: it only reads, so a role that may
//     not write can run it, and it plans while another collector works.
//  2. Read the pointer, list _gen/, and read the manifests the listing
//     shows, 16 at a time. Then walk the parent chain from the pointer,
//     verifying each link against the sha256 its child recorded. Anything
//     unreadable or corrupt on the chain aborts the run before anything is
//     deleted.
//  3. Retain the current generation, the last Keep ancestors, ancestors
//     superseded less than Grace ago, and every generation with an
//     unexpired pin.
//  4. Mark every key a retained manifest references. Incremental commits
//     share keys across generations, so a marked key is never deleted, even
//     when it lives under the prefix of a generation being collected.
//  5. From the listing, the candidates are the chain generations that are
//     not retained, and the orphans: generations outside the chain whose
//     newest object is older than OrphanAge.
//  6. Before deleting orphans, move the pointer's gc_horizon forward with a
//     compare-and-swap, so that a writer that stalled past the horizon can
//     no longer commit what the collector removes. Before deleting chain
//     generations, publish in the same way the pointer's gc_floor: the
//     lowest seq still retained as a window from the current generation,
//     so that no rollback can commit a reference to a generation being
//     removed. The CAS carries the token registered in step 1. If a
//     commit lands meanwhile, the CAS fails. The horizon and floor only
//     move forward and say nothing about what a commit contains, so the
//     collector does not plan again: it reads the pointer (stopping with
//     lease.ErrLost if it registers a higher lease token), reads the
//     manifests of the generations committed since its plan (verifying
//     each link), keeps them and every key they reference, and sends the
//     CAS again at once, against the pointer it just read. A commit must
//     then land within one round trip to make it fail again. After 16
//     such corrections, or when the new pointer does not lead back to the
//     plan's, it plans again from scratch. After a CAS that succeeded it
//     lists the pins and tags again (a reader may have pinned what it
//     deletes in between) and plans again if one names a generation it
//     would delete.
//  7. Delete the unmarked keys of the candidates with DeleteMany, at most
//     1000 keys per request, renewing the lease before every request. The
//     requests go in two waves, 8 requests at a time: first the data
//     objects of every candidate, then, once all of those have succeeded,
//     the manifests, oldest chain generation first, then the orphans'
//     (see "Order of deletes"). With Options.MaxDelete a
//     run deletes at most that many objects, oldest garbage first; with
//     Options.Budget it sends no more deletes once that much time has
//     passed since it started. Either way it reports what it left
//     (Report.Left), and the next run continues from there.
//  8. Drop expired pins, and lease epochs that ended long ago (see
//     MinEpochAge).
//  9. Ask the driver to remove the leftovers of writes interrupted more
//     than OrphanAge ago that no listing shows (store.SweepLeftovers): the
//     fs driver's temp files and the incomplete multipart uploads on S3
//     of a killed writer. This step needs no horizon, so it also runs on a
//     dataset that has no pointer yet, where nothing else is collected.
//
// # Guarantees
//
//   - The collector never deletes a key referenced by a retained
//     generation: the current one, the last Keep ancestors, one superseded
//     less than Grace ago, or one with an unexpired pin (I4).
//   - The pointer never ends up naming a generation with a missing object
//     (I1): a writer whose staged objects may have been removed is refused
//     by the gc_horizon guard of the commit protocol, and a rollback to a
//     generation below gc_floor by the floor guard (I6).
//   - The objects of a lost, aborted or crashed writer are gone after
//     OrphanAge plus one collection (I7).
//   - Every age is judged by the store's clock (Last-Modified against the
//     Date of a response), never by the local one. Because S3 reports both
//     at one-second resolution, an age counts as reaching a positive limit
//     only when it reaches the limit plus one second.
//   - Runs are idempotent, and a crash or an error at any point leaves a
//     state that the next run completes: the horizon is published before
//     any orphan is deleted, and manifests are deleted only after every
//     data object the run deletes, oldest first, so that the chain stays
//     walkable from the pointer and a half-deleted generation is found
//     again (see "Order of deletes" for what a crash in the middle of the
//     manifests leaves). A run stopped by MaxDelete or Budget leaves the
//     same kind of state.
//   - Only one collector works at a time. A collector that cannot renew its
//     lease stops before its next request that deletes anything.
//   - A collector that lost its lease changes nothing once the new holder
//     has registered its token, which every run does before it plans, even
//     one that deletes nothing (I6): the registration changes the
//     pointer's ETag, so a former holder's CAS still in flight fails, and
//     a former holder that reads a pointer registering a higher token than
//     its own stops. Such a write can land only before the registration;
//     it then counts as made before the takeover (the new holder plans
//     from it), and it only moves the horizon and floor forward.
//   - A dry run writes nothing, not even the lease.
//   - A run on a pointer that is corrupt, or does not match the manifest
//     it names, writes nothing at all, dry run or not (I8).
//
// # Order of deletes
//
// Safety (I1, I4) does not depend on the order of deletes at all: every
// key deleted is unmarked by every retained generation, and the floor and
// horizon published before the first delete keep rollbacks, pins and
// stalled writers from reaching a deleted generation. What the order
// decides is whether a run that stops anywhere (a crash, a lost lease, a
// failed request, MaxDelete, Budget) leaves garbage that the next run
// finds as the same garbage:
//
//   - A manifest goes after the data objects it names. The next run finds
//     a chain generation through its manifest, by walking the chain from
//     the pointer. Data left behind a deleted manifest are no longer in
//     the chain: they wait for OrphanAge (a day by default) and are then
//     collected as an orphan.
//   - Data objects need no order among themselves, across generations or
//     against orphans: while their manifests are all there, any subset of
//     them can be gone and the next run still plans the rest. So they are
//     deleted by several requests at once, which is most of the work.
//   - Chain manifests are better deleted oldest first: the walk stops at
//     the first missing manifest, and an older generation beyond that gap
//     would likewise wait for OrphanAge. Their requests start oldest
//     first, so a run stopped by MaxDelete or Budget leaves no gap (it
//     starts no new request and lets those in flight finish). They run
//     several at once all the same, because on a store that removes a
//     generation's directory with its last object (versitygw's POSIX
//     backend) a manifest costs ten times a data object to delete. A crash
//     or a failed request in that wave, like a partly failed request
//     (the store may apply the keys of one DeleteMany in any order), can
//     leave a gap; the generations beyond it have lost their data already
//     and only their manifests wait for OrphanAge.
//
// The grace runs from the Last-Modified of the successor's manifest, which
// is written a moment before the pointer moves to it, so a reader that
// opened a snapshot in that moment gets the grace less the moment. Readers
// that need a snapshot for long should pin it right after opening it: a
// pin written within the grace keeps the generation. Deletes cannot be
// fenced (S3 has no conditional batch delete); a collector that pauses for
// longer than its lease's TTL between renewing and deleting may delete
// after another collector took over, which is as safe as a slow delete:
// it only removes keys that were unmarked when it planned.
//
// # Errors
//
// Run returns:
//   - a *lease.HeldError (errors.Is lease.ErrHeld) when another collector
//     holds the lease; nothing was done;
//   - an error matching ErrRefused, joined with the cause (for example
//     pointer.ErrCorrupt or generation.ErrCorrupt), when the pointer or a
//     manifest it needs is unreadable or corrupt; nothing was deleted,
//     and when it is the pointer that does not decode or does not match
//     its manifest, nothing was written; the message names the key;
//   - an error matching ErrBusy when commits landed between its reading of
//     the pointer and its compare-and-swap in every one of 8 plans (each
//     corrected up to 16 times, see step 6), or of 8 registrations of its
//     lease token (on a dataset that commits many times a second);
//     nothing was deleted;
//   - an error matching lease.ErrLost when the lease was lost mid-run, or
//     when the pointer registers a collection with a higher lease token;
//     the collection stopped before its next delete request;
//   - store errors, wrapped with what the collector was doing.
//
// Run always returns a Report. After an error it describes the plan and how
// far the run got.
//
// # Layout
//
// The collector reads and writes these keys of a dataset:
//
//	_pointer                 read; gc_horizon, gc_floor, gc_token moved by CAS
//	_gen/<gen>/<path>        listed; unmarked keys of candidates deleted
//	_gen/<gen>/_manifest     read along the chain; deleted after its data
//	_pin/<gen>/<ttl>-<id>    listed; expired pins deleted
//	_lease/gc                the collector's lease
//	_lease/<name>/<epoch>    old epochs removed by lease.CleanupEpochs
//
// # Cost
//
// A collection costs one GET for the pointer, one GET per manifest still
// present along the chain (the retained window plus the garbage, plus one
// for the first collected link), one GET per pinned generation outside the
// chain and per orphan that got as far as its manifest, one LIST page per
// 1000 keys under _gen/ and _pin/, one DeleteMany per 1000 deleted data
// objects and one per 1000 deleted manifests (so two for a small
// collection), and a lease PUT before each of them, plus one pointer GET
// before the lease, to check the pointer (the manifest it names is one of
// the GETs above), one pointer PUT to register the lease token (every run
// but a dry run, even one that deletes nothing; a dry run takes no lease,
// sends no PUT or DELETE at all, and reads the pointer again to plan) and
// one pointer PUT (horizon and floor) before the
// first delete when either moves; on S3, four more LISTs for
// incomplete multipart uploads (under _gen/, _pin/, _lease/ and the
// pointer's key). It grows with the garbage and the retained window, not
// with the length of history. The manifest GETs run 16 at a time, the
// DeleteMany requests for data 8 at a time. A horizon CAS that a commit
// beats costs one pointer GET, one GET per generation committed since,
// and the CAS again.
package gc
