package main

import (
	"strings"
)

// parseMeta parses key=value pairs.
func parseMeta(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--meta %q: want key=value", kv)
		}
		m[k] = v
	}
	return m, nil
}
