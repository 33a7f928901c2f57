package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSyncOutput: sync prints its result line and the summary, as put
// and get do; -v lists each change on stderr. A dry run says what would
// be downloaded and deleted ("would be deleted", not "deleted") and
// changes nothing.
func TestSyncOutput(t *testing.T) {
	u := "file://" + filepath.Join(t.TempDir(), "store")
	ok(t, "put", writeTree(t, map[string]string{"a": "aa", "b": "bbb"}), u)
	dest := filepath.Join(t.TempDir(), "dest")

	code, out, errs := cli(t, "", "sync", u, dest)
	require.Equal(t, exitOK, code, errs)
	assert.Regexp(t, `^synced seq 1 generation \S+ into \S+: 2 added, 0 updated, 0 deleted, 0 unchanged \(0 with mode or time set\), 5 B downloaded\n`+
		`sync: 2 files: 2 downloaded \(5 B\), 0 unchanged \(0 B\); \S+, \S+ \S+/s\n$`, out)
	assert.Empty(t, errs)

	require.NoError(t, os.WriteFile(filepath.Join(dest, "extra"), []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dest, "a"), []byte("changed"), 0o644))
	code, out, errs = cli(t, "", "-v", "sync", "--dry-run", u, dest)
	require.Equal(t, exitOK, code, errs)
	assert.Regexp(t, `^dry run of sync of seq 1 generation \S+ into \S+: would add 0, update 1, delete 1, leave 1 unchanged \(0 with mode or time to set\), download 2 B; nothing was changed\n`+
		`sync: 2 files: 1 would be downloaded \(2 B\), 1 would be unchanged \(3 B\), 1 would be deleted; \S+, nothing written\n$`, out)
	assert.NotContains(t, out, "1 deleted")
	assert.Equal(t, "M a\n- extra\n", errs)
	assert.Equal(t, map[string]string{"a": "changed", "b": "bbb", "extra": "x"}, readTree(t, dest), "a dry run changes nothing")

	code, out, errs = cli(t, "", "sync", u, dest)
	require.Equal(t, exitOK, code, errs)
	assert.NotContains(t, out, "M a")
	assert.Contains(t, lastLine(out), ", 1 deleted; ")
	assert.Equal(t, map[string]string{"a": "aa", "b": "bbb"}, readTree(t, dest))
}
