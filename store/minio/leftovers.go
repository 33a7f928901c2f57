package minio

import (
	"context"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/portable"
)

// SweepLeftovers implements store.LeftoverSweeper: it aborts the
// incomplete multipart uploads to keys under prefix that were initiated
// more than olderThan ago by the store's clock (the Date of the listing).
// A writer killed in the middle of a large Put leaves one; S3 keeps, and
// bills, its parts until it is aborted, and no listing of objects shows
// it. Bytes counts the parts uploaded. An upload that completes or is
// aborted meanwhile is skipped. A listing answered with NoSuchUpload
// means there are none.
func (s *Store) SweepLeftovers(ctx context.Context, prefix string, olderThan time.Duration) (store.Leftovers, error) {
	return s.b.sweepLeftovers(ctx, prefix, olderThan)
}

func (s *bucket) sweepLeftovers(ctx context.Context, prefix string, olderThan time.Duration) (store.Leftovers, error) {
	const op = "sweep-leftovers"
	var got store.Leftovers
	var keyMarker, idMarker string
	for {
		lctx, x := withExchange(ctx, "", nil)
		// No prefix in the listing: MinIO takes it for an exact key and
		// would list none of the dataset's uploads. The sweep filters by
		// prefix itself, at the cost of listing every incomplete upload of
		// the bucket.
		out, err := s.core.ListMultipartUploads(lctx, s.bucket, "", keyMarker, idMarker, "", store.MaxListPage)
		got.Requests[store.OpList]++
		if noSuchUpload(err) {
			return got, nil // some servers (gofakes3) say so of a bucket without uploads
		}
		if err != nil {
			return got, portable.Wrap(op, prefix, s.err(false, err))
		}
		now := x.serverTime()
		if err := store.CheckServerTime(now, store.OpList, prefix, "the age of incomplete uploads"); err != nil {
			return got, err
		}
		cutoff := now.Add(-olderThan)
		for _, u := range out.Uploads {
			if !strings.HasPrefix(u.Key, prefix) || !u.Initiated.Before(cutoff) {
				continue
			}
			size, err := s.uploadedBytes(ctx, u.Key, u.UploadID, &got.Requests)
			if err == nil {
				got.Requests[store.OpDelete]++
				err = s.core.AbortMultipartUpload(ctx, s.bucket, u.Key, u.UploadID)
			}
			switch {
			case noSuchUpload(err):
				continue
			case err != nil:
				return got, portable.Wrap(op, u.Key, s.err(false, err))
			}
			got.Count++
			got.Bytes += size
		}
		if !out.IsTruncated {
			return got, nil
		}
		keyMarker, idMarker = out.NextKeyMarker, out.NextUploadIDMarker
	}
}

// uploadedBytes sums the sizes of the parts of an incomplete upload.
func (s *bucket) uploadedBytes(ctx context.Context, key, id string, counts *store.Counts) (int64, error) {
	var n int64
	marker := 0
	for {
		counts[store.OpList]++
		out, err := s.core.ListObjectParts(ctx, s.bucket, key, id, marker, 0)
		if err != nil {
			return n, err
		}
		for _, p := range out.ObjectParts {
			n += p.Size
		}
		if !out.IsTruncated {
			return n, nil
		}
		marker = out.NextPartNumberMarker
	}
}

// noSuchUpload reports whether err says the multipart upload is gone.
func noSuchUpload(err error) bool {
	return err != nil && minio.ToErrorResponse(err).Code == "NoSuchUpload"
}
