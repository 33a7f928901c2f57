package lease

import (
	"fmt"
	"path"
	"strings"

	"github.com/commitptr/commitptr/store"
)

// Identity returns a stable name for the lease name in the store at
// storeURL: the URL without credentials, query or fragment, with a clean
// path, followed by the lease's key, as in "s3://bucket/jobs/_lease/nightly".
// A fencing token means something only together with it: commits record
// the highest token per identity (commit.CommitOptions.FenceLease). The
// endpoint and other connection settings are not part of it, so every
// client of one bucket names a lease alike.
func Identity(storeURL, name string) (string, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	u, err := store.ParseURL(storeURL)
	if err != nil {
		return "", err
	}
	p := strings.TrimSuffix(path.Clean("/"+u.Path), "/")
	return fmt.Sprintf("%s://%s%s/%s", u.Scheme, strings.ToLower(u.Host), p, Key(name)), nil
}
