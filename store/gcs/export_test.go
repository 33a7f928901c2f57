package gcs

import "time"

// SetMaxBackoff caps the wait between attempts at d until the returned
// function restores it.
func SetMaxBackoff(d time.Duration) (restore func()) {
	old := maxBackoff
	maxBackoff = d
	return func() { maxBackoff = old }
}

// RetryDecider is retryDecider, for the tests.
var RetryDecider = retryDecider
