package commit

// MarkGrouped sets d as a Dataset whose last commit was in a round: its
// next commit with rebase on an open base joins a round from its first
// compare-and-swap.
func MarkGrouped(d *Dataset) { d.grouped.Store(true) }
