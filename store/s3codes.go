package store

import "net/http"

// ClassOfS3 maps an S3 error code and HTTP status (0 if unknown) to an
// error class, or nil: the table the S3-protocol drivers share. The code
// wins when it is known; the status covers responses without a body (HEAD)
// and servers with unusual codes. ifMatch says whether the request carried
// If-Match, for which S3 answers a missing key with 404: that is a failed
// precondition.
func ClassOfS3(code string, status int, ifMatch bool) error {
	notExist := ErrNotExist
	if ifMatch {
		notExist = ErrPrecondition
	}
	switch code {
	case "NoSuchUpload":
		return nil // a multipart upload vanished: not the object's state
	case "NoSuchKey", "NotFound":
		return notExist
	case "PreconditionFailed":
		return ErrPrecondition
	case "ConditionalRequestConflict":
		return ErrConflict
	case "NoSuchBucket":
		return ErrNoBucket
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken",
		"ExpiredToken", "TokenRefreshRequired", "AllAccessDisabled", "AccountProblem",
		"XAdminUserNotFound": // versitygw: an unknown access key, with status 404
		return ErrAccess
	}
	switch status {
	case http.StatusNotFound:
		return notExist
	case http.StatusPreconditionFailed:
		return ErrPrecondition
	case http.StatusRequestedRangeNotSatisfiable:
		return ErrInvalidRange
	case http.StatusConflict:
		// Only ConditionalRequestConflict (matched above) is retryable;
		// other 409s, such as a key that is a directory on a POSIX-backed
		// server, are not. A 409 without a code (HEAD) is taken as the
		// retryable kind.
		if code == "" {
			return ErrConflict
		}
		return nil
	case http.StatusUnauthorized, http.StatusForbidden:
		return ErrAccess
	}
	return nil
}
