// Package remote opens the drivers that speak to a server (s3, minio, gcs
// and azblob) on a fresh bucket of the shared test servers, with their HTTP
// requests sent through a faults.Injector: the SDKs' own retries stay on,
// so a test sees what a program sees when a response is held, lost or
// refused on the wire. A test that needs a server fails if it cannot run.
package remote

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/azblob"
	"github.com/commitptr/commitptr/store/gcs"
	"github.com/commitptr/commitptr/store/minio"
	"github.com/commitptr/commitptr/store/s3"
	"github.com/commitptr/commitptr/store/storetest"
)

// Drivers are the drivers of the three protocols, one each.
var Drivers = []string{"s3", "gcs", "azblob"}

// Protocol returns the HTTP API of a driver.
func Protocol(driver string) faults.Protocol {
	switch driver {
	case "gcs":
		return faults.GCS
	case "azblob":
		return faults.Azure
	}
	return faults.S3
}

// Pair is a driver open twice on one fresh bucket: Faulty sends its
// requests through the injector, Clean does not, for the checks of a test
// and for the other writers of a race.
type Pair struct {
	Faulty, Clean store.Store
}

// Open opens driver (s3, minio, gcs or azblob) on a fresh bucket of its
// shared test server, once through in and once without it.
func Open(t testing.TB, driver string, in *faults.Injector) Pair {
	t.Helper()
	return OpenWith(t, driver, func(base http.RoundTripper) http.RoundTripper {
		return in.TransportFor(Protocol(driver), base)
	})
}

// OpenWith is Open with the faulty store's transport made by wrap from the
// clean one's.
func OpenWith(t testing.TB, driver string, wrap func(base http.RoundTripper) http.RoundTripper) Pair {
	t.Helper()
	base := baseTransport(driver)
	t.Cleanup(base.CloseIdleConnections)
	bucket := newBucket(t, driver)
	return Pair{
		Faulty: open(t, driver, bucket, wrap(base)),
		Clean:  open(t, driver, bucket, base),
	}
}

// azuriteTimeout bounds Azurite's response headers and idle connections:
// one Node process on a loaded machine can be silent for over 30 s.
const azuriteTimeout = 2 * time.Minute

// baseTransport returns the transport under the injector, set up as the
// driver's own default one is.
func baseTransport(driver string) *http.Transport {
	t := store.Timeouts{}
	if driver == "azblob" {
		t = store.Timeouts{Header: azuriteTimeout, Idle: azuriteTimeout}
	}
	tr := storetest.Transport(t)
	tr.MaxIdleConns = 256
	tr.MaxIdleConnsPerHost = 64
	if driver == "azblob" {
		tr.DisableCompression = true // bodies come back as stored
	}
	return tr
}

func newBucket(t testing.TB, driver string) string {
	t.Helper()
	switch driver {
	case "s3", "minio":
		srv := testenv.S3(t)
		srv.UseCredentials()
		return srv.NewBucket(t)
	case "gcs":
		return testenv.GCS(t).NewBucket(t)
	case "azblob":
		return testenv.Azurite(t).NewContainer(t)
	}
	t.Fatalf("remote: unknown driver %q", driver)
	return ""
}

func open(t testing.TB, driver, bucket string, rt http.RoundTripper) store.Store {
	t.Helper()
	ctx := context.Background()
	var s store.Store
	var err error
	switch driver {
	case "s3":
		srv := testenv.S3(t)
		s, err = s3.New(ctx, s3.Options{Bucket: bucket, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
			HTTPClient: &http.Client{Transport: rt}})
	case "minio":
		srv := testenv.S3(t)
		s, err = minio.New(ctx, minio.Options{Bucket: bucket, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true,
			Transport: rt})
	case "gcs":
		var g *gcs.Store
		g, err = gcs.New(ctx, gcs.Options{Bucket: bucket, Endpoint: testenv.GCS(t).Endpoint, Transport: rt})
		if err == nil {
			t.Cleanup(func() { g.Close() })
		}
		s = g
	case "azblob":
		s, err = azblob.New(azblob.Options{Container: bucket, ConnectionString: testenv.Azurite(t).ConnectionString,
			HTTPClient: &http.Client{Transport: rt}})
	}
	if err != nil {
		t.Fatalf("remote: open %s on %q: %v", driver, bucket, err)
	}
	return s
}
