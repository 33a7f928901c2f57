package azblob

import "time"

// SetRetryDelays sets the first and the longest wait between attempts of
// the stores opened until the returned function restores them.
func SetRetryDelays(first, most time.Duration) (restore func()) {
	f, m := retryDelay, maxRetryDelay
	retryDelay, maxRetryDelay = first, most
	return func() { retryDelay, maxRetryDelay = f, m }
}
