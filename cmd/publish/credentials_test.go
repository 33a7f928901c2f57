package main

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMissingCredentialsSayWhatIsMissing: without AWS credentials, or
// with a --profile the shared config does not have, a command exits 1
// (not 2, a bad command line) and says what is missing in one line,
// without the SDK's account of every source it tried.
func TestMissingCredentialsSayWhatIsMissing(t *testing.T) {
	tg := fileTargets(t)[1]
	url := tg.url(t)
	none := filepath.Join(t.TempDir(), "none")
	tg.env = append(slices.Clone(tg.env),
		"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_SESSION_TOKEN=", "AWS_PROFILE=",
		"AWS_CONFIG_FILE="+none, "AWS_SHARED_CREDENTIALS_FILE="+none, "AWS_EC2_METADATA_DISABLED=true",
		"AWS_WEB_IDENTITY_TOKEN_FILE=", "AWS_CONTAINER_CREDENTIALS_FULL_URI=", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=")

	r := tg.run(t, "ls", url)
	assert.Equal(t, exitError, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, "no AWS credentials found")
	assert.NotContains(t, r.stderr, "IMDS")

	r = tg.run(t, "--profile", "nosuch", "ls", url)
	assert.Equal(t, exitError, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, "nosuch")
	assert.NotContains(t, r.stderr, "Run 'publish ls --help'")
}
