// Package versions plans the deletes of every version of a set of keys on
// an S3 bucket that keeps versions, for the s3 and minio drivers: which
// listing to read, which of its entries belong to the keys, and in which
// order to delete them (see store.Versioner).
package versions

import (
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/commitptr/commitptr/store"
)

// Version is one entry of a listing of versions: an object version or a
// delete marker.
type Version struct {
	Key    string
	ID     string
	Latest bool
	Marker bool
	Size   int64
	ETag   string
}

// Plan is what to delete, in order: Older first, then Latest. Deleting
// the latest version of a key last means that no older version becomes
// current on the way, and a reader sees the key as it was until it is gone.
type Plan struct {
	Older  []Version
	Latest []Version
}

// Keys returns the sorted, unique keys and the prefix to list them under:
// their longest common prefix.
func Keys(keys []string) ([]string, string) {
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	if len(sorted) == 0 {
		return nil, ""
	}
	first, last := sorted[0], sorted[len(sorted)-1]
	n := 0
	for n < len(first) && n < len(last) && first[n] == last[n] {
		n++
	}
	return sorted, first[:n]
}

// Collect reads the listing of versions under the prefix that Keys
// returned for sorted, in key order, and keeps the entries of those keys:
// a listing under a common prefix shows other keys too, and those are
// never touched. It stops after the last key.
//
// An entry listed right after itself is skipped once: versitygw starts
// the next page at the version its markers name, which the page before
// ended with. Any other entry listed twice means the listing went back on
// itself, and Collect fails with store.ErrListingStuck rather than read
// it again.
func Collect(sorted []string, list iter.Seq2[Version, error]) (Plan, error) {
	var p Plan
	if len(sorted) == 0 {
		return p, nil
	}
	want := make(map[string]bool, len(sorted))
	for _, k := range sorted {
		want[k] = true
	}
	last := sorted[len(sorted)-1]
	type id struct{ key, version string }
	seen := map[id]bool{}
	var prev id
	repeated := false
	for v, err := range list {
		if err != nil {
			return p, err
		}
		if v.Key > last {
			break
		}
		k := id{v.Key, v.ID}
		if k == prev && !repeated {
			repeated = true
			continue
		}
		if seen[k] || v.Key < prev.key {
			return p, fmt.Errorf("%w: %s listed again after %s", store.ErrListingStuck, Describe(v.Key, v.ID), Describe(prev.key, prev.version))
		}
		seen[k], prev, repeated = true, k, false
		if !want[v.Key] {
			continue
		}
		if v.Latest {
			p.Latest = append(p.Latest, v)
		} else {
			p.Older = append(p.Older, v)
		}
	}
	return p, nil
}

// Current returns the latest entry of key in p, and whether there is one.
func (p Plan) Current(key string) (Version, bool) {
	for _, v := range p.Latest {
		if v.Key == key {
			return v, true
		}
	}
	return Version{}, false
}

// Batches splits vs into runs of at most store.MaxDeleteBatch.
func Batches(vs []Version) [][]Version {
	var out [][]Version
	for len(vs) > 0 {
		n := min(len(vs), store.MaxDeleteBatch)
		out = append(out, vs[:n])
		vs = vs[n:]
	}
	return out
}

// Tally returns what deleting vs freed: versions, markers and bytes, less
// the entries failed names (by Key and ID).
func Tally(vs []Version, failed map[[2]string]bool) store.Freed {
	f := store.Freed{Versioned: true}
	for _, v := range vs {
		if failed[[2]string{v.Key, v.ID}] {
			continue
		}
		if v.Marker {
			f.Markers++
		} else {
			f.Versions++
			f.Bytes += max(v.Size, 0)
		}
	}
	return f
}

// Describe names a version for an error message.
func Describe(key, id string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q", key)
	if id != "" {
		fmt.Fprintf(&b, " version %q", id)
	}
	return b.String()
}
