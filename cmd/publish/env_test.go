package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
)

// TestGlobalFlagsFromEnv: every global flag has a PUBLISH_<FLAG>
// variable; a set variable acts as the flag, the flag on the command line
// wins, and a value the flag does not take is a usage error naming the
// variable.
func TestGlobalFlagsFromEnv(t *testing.T) {
	root := newRootCommand(nil, nil, nil)
	var names []string
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) { names = append(names, envName(f.Name)) })
	assert.ElementsMatch(t, []string{"PUBLISH_ENDPOINT", "PUBLISH_REGION", "PUBLISH_PROFILE", "PUBLISH_PATH_STYLE",
		"PUBLISH_CONNECT_TIMEOUT", "PUBLISH_TIMEOUT", "PUBLISH_IDLE_TIMEOUT", "PUBLISH_JSON", "PUBLISH_VERBOSE",
		"PUBLISH_QUIET", "PUBLISH_PROGRESS", "PUBLISH_CONFIG", "PUBLISH_SSE", "PUBLISH_SSE_KMS_KEY_ID", "PUBLISH_SSE_C_KEY",
		"PUBLISH_STORAGE_CLASS", "PUBLISH_NO_CACHE", "PUBLISH_TRANSFERS"}, names, "the variables the help and README name")

	u := "file://" + filepath.Join(t.TempDir(), "store")
	src := writeTree(t, map[string]string{"a": "1"})

	// PUBLISH_QUIET silences put; PUBLISH_JSON makes it speak JSON.
	t.Setenv("PUBLISH_QUIET", "true")
	assert.Empty(t, ok(t, "put", src, u))
	t.Setenv("PUBLISH_QUIET", "")
	t.Setenv("PUBLISH_JSON", "1")
	assert.Contains(t, ok(t, "log", u), `"seq": 1`)
	// The command line wins: --json=false over PUBLISH_JSON=1.
	assert.Contains(t, ok(t, "--json=false", "log", u), "SEQ")
	t.Setenv("PUBLISH_JSON", "")

	// PUBLISH_VERBOSE=1 lists each file.
	t.Setenv("PUBLISH_VERBOSE", "1")
	code, _, errs := cli(t, "", "put", "--allow-unchanged", src, u)
	require.Equal(t, exitOK, code, errs)
	assert.Contains(t, errs, "reused a\n")
	t.Setenv("PUBLISH_VERBOSE", "")

	// A timeout from the environment counts as given, like the flag.
	t.Setenv("PUBLISH_TIMEOUT", "42s")
	assert.Equal(t, store.Timeouts{Header: 42 * time.Second}, timeoutsGiven(t))
	assert.Equal(t, store.Timeouts{Header: 7 * time.Second}, timeoutsGiven(t, "--timeout", "7s"), "the command line wins")

	t.Setenv("PUBLISH_TIMEOUT", "soon")
	code, _, errs = cli(t, "", "ls", u)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errs, `PUBLISH_TIMEOUT="soon"`)
}

// timeoutsGiven parses args as global flags, applies the environment, and
// returns the timeouts taken as given.
func timeoutsGiven(t *testing.T, args ...string) store.Timeouts {
	t.Helper()
	c := &cobra.Command{Use: "publish"}
	g := &globalOptions{}
	g.AddFlags(c)
	require.NoError(t, c.PersistentFlags().Parse(args))
	require.NoError(t, g.fromEnv())
	got, err := g.explicitTimeouts()
	require.NoError(t, err)
	return got
}
