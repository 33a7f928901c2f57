package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// treeState is every file below root, the lease's included, with the
// sha256 of its content and its modification time.
func treeState(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(root, func(path string, d iofs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		rel, _ := filepath.Rel(root, path)
		out[filepath.ToSlash(rel)] = hex.EncodeToString(sum[:]) + " " + info.ModTime().String()
		return nil
	}))
	return out
}

// TestGCCorruptPointerExitsWithoutWriting: gc on a pointer whose seq does
// not match its manifest, or that does not decode, exits with status 1
// and a message naming the pointer's key and what is wrong, and leaves
// every file as it was, the pointer's modification time included; with
// --dry-run too. It does not say that there is no pointer. A dataset
// that has none still says so, with status 0.
func TestGCCorruptPointerExitsWithoutWriting(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, s store.Store)
		mention string
	}{
		{"seq", func(t *testing.T, s store.Store) {
			ctx := context.Background()
			p, attrs, err := pointer.Read(ctx, s)
			require.NoError(t, err)
			p.Seq = 7
			_, err = pointer.Write(ctx, s, p, attrs.ETag)
			require.NoError(t, err)
		}, `pointer "_pointer": corrupt pointer: seq 7 does not match manifest "_gen/`},
		{"garbage", func(t *testing.T, s store.Store) {
			_, err := s.Put(context.Background(), pointer.Key, bytes.NewReader([]byte("not a pointer")), store.PutOptions{})
			require.NoError(t, err)
		}, `pointer "_pointer": corrupt pointer: `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			u := "file://" + filepath.ToSlash(root)
			for i := range 3 {
				ok(t, "put", writeTree(t, map[string]string{"f": fmt.Sprint(i)}), u)
			}
			s, err := store.Open(context.Background(), u, store.Config{})
			require.NoError(t, err)
			tc.corrupt(t, s)
			before := treeState(t, root)

			for _, args := range [][]string{{"gc", u}, {"gc", "--dry-run", u}} {
				code, out, errs := cli(t, "", args...)
				t.Logf("%v: status %d\nstdout: %s\nstderr: %s", args, code, out, errs)
				assert.Equal(t, exitError, code, "%v", args)
				assert.Contains(t, errs, tc.mention, "%v", args)
				assert.Contains(t, errs, "refusing to collect", "%v", args)
				assert.NotContains(t, out+errs, "no pointer", "%v", args)
				assert.Equal(t, before, treeState(t, root), "%v wrote nothing", args)
			}
		})
	}

	t.Run("no pointer", func(t *testing.T) {
		u := "file://" + filepath.ToSlash(t.TempDir())
		out := ok(t, "gc", u)
		assert.Contains(t, out, "no pointer: nothing to collect")
	})
}
