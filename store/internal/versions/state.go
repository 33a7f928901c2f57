package versions

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/commitptr/commitptr/store"
)

// State remembers whether a bucket keeps versions, for one Store of the
// s3 or minio driver. The lock is a channel so that a caller whose context
// ends stops waiting for another's question.
type State struct {
	lock     chan struct{}
	state    store.Versioning // VersioningAuto until known
	declared bool             // state was given in the Store's options
	// keeps is set when a write was answered with a version id: the
	// bucket keeps versions, whatever was declared.
	keeps atomic.Bool
}

// NewState starts with what the options declared (VersioningAuto: ask).
func NewState(declared store.Versioning) *State {
	return &State{lock: make(chan struct{}, 1), state: declared, declared: declared != store.VersioningAuto}
}

// Get returns whether the bucket keeps versions. Unless it was declared or
// is known already, it asks with ask, which reports whether versioning was
// ever enabled on the bucket (a suspended bucket keeps versions too); a
// failed question is asked again next time. ask's error is returned as it
// is, wrapped by the driver.
func (v *State) Get(ctx context.Context, bucket string, ask func(context.Context) (bool, error)) (store.Versioning, error) {
	select {
	case v.lock <- struct{}{}:
	case <-ctx.Done():
		return store.VersioningAuto, store.Wrap("get-bucket-versioning", bucket, nil, ctx.Err())
	}
	defer func() { <-v.lock }()
	if v.state != store.VersioningAuto {
		return v.state, nil
	}
	enabled, err := ask(ctx)
	if err != nil {
		return store.VersioningAuto, err
	}
	v.state = store.VersioningOff
	if enabled {
		v.state = store.VersioningOn
	}
	return v.state, nil
}

// CannotTell is the cause a driver wraps when GetBucketVersioning fails.
func CannotTell(cause error) error {
	return fmt.Errorf("cannot tell whether the bucket keeps versions (grant s3:GetBucketVersioning, or declare it with versioning=on or versioning=off in the URL): %w", cause)
}

// SawVersionID records that a write was answered with the version id id:
// the bucket keeps versions. "null" is the id of a write to a bucket whose
// versioning is suspended, or to one without versioning on some servers,
// so it proves nothing. An answer the bucket gave before (versioning
// enabled since) gives way; a declared one stays, and the plain deletes
// it makes report that they freed nothing (Delete).
func (v *State) SawVersionID(id string) {
	if id == "" || id == "null" {
		return
	}
	v.keeps.Store(true)
	select {
	case v.lock <- struct{}{}:
		if !v.declared {
			v.state = store.VersioningOn
		}
		<-v.lock
	default: // someone is asking the bucket; the answer will be the same
	}
}

// dispatch runs a driver's delete of key (the first of several) for op: on a
// bucket that keeps versions everyVersion, which removes every version of
// the keys, and on another plain. A plain delete on a bucket that keeps
// versions though it was declared not to only adds delete markers, and
// dispatch tells the tracker in ctx that it freed nothing.
func (v *State) dispatch(ctx context.Context, s store.Versioner, op, key string, everyVersion, plain func() error) error {
	switch keeps, err := s.Versioning(ctx); {
	case err != nil:
		return store.Wrap(op, key, nil, err)
	case keeps == store.VersioningOn:
		return everyVersion()
	}
	if err := plain(); err != nil {
		return err
	}
	if v.keeps.Load() {
		store.AddFreed(ctx, store.Freed{Versioned: true})
	}
	return nil
}
