package store

import (
	"context"
	"errors"
	"time"
)

// LeftoverSweeper is implemented by drivers whose interrupted writes leave
// pieces behind that List never shows: the fs driver's temp files, and the
// incomplete multipart uploads of the S3 drivers, left by a process killed
// in the middle of a Put. Nothing else removes them, so a collector asks
// the driver to.
type LeftoverSweeper interface {
	// SweepLeftovers removes the leftovers of writes to keys under prefix
	// that were last touched (or, for S3 multipart uploads, started) more
	// than olderThan ago by the store's clock. A write still in progress
	// within that age is never touched. A driver that cannot tell which
	// key a piece was for says what a prefix covers (fs: a directory).
	SweepLeftovers(ctx context.Context, prefix string, olderThan time.Duration) (Leftovers, error)
}

// Leftovers counts what SweepLeftovers removed, and the requests it took
// (listings by page as OpList, removals as OpDelete).
type Leftovers struct {
	Count    int    `json:"count"`
	Bytes    int64  `json:"bytes"`
	Requests Counts `json:"requests"`
}

// SweepLeftovers finds the driver under s, through WithPrefix and other
// wrappers that have an Unwrap() Store method, and sweeps its leftovers
// under prefix, which is relative to s. A wrapper with Unwrap must pass
// keys through unchanged; WithPrefix is the one that does not, and is
// accounted for. If the driver leaves none of its
// own, the error matches errors.ErrUnsupported.
func SweepLeftovers(ctx context.Context, s Store, prefix string, olderThan time.Duration) (Leftovers, error) {
	for {
		switch x := s.(type) {
		case LeftoverSweeper:
			return x.SweepLeftovers(ctx, prefix, olderThan)
		case *prefixed:
			s, prefix = x.s, x.p+prefix
		case interface{ Unwrap() Store }:
			s = x.Unwrap()
		default:
			return Leftovers{}, errors.ErrUnsupported
		}
	}
}
