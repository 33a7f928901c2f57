package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		glob  string
		match []string
		miss  []string
	}{
		{"*.log", []string{"a.log", "x/y/a.log", ".log"}, []string{"a.log/b", "a.logx"}},
		{"b.log", []string{"b.log", "x/b.log"}, []string{"xb.log", "x/xb.log"}},
		{"/b.log", []string{"b.log"}, []string{"x/b.log"}},
		{"tmp/**", []string{"tmp/a", "x/tmp/a/b"}, []string{"tmp", "xtmp/a"}},
		{"/tmp/**", []string{"tmp/a", "tmp/a/b"}, []string{"x/tmp/a"}},
		{"/a/*/c", []string{"a/b/c"}, []string{"a/b/b/c", "a/c"}},
		{"/a/**/c", []string{"a/b/c", "a/b/b/c"}, []string{"a/c", "a/b/cc"}},
		{"file?.txt", []string{"file1.txt", "d/fileé.txt"}, []string{"file12.txt", "file/.txt"}},
		{"[ab].txt", []string{"a.txt", "b.txt"}, []string{"c.txt"}},
		{"[!ab].txt", []string{"c.txt"}, []string{"a.txt"}},
		{"x[!ab]y", []string{"xcy"}, []string{"x/y", "xay"}}, // a negated class stays within one segment
		{"*.{jpg,png}", []string{"a.jpg", "d/b.png"}, []string{"c.gif"}},
		{`a\*b`, []string{"a*b"}, []string{"axb"}},
		{"a+b(1).txt", []string{"a+b(1).txt"}, []string{"aab1.txt"}},
	} {
		t.Run(c.glob, func(t *testing.T) {
			re, err := compileGlob(c.glob)
			require.NoError(t, err)
			for _, p := range c.match {
				assert.True(t, re.MatchString(p), "%q should match %q (%s)", c.glob, p, re)
			}
			for _, p := range c.miss {
				assert.False(t, re.MatchString(p), "%q should not match %q (%s)", c.glob, p, re)
			}
		})
	}
	for _, bad := range []string{"", "/", "a[b", "{a,b", `a\`, "[]"} {
		_, err := compileGlob(bad)
		assert.Error(t, err, "%q", bad)
	}
}

// TestFilterOrder: the rules keep the command line's order across
// --include, --exclude and --exclude-from, the first match decides, and
// an --include excludes what no rule matches.
func TestFilterOrder(t *testing.T) {
	from := filepath.Join(t.TempDir(), "excludes")
	require.NoError(t, os.WriteFile(from, []byte("# comment\n\n*.tmp\r\n"), 0o644))
	parse := func(args ...string) *filters {
		t.Helper()
		var f filters
		cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
		f.AddFlags(cmd, "SRC")
		cmd.SetArgs(args)
		require.NoError(t, cmd.Execute())
		return &f
	}
	f := parse()
	assert.False(t, f.Active())
	assert.True(t, f.Match("anything"))

	f = parse("--include", "keep.log", "--exclude", "*.log")
	assert.True(t, f.Match("d/keep.log"))
	assert.False(t, f.Match("d/other.log"))
	assert.False(t, f.Match("data.csv"), "with an --include, a file no rule matches is excluded")

	f = parse("--exclude", "*.log", "--include", "keep.log")
	assert.False(t, f.Match("keep.log"), "the earlier --exclude wins")

	f = parse("--exclude-from", from, "--exclude", "/build/**")
	assert.False(t, f.Match("a/b.tmp"))
	assert.False(t, f.Match("build/x"))
	assert.True(t, f.Match("src/build/x"))
	assert.True(t, f.Match("a.tmpx"))
}
