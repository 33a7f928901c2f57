package gc

import (
	"context"

	"github.com/commitptr/commitptr/store"
)

// deleteKeys deletes keys with DeleteMany and returns the bytes that freed.
// listed is the size of the objects as the plan listed them, which is what
// a delete frees on a store that keeps no versions. On a bucket that keeps
// versions it is the size of the versions the driver deleted, and nothing
// when its deletes only added delete markers (versioning=off declared);
// f says what the driver deleted, for Report.Versions. f counts what was
// deleted also when err is not nil.
func (r *runner) deleteKeys(ctx context.Context, keys []string, listed int64) (freed int64, f store.Freed, err error) {
	dctx, tr := store.TrackFreed(ctx)
	err = r.s.DeleteMany(dctx, keys)
	f = tr.Freed()
	freed = listed
	if f.Versioned {
		freed = f.Bytes
	}
	return freed, f, err
}
