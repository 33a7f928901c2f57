package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/commitptr/commitptr/store"
)

// probeStore runs store.Probe, trying again after errors other than a
// proven lack of enforcement: the probe's scratch writes can meet transient
// failures (S3-compatible servers on a file system can briefly refuse a
// create while a concurrent delete removes its directory).
func probeStore(ctx context.Context, s store.Store) error {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return err
			case <-time.After(time.Duration(50*attempt) * time.Millisecond):
			}
		}
		err = store.Probe(ctx, s)
		if err == nil || errors.Is(err, store.ErrNotEnforced) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// probeError explains a failed probe.
func probeError(rawURL string, err error) error {
	if errors.Is(err, store.ErrNotEnforced) {
		return fmt.Errorf("store %s does not enforce conditional writes, so commits could silently overwrite each other; refusing to write (see docs/OPERATIONS.md): %w", redact(rawURL), err)
	}
	return fmt.Errorf("probe %s: %w", redact(rawURL), err)
}
