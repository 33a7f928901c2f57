package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
)

// TestPutOfAPathTooLongForTheStoreWritesNothing: a file whose object key
// would be longer than object stores take fails the put before anything
// is uploaded, with exit 1 and a message naming the file; the store holds
// no object afterwards.
func TestPutOfAPathTooLongForTheStoreWritesNothing(t *testing.T) {
	for _, tg := range fileTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			src := writeTree(t, map[string]string{"a": "fits"})
			long := strings.Join([]string{strings.Repeat("d", 200), strings.Repeat("d", 200), strings.Repeat("d", 200), strings.Repeat("d", 200), strings.Repeat("f", 180)}, "/")
			require.Less(t, len(long), 1024, "the path itself is valid")
			full := filepath.Join(src, filepath.FromSlash(long))
			require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
			require.NoError(t, os.WriteFile(full, []byte("too long"), 0o644))

			url := tg.url(t)
			r := tg.run(t, "put", src, url)
			require.Equal(t, exitError, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			assert.Contains(t, r.stderr, strings.Repeat("f", 180)+" cannot be published")
			assert.Contains(t, r.stderr, "more than the 1024 object stores take")
			assert.NotContains(t, r.stderr, "could not delete")

			s := tg.open(t, url)
			for o, err := range store.List(context.Background(), s, "", "", "") {
				require.NoError(t, err)
				t.Errorf("the store holds %s after a refused put", o.Key)
			}
		})
	}
}
