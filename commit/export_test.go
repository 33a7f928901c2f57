package commit

import (
	"context"
	"time"
)

// MarkGrouped sets d as a Dataset whose last commit was in a round: its
// next commit with rebase on an open base joins a round from its first
// compare-and-swap.
func MarkGrouped(d *Dataset) { d.grouped.Store(true) }

// SetRoundClock makes d's group-commit rounds measure and wait on c.
func SetRoundClock(d *Dataset, c interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}) {
	d.clock = c
}
