package lease

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
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
//
// Two spellings of one location give one identity, as they reach one
// lease object and share its tokens: the "minio" scheme is named "s3",
// both drivers being clients of an S3 bucket; a file path has its
// symbolic links resolved (those of its longest existing prefix, when the
// directory does not exist yet).
func Identity(storeURL, name string) (string, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	u, err := store.ParseURL(storeURL)
	if err != nil {
		return "", err
	}
	scheme := u.Scheme
	p := path.Clean("/" + u.Path)
	switch scheme {
	case "minio":
		scheme = "s3"
	case "file":
		if p, err = resolveLinks(p); err != nil {
			return "", fmt.Errorf("lease: identity of %q: %w", storeURL, err)
		}
	}
	p = strings.TrimSuffix(p, "/")
	return fmt.Sprintf("%s://%s%s/%s", scheme, strings.ToLower(u.Host), p, Key(name)), nil
}

// resolveLinks resolves the symbolic links of the clean slash path p, or
// of its longest existing prefix, keeping the rest as it is.
func resolveLinks(p string) (string, error) {
	dir, rest := filepath.FromSlash(p), ""
	for {
		real, err := filepath.EvalSymlinks(dir)
		if err == nil {
			return path.Clean(filepath.ToSlash(filepath.Join(real, rest))), nil
		}
		parent := filepath.Dir(dir)
		if !errors.Is(err, fs.ErrNotExist) || parent == dir {
			return "", err
		}
		dir, rest = parent, filepath.Join(filepath.Base(dir), rest)
	}
}
