package storetest

import (
	"net/http"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/httptimeout"
)

// Transport returns a clone of http.DefaultTransport with the limits of t
// applied as the network drivers apply them to their default transports
// (zero fields are the defaults), for a test that passes a driver its own
// transport, wrapped, and wants the driver's timeouts underneath.
func Transport(t store.Timeouts) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	httptimeout.Apply(tr, t)
	return tr
}
