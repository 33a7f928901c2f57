package minio

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/minio/minio-go/v7"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/portable"
	"github.com/commitptr/commitptr/store/internal/versions"
)

// Versioning implements store.Versioner: it asks GetBucketVersioning once
// per Store, unless Options.Versioning declared the answer or a Put was
// answered with a version id (versions.State).
func (s *Store) Versioning(ctx context.Context) (store.Versioning, error) { return s.b.Versioning(ctx) }

// Versioning implements versions.Client.
func (s *bucket) Versioning(ctx context.Context) (store.Versioning, error) {
	return s.ver.Get(ctx, s.bucket, func(ctx context.Context) (bool, error) {
		cfg, err := s.client.GetBucketVersioning(ctx, s.bucket)
		if err != nil {
			class, cause := portable.Split(s.err(false, err))
			return false, store.Wrap("get-bucket-versioning", s.bucket, class, versions.CannotTell(cause))
		}
		return cfg.Status != "", nil
	})
}

// sawVersionID records the version id a write was answered with.
func (s *bucket) sawVersionID(id string) { s.ver.SawVersionID(id) }

// VersionedDelete implements portable.Versions (see store.Versioner).
// An IfMatch that cannot go in a header is refused first.
func (s *bucket) VersionedDelete(ctx context.Context, op string, keys []string, ifMatch string, plain func() error) error {
	if ifMatch != "" && badETag(ifMatch) {
		return fmt.Errorf("bad IfMatch ETag %q", ifMatch)
	}
	return s.ver.Delete(ctx, s, op, keys, ifMatch, plain)
}

// ListVersions lists the versions and delete markers under prefix, in key
// order. Some servers (versitygw) list a page's delete markers after its
// versions rather than in key order, so each page is sorted; minio-go
// hides where a page ends, but x counts the requests it sends, and it
// asks for the next page only once the last entry of a page is taken.
// minio-go asks for the next page with the markers of the last one and,
// when a server sends none, asks for the same page again; Collect sees the
// entries come back and stops with store.ErrListingStuck.
func (s *bucket) ListVersions(ctx context.Context, prefix string, counts *store.Counts) iter.Seq2[versions.Version, error] {
	return func(yield func(versions.Version, error) bool) {
		ctx, x := withExchange(ctx, "", nil)
		defer func() { counts[store.OpList] += x.requests() }()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var page []versions.Version
		flush := func() bool {
			slices.SortStableFunc(page, func(a, b versions.Version) int { return cmp.Compare(a.Key, b.Key) })
			for _, v := range page {
				if !yield(v, nil) {
					return false
				}
			}
			page = page[:0]
			return true
		}
		at := int64(-1)
		for o := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{
			Prefix: prefix, Recursive: true, WithVersions: true,
		}) {
			if o.Err != nil {
				yield(versions.Version{}, s.err(false, o.Err))
				return
			}
			if n := x.requests(); n != at {
				if !flush() {
					return
				}
				at = n
			}
			page = append(page, versions.Version{
				Key: o.Key, ID: o.VersionID, Latest: o.IsLatest, Marker: o.IsDeleteMarker,
				Size: o.Size, ETag: trimETag(o.ETag),
			})
		}
		flush()
	}
}

// DeleteVersions deletes the versions with one multi-object DELETE. It
// returns the versions that are not deleted, and an error naming them. A
// version that is already gone is not an error.
func (s *bucket) DeleteVersions(ctx context.Context, op string, batch []versions.Version, counts *store.Counts) (map[[2]string]bool, error) {
	ctx, x := withExchange(ctx, "", nil)
	defer func() { counts[store.OpDeleteMany] += x.requests() }()
	objects := func(yield func(minio.ObjectInfo) bool) {
		for _, v := range batch {
			if !yield(minio.ObjectInfo{Key: v.Key, VersionID: v.ID}) {
				return
			}
		}
	}
	failed := map[[2]string]bool{}
	results, err := s.client.RemoveObjectsWithIter(ctx, s.bucket, objects, minio.RemoveObjectsOptions{})
	if err != nil {
		for _, v := range batch {
			failed[[2]string{v.Key, v.ID}] = true
		}
		return failed, portable.Wrap(op, batch[0].Key, s.err(false, err))
	}
	seen := map[[2]string]bool{}
	var firstErr error
	var first versions.Version
	for r := range results {
		id := [2]string{r.ObjectName, r.ObjectVersionID}
		seen[id] = true
		if r.Err == nil {
			continue
		}
		failed[id] = true
		if er, ok := errors.AsType[minio.ErrorResponse](r.Err); ok && (er.Code == minio.NoSuchKey || er.Code == "NoSuchVersion") {
			continue // gone, but not freed here
		}
		if firstErr == nil {
			firstErr, first = r.Err, versions.Version{Key: r.ObjectName, ID: r.ObjectVersionID}
		}
	}
	// minio-go stops after a failed request; what it never sent is not
	// deleted either.
	for _, v := range batch {
		if id := [2]string{v.Key, v.ID}; !seen[id] {
			failed[id] = true
			if firstErr == nil {
				firstErr, first = fmt.Errorf("no result for it: %w", cmpErr(ctx.Err())), v
			}
		}
	}
	if firstErr == nil {
		return failed, nil
	}
	class, cause := portable.Split(s.err(false, firstErr))
	return failed, store.Wrap(op, batch[0].Key, class,
		fmt.Errorf("versions not deleted; the first failed, %s: %w", versions.Describe(first.Key, first.ID), cause))
}

// cmpErr is err, or a stand-in for a result missing without one.
func cmpErr(err error) error {
	if err != nil {
		return err
	}
	return errors.New("the server did not answer for every version")
}
