package httptimeout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
)

// Unanswered is the cause of a failed request that the service did not
// answer: a timeout (Error) as it is, since it names the endpoint and the
// limit; a failure to connect or to resolve the name, not the caller's
// cancellation, naming the service and its endpoint; anything else as it
// is.
func Unanswered(err error, service, endpoint string) error {
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	if unreachable(err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("cannot reach %s endpoint %s: %w", service, endpoint, err)
	}
	return err
}

// unreachable reports whether err is a failure to connect to the server or
// to resolve its name.
func unreachable(err error) bool {
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true
	}
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return true
	}
	_, ok := errors.AsType[*url.Error](err)
	return ok
}
