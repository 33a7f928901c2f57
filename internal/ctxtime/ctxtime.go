// Package ctxtime holds the one context-aware sleep that retry loops share.
package ctxtime

import (
	"context"
	"time"
)

// Sleep waits for d or until ctx is done, and returns ctx's error if it is.
// A d of zero or less only checks ctx.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
