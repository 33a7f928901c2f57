package commit

// MarkContended sets d as a Dataset whose commits have met contention, as
// a commit that rebased would: its next commit with rebase takes part in a
// group-commit round from its first compare-and-swap.
func MarkContended(d *Dataset) { d.contended.Store(true) }
