package store

import "context"

type urgentKey struct{}

// Urgent returns a context whose requests a network store sends at once,
// outside its window of requests in flight (Config.Transfers). A pointer's
// or a lease's reads and writes, and a pin's renewal, are few and bound by
// time; they must not wait behind the queue of a large upload.
func Urgent(ctx context.Context) context.Context {
	return context.WithValue(ctx, urgentKey{}, true)
}

// IsUrgent reports whether ctx, or a context it derives from, came from
// Urgent.
func IsUrgent(ctx context.Context) bool {
	v, _ := ctx.Value(urgentKey{}).(bool)
	return v
}
