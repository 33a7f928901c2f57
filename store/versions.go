package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Versioning is whether a bucket keeps the versions of its objects.
type Versioning int

// The versioning states. On an S3 bucket that keeps versions (versioning
// enabled, or suspended after it was enabled), an ordinary delete only
// adds a delete marker and frees nothing; the S3 drivers then delete every
// version of the key instead (see VersionedDeletes).
const (
	// VersioningAuto asks the store; it is the zero value of a setting.
	VersioningAuto Versioning = iota
	// VersioningOff: the bucket keeps no versions; a delete frees the object.
	VersioningOff
	// VersioningOn: the bucket keeps versions (enabled or suspended).
	VersioningOn
)

func (v Versioning) String() string {
	switch v {
	case VersioningOff:
		return "off"
	case VersioningOn:
		return "on"
	}
	return "auto"
}

// ParseVersioning reads "auto", "on" or "off", and "" as auto.
func ParseVersioning(s string) (Versioning, error) {
	switch s {
	case "", "auto":
		return VersioningAuto, nil
	case "on":
		return VersioningOn, nil
	case "off":
		return VersioningOff, nil
	}
	return VersioningAuto, fmt.Errorf("store: versioning=%q: want auto, on or off", s)
}

// Versioner is implemented by drivers whose buckets may keep versions (the
// S3 drivers).
//
// On a bucket that keeps versions, their Delete and DeleteMany remove every
// version of each key, delete markers included, that a listing of its
// versions showed: older versions first and the latest last, so that no
// older version becomes current on the way; and only versions listed, so
// that a version written after the listing survives. commitptr deletes only
// keys it no longer needs (generation objects, expired pins and tags, old
// lease epochs), never the pointer or a lease object, so this frees what a
// delete frees on a bucket without versions. With DeleteOptions.IfMatch,
// Delete removes the versions only if the latest one has that ETag.
type Versioner interface {
	// Versioning reports whether the bucket keeps versions. The driver
	// asks the store at most once (a failed question is asked again) and
	// remembers the answer, unless it was declared when it was opened.
	Versioning(ctx context.Context) (Versioning, error)
}

// BucketVersioning asks the driver below s, through WithPrefix and other
// wrappers with an Unwrap() Store method, whether its bucket keeps
// versions. Drivers that are not Versioners (mem, fs) keep none.
func BucketVersioning(ctx context.Context, s Store) (Versioning, error) {
	for {
		switch x := s.(type) {
		case Versioner:
			return x.Versioning(ctx)
		case interface{ Unwrap() Store }:
			s = x.Unwrap()
		default:
			return VersioningOff, nil
		}
	}
}

// Freed is what deletes on a bucket that keeps versions removed. A Freed
// travels in the context (TrackFreed), through every wrapper, to the
// driver, which adds to it.
type Freed struct {
	// Versioned is true when a driver deleted versions: the bucket keeps
	// them. When it is false, deleting a key freed its current object,
	// whose size the caller knows from its listing.
	Versioned bool `json:"versioned"`
	// Versions and Markers count the object versions and the delete
	// markers deleted; Bytes is the size of the versions.
	Versions int   `json:"versions"`
	Markers  int   `json:"delete_markers"`
	Bytes    int64 `json:"bytes"`
	// Requests counts the requests of the version deletes: the listings
	// of versions (list) and their deletes (delete-many). A Counter
	// counts each DeleteMany once per batch whatever it takes.
	Requests Counts `json:"requests"`
}

// FreedTracker collects what the version deletes of one caller freed. It is
// safe for concurrent use.
type FreedTracker struct {
	mu sync.Mutex
	f  Freed
}

type freedKey struct{}

// TrackFreed returns a context whose version deletes add to the returned
// tracker.
func TrackFreed(ctx context.Context) (context.Context, *FreedTracker) {
	t := &FreedTracker{}
	return context.WithValue(ctx, freedKey{}, t), t
}

// Freed returns what was freed so far.
func (t *FreedTracker) Freed() Freed {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.f
}

// AddFreed adds f to the tracker of ctx, if it has one. Drivers call it for
// every version delete request.
func AddFreed(ctx context.Context, f Freed) {
	t, _ := ctx.Value(freedKey{}).(*FreedTracker)
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.f.Add(f)
}

// ErrListingStuck is matched by the error of a listing of versions whose
// next page would start where the last one did: a server that says a
// listing is truncated without a marker that advances. The drivers stop
// rather than list the same page forever.
var ErrListingStuck = errors.New("store: the listing of versions does not advance")

// Add adds g to f.
func (f *Freed) Add(g Freed) {
	f.Versioned = f.Versioned || g.Versioned
	f.Versions += g.Versions
	f.Markers += g.Markers
	f.Bytes += g.Bytes
	for op, n := range g.Requests {
		f.Requests[op] += n
	}
}
