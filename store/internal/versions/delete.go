package versions

import (
	"context"
	"fmt"
	"iter"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/portable"
)

// Client is what an S3 driver sends to delete every version of keys. Its
// errors are classified as a portable.Driver's are.
type Client interface {
	store.Versioner
	// ListVersions lists the versions and delete markers under prefix, in
	// key order, and counts its requests in counts.
	ListVersions(ctx context.Context, prefix string, counts *store.Counts) iter.Seq2[Version, error]
	// DeleteVersions deletes batch, at most store.MaxDeleteBatch versions,
	// with one request counted in counts. It returns the versions not
	// deleted, an already gone one included, and an error naming the key
	// of batch's first (a *store.OpError) if any failed otherwise.
	DeleteVersions(ctx context.Context, op string, batch []Version, counts *store.Counts) (failed map[[2]string]bool, err error)
}

// Delete is a portable.Versions' VersionedDelete of keys for op: on a bucket that
// keeps versions it deletes every version of keys that a listing shows,
// older versions before the latest, and adds what it freed to the tracker
// in ctx; with ifMatch (one key), it deletes nothing unless the latest
// version is an object with that ETag. On another bucket it runs plain.
func (v *State) Delete(ctx context.Context, c Client, op string, keys []string, ifMatch string, plain func() error) error {
	return v.dispatch(ctx, c, op, keys[0], func() error { return deleteVersions(ctx, c, op, keys, ifMatch) }, plain)
}

func deleteVersions(ctx context.Context, c Client, op string, keys []string, ifMatch string) error {
	sorted, prefix := Keys(keys)
	if len(sorted) == 0 {
		return nil
	}
	var freed store.Freed
	defer func() { store.AddFreed(ctx, freed) }()
	freed.Versioned = true
	plan, err := Collect(sorted, c.ListVersions(ctx, prefix, &freed.Requests))
	if err != nil {
		return portable.Wrap(op, sorted[0], err)
	}
	if ifMatch != "" {
		cur, ok := plan.Current(sorted[0])
		if !ok || cur.Marker {
			return nil // already gone
		}
		if cur.ETag != ifMatch {
			return store.Wrap(op, sorted[0], store.ErrPrecondition, fmt.Errorf("the current version has ETag %q, not %q", cur.ETag, ifMatch))
		}
	}
	for _, wave := range [][]Version{plan.Older, plan.Latest} {
		for _, batch := range Batches(wave) {
			failed, err := c.DeleteVersions(ctx, op, batch, &freed.Requests)
			f := Tally(batch, failed)
			freed.Versions += f.Versions
			freed.Markers += f.Markers
			freed.Bytes += f.Bytes
			if err != nil {
				// The latest versions stay when an older one could not
				// be deleted: the key stays as it was.
				return err
			}
		}
	}
	return nil
}
