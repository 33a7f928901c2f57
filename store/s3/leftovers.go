package s3

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

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
	// No Prefix in the listing: MinIO takes it for an exact key and would
	// list none of the dataset's uploads. The sweep filters by prefix
	// itself, at the cost of listing every incomplete upload of the bucket.
	in := &awss3.ListMultipartUploadsInput{Bucket: aws.String(s.bucket)}
	for {
		out, err := s.client.ListMultipartUploads(ctx, in)
		got.Requests[store.OpList]++
		if noSuchUpload(err) {
			return got, nil // some servers (gofakes3) say so of a bucket without uploads
		}
		if err != nil {
			return got, portable.Wrap(op, prefix, s.err(false, err))
		}
		now := serverTime(out.ResultMetadata)
		if err := store.CheckServerTime(now, store.OpList, prefix, "the age of incomplete uploads"); err != nil {
			return got, err
		}
		cutoff := now.Add(-olderThan)
		for _, u := range out.Uploads {
			key := aws.ToString(u.Key)
			if !strings.HasPrefix(key, prefix) || u.Initiated == nil || !u.Initiated.Before(cutoff) {
				continue
			}
			size, err := s.uploadedBytes(ctx, key, u.UploadId, &got.Requests)
			if err == nil {
				got.Requests[store.OpDelete]++
				_, err = s.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{
					Bucket: aws.String(s.bucket), Key: u.Key, UploadId: u.UploadId,
				})
			}
			switch {
			case noSuchUpload(err):
				continue
			case err != nil:
				return got, portable.Wrap(op, key, s.err(false, err))
			}
			got.Count++
			got.Bytes += size
		}
		if !aws.ToBool(out.IsTruncated) {
			return got, nil
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}

// uploadedBytes sums the sizes of the parts of an incomplete upload.
func (s *bucket) uploadedBytes(ctx context.Context, key string, id *string, counts *store.Counts) (int64, error) {
	var n int64
	p := awss3.NewListPartsPaginator(s.client, &awss3.ListPartsInput{Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: id})
	for p.HasMorePages() {
		counts[store.OpList]++
		out, err := p.NextPage(ctx)
		if err != nil {
			return n, err
		}
		for _, part := range out.Parts {
			n += aws.ToInt64(part.Size)
		}
	}
	return n, nil
}

// noSuchUpload reports whether err says the multipart upload is gone.
func noSuchUpload(err error) bool {
	ae, ok := errors.AsType[smithy.APIError](err)
	return ok && ae.ErrorCode() == "NoSuchUpload"
}
