package main

// putResult is what put reports.
type putResult struct {
	Seq        uint64 `json:"seq"`
	Generation string `json:"generation"`
	Parent     string `json:"parent,omitempty"`
	Files      int    `json:"files"`
	Reused     int    `json:"reused"`
	Resumed    int    `json:"resumed,omitempty"`  // referenced from what an interrupted put staged
	Repaired   int    `json:"repaired,omitempty"` // matched, but uploaded again: the stored object was unusable
	Bytes      int64  `json:"bytes"`
	Fence      uint64 `json:"fence,omitempty"`
	FenceLease string `json:"fence_lease,omitempty"`
	// Into is --into's prefix; Kept the files outside it carried from the
	// current generation; Rebased how often the commit was built again on
	// top of another writer's; Carried that another writer's commit
	// applied this one's changes with its own (group commit): Generation
	// is then that commit's.
	Into    string `json:"into,omitempty"`
	Kept    int    `json:"kept,omitempty"`
	Rebased int    `json:"rebased,omitempty"`
	Carried bool   `json:"carried,omitempty"`
	// Unchanged: SRC was exactly the current generation, and nothing was
	// committed; Seq and Generation name the current one.
	Unchanged bool `json:"unchanged,omitempty"`
	// DryRun: put --dry-run; nothing was written, Seq and Generation name
	// the current commit (none for a dataset without commits), and the
	// summary counts what a put would upload, reuse and remove.
	DryRun bool `json:"dry_run,omitempty"`
	// Summary is the final line's numbers.
	Summary *summary `json:"summary,omitempty"`
}
