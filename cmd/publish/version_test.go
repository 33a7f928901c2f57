package main

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestVersionOneLine: 'publish version' and 'publish --version' print the
// same single line and exit 0.
func TestVersionOneLine(t *testing.T) {
	code, out, errs := cli(t, "", "version")
	assert.Equal(t, exitOK, code, errs)
	assert.Regexp(t, `^publish \S+ commit \S+( \(modified\))?\n$`, out)
	assert.Equal(t, versionLine()+"\n", out)

	code, flagOut, errs := cli(t, "", "--version")
	assert.Equal(t, exitOK, code, errs)
	assert.Equal(t, out, flagOut)
}

// TestVersionFromBuildInfo: the line carries the module version and the
// VCS revision, and says when the work tree was modified.
func TestVersionFromBuildInfo(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.modified", Value: "true"},
	}}
	assert.Equal(t, "publish v1.2.3 commit 0123456789abcdef0123456789abcdef01234567 (modified)", formatVersion(info))
	info.Settings[2].Value = "false"
	assert.Equal(t, "publish v1.2.3 commit 0123456789abcdef0123456789abcdef01234567", formatVersion(info))
	assert.Equal(t, "publish (devel) commit unknown", formatVersion(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}))
	assert.Equal(t, "publish (unknown) commit unknown", formatVersion(nil))
}
