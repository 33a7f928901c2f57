package commit

import (
	"context"
	"testing"
	"time"

	"github.com/commitptr/commitptr/commit/internal/group"
)

// The tests of rounds hold them on every value whose commit met another
// writer (rebased once, or carried one), which one held request sets up;
// SetOpenness gives a test the rule of its choice.
func init() { openness = group.Openness{Rebased: 1, Carried: 1} }

// DefaultOpenness is the rule a Dataset opens values to rounds by.
var DefaultOpenness = defaultOpenness

// SetOpenness opens to rounds, until t ends, the values whose commit
// rebased at least rebased times or carried at least carried writers.
func SetOpenness(t testing.TB, rebased, carried int) {
	old := openness
	openness = group.Openness{Rebased: rebased, Carried: carried}
	t.Cleanup(func() { openness = old })
}

// MarkGrouped sets d as a Dataset whose last commit was in a round: its
// next commit with rebase on an open base joins a round from its first
// compare-and-swap.
func MarkGrouped(d *Dataset) { d.grouped.Store(true) }

// ForgetHeldManifest makes d hold no manifest, as when another Tx of d
// wrote or read one since: its next writer read of any manifest asks the
// store.
func ForgetHeldManifest(d *Dataset) { d.last.put("", "", nil) }

// SetRoundClock makes d's group-commit rounds measure and wait on c.
func SetRoundClock(d *Dataset, c interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}) {
	d.clock = c
}
