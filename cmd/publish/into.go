package main

import (
	"strings"

	"github.com/commitptr/commitptr/generation"
)

// checkInto refuses an --into prefix that is not a relative dataset path
// ending in "/".
func checkInto(prefix string) error {
	dir, ok := strings.CutSuffix(prefix, "/")
	if !ok {
		return usagef("--into %q: a prefix must end in '/' (did you mean %q?)", prefix, prefix+"/")
	}
	if err := generation.CheckPath(dir); err != nil {
		return usagef("--into %q: not a valid dataset path prefix: %v", prefix, err)
	}
	return nil
}
