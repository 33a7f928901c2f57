package main

import (
	"context"

	"github.com/commitptr/commitptr/generation"
)

// A transfer is heavy when it may hold a large buffer: an upload over
// largeFile, which the S3 drivers send in parts they buffer; with
// --compress, an upload over bufferedFile, whose size a driver learns only
// by buffering up to largeFile of it; and a download of a zstd file over
// smallDecoded, whose decoder keeps a window of up to 8 MiB. At most
// heavyAtOnce heavy transfers run at once, however many workers run.
// (Variables for the tests of the bound.)
var (
	largeFile    int64 = 16 << 20
	bufferedFile int64 = 1 << 20
	smallDecoded int64 = 64 << 10
	heavyAtOnce        = 16
)

// heavyUpload says whether uploading a file of size bytes is heavy.
func heavyUpload(size int64, compressing bool) bool {
	return size > largeFile || (compressing && size > bufferedFile)
}

// heavyDownload says whether downloading (or verifying) e is heavy.
func heavyDownload(e generation.Entry) bool {
	return e.Encoding == generation.EncodingZstd && e.Size > smallDecoded
}

// heavyGate holds the places of the heavy transfers.
type heavyGate chan struct{}

func newHeavyGate() heavyGate { return make(heavyGate, heavyAtOnce) }

// enter waits for a place when heavy is true, and returns the function that
// gives it back; a light transfer needs none.
func (g heavyGate) enter(ctx context.Context, heavy bool) (leave func(), err error) {
	if !heavy {
		return func() {}, nil
	}
	select {
	case g <- struct{}{}:
		return func() { <-g }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
