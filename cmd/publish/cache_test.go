package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/store/mem"
)

// put, get and sync keep manifests under the user's cache directory,
// unless told not to with --no-cache, and never with a customer key, whose
// user would not have the list of files unencrypted on disk.
func TestManifestCacheKeptUnlessNoCacheOrCustomerKey(t *testing.T) {
	for _, c := range []struct {
		name string
		g    *globalOptions
		kept bool
	}{
		{"default", &globalOptions{}, true},
		{"--no-cache", &globalOptions{NoCache: true}, false},
		{"--sse-c-key", &globalOptions{SSECKey: "env:KEY"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			ctx := context.Background()
			d := commit.New(mem.New(), c.g.manifestCache())
			tx, err := d.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.PutBytes(ctx, "a", []byte("1")))
			p, err := tx.Commit(ctx, commit.CommitOptions{})
			require.NoError(t, err)
			dir, err := os.UserCacheDir()
			require.NoError(t, err)
			_, err = os.Stat(filepath.Join(dir, "publish", "manifests", p.ManifestSHA256))
			assert.Equal(t, c.kept, err == nil, "kept: %v", err)
		})
	}
}
