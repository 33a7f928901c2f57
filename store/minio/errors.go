package minio

import (
	"errors"
	"fmt"

	"github.com/minio/minio-go/v7"

	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/internal/httptimeout"
	"github.com/commitptr/commitptr/store/internal/portable"
)

// err classifies a minio-go error (portable.Classify) and says what
// minio-go's message does not: the S3 error code and HTTP status, the
// bucket for a missing bucket, the endpoint for a server that cannot be
// reached. ifMatch says whether the request carried If-Match, which turns
// a 404 into store.ErrPrecondition.
func (s *bucket) err(ifMatch bool, err error) error {
	// A server's answer has a status; a per-key error of a multi-object
	// DELETE has only a code.
	er, ok := errors.AsType[minio.ErrorResponse](err)
	switch {
	case err == nil:
		return nil
	case !ok || (er.StatusCode == 0 && er.Code == ""):
		return portable.Classify(nil, httptimeout.Unanswered(err, "S3", s.endpoint))
	}
	class := store.ClassOfS3(er.Code, er.StatusCode, ifMatch)
	// ErrorResponse.Error is only the message; add the code and status.
	cause := fmt.Errorf("%s: %w", er.Code, err)
	if er.StatusCode != 0 {
		cause = fmt.Errorf("%s (HTTP %d): %w", er.Code, er.StatusCode, err)
	}
	if class == store.ErrNoBucket {
		cause = fmt.Errorf("bucket %q at %s: %w", s.bucket, s.endpoint, cause)
	}
	return portable.Classify(class, cause)
}
