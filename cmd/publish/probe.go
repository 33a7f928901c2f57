package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/commitptr/commitptr/store"
)

// probeStore runs store.Probe on the store of rawURL, trying again after
// errors other than a proven lack of enforcement: the probe's scratch
// writes can meet transient failures (S3-compatible servers on a file
// system can briefly refuse a create while a concurrent delete removes its
// directory). A store that passed, but where the probe could not delete its
// scratch object, passes: stderr says what is left.
func probeStore(ctx context.Context, s store.Store, rawURL string, stderr io.Writer) error {
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
		var left *store.ProbeLeftover
		if errors.As(err, &left) {
			fmt.Fprintf(stderr, "publish: left the probe's scratch object %s of %s: deleting it failed: %s\n"+
				"publish: nothing reads it, and 'publish gc' does not delete it: delete it yourself\n",
				left.Key, redact(rawURL), tidyMessage(left.Err.Error(), 0))
			return nil
		}
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
