package s3

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

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
		out, err := s.client.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: &s.bucket})
		if err != nil {
			class, cause := portable.Split(s.err(false, err))
			return false, store.Wrap("get-bucket-versioning", s.bucket, class, versions.CannotTell(cause))
		}
		return out.Status != "", nil
	})
}

// sawVersionID records the version id a write was answered with.
func (s *bucket) sawVersionID(id *string) { s.ver.SawVersionID(aws.ToString(id)) }

// VersionedDelete implements portable.Versions (see store.Versioner).
func (s *bucket) VersionedDelete(ctx context.Context, op string, keys []string, ifMatch string, plain func() error) error {
	return s.ver.Delete(ctx, s, op, keys, ifMatch, plain)
}

// ListVersions lists the versions and delete markers under prefix, in key
// order. A truncated page whose markers do not advance fails with
// store.ErrListingStuck.
func (s *bucket) ListVersions(ctx context.Context, prefix string, counts *store.Counts) iter.Seq2[versions.Version, error] {
	return func(yield func(versions.Version, error) bool) {
		in := &awss3.ListObjectVersionsInput{Bucket: &s.bucket, Prefix: optString(prefix)}
		for {
			counts[store.OpList]++
			out, err := s.client.ListObjectVersions(ctx, in)
			if err != nil {
				yield(versions.Version{}, s.err(false, err))
				return
			}
			var page []versions.Version
			for _, v := range out.Versions {
				page = append(page, versions.Version{
					Key: aws.ToString(v.Key), ID: aws.ToString(v.VersionId), Latest: aws.ToBool(v.IsLatest),
					Size: sizeOf(v.Size), ETag: trimETag(v.ETag),
				})
			}
			for _, m := range out.DeleteMarkers {
				page = append(page, versions.Version{
					Key: aws.ToString(m.Key), ID: aws.ToString(m.VersionId), Latest: aws.ToBool(m.IsLatest), Marker: true,
				})
			}
			// The SDK returns versions and markers apart; in key order again.
			slices.SortStableFunc(page, func(a, b versions.Version) int { return cmp.Compare(a.Key, b.Key) })
			for _, v := range page {
				if !yield(v, nil) {
					return
				}
			}
			if !aws.ToBool(out.IsTruncated) {
				return
			}
			next, nextID := aws.ToString(out.NextKeyMarker), aws.ToString(out.NextVersionIdMarker)
			if next == "" || (next == aws.ToString(in.KeyMarker) && nextID == aws.ToString(in.VersionIdMarker)) {
				yield(versions.Version{}, fmt.Errorf("%w: a truncated page of versions under %q at key marker %q ends with key marker %q, version marker %q",
					store.ErrListingStuck, prefix, aws.ToString(in.KeyMarker), next, nextID))
				return
			}
			in.KeyMarker, in.VersionIdMarker = &next, optString(nextID)
		}
	}
}

// DeleteVersions deletes the versions with one DeleteObjects request. It
// returns the versions that are not deleted, and an error naming them.
// A version that is already gone is not an error.
func (s *bucket) DeleteVersions(ctx context.Context, op string, batch []versions.Version, counts *store.Counts) (map[[2]string]bool, error) {
	ids := make([]types.ObjectIdentifier, len(batch))
	for i, v := range batch {
		ids[i] = types.ObjectIdentifier{Key: aws.String(v.Key), VersionId: optString(v.ID)}
	}
	counts[store.OpDeleteMany]++
	out, err := s.client.DeleteObjects(ctx, &awss3.DeleteObjectsInput{
		Bucket: &s.bucket,
		Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
	})
	failed := map[[2]string]bool{}
	if err != nil {
		for _, v := range batch {
			failed[[2]string{v.Key, v.ID}] = true
		}
		class, cause := portable.Split(s.err(false, err))
		return failed, store.Wrap(op, batch[0].Key, class, fmt.Errorf("%d versions not deleted, from %s: %w", len(batch), versions.Describe(batch[0].Key, batch[0].ID), cause))
	}
	var firstClass error
	var first string
	for _, e := range out.Errors {
		code := aws.ToString(e.Code)
		class := store.ClassOfS3(code, 0, false)
		if class == store.ErrNotExist || code == "NoSuchVersion" {
			failed[[2]string{aws.ToString(e.Key), aws.ToString(e.VersionId)}] = true // gone, but not freed here
			continue
		}
		if first == "" {
			firstClass = class
			first = fmt.Sprintf("%s: %s: %s", versions.Describe(aws.ToString(e.Key), aws.ToString(e.VersionId)), code, aws.ToString(e.Message))
		}
		failed[[2]string{aws.ToString(e.Key), aws.ToString(e.VersionId)}] = true
	}
	if first != "" {
		return failed, store.Wrap(op, batch[0].Key, firstClass, errors.New("versions not deleted; the first failed with "+first))
	}
	return failed, nil
}
