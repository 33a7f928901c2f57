package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
)

// writeConfig writes a config file and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

// TestRemoteResolvesToItsURL: NAME:PATH is the remote's URL with PATH
// appended, its settings as query parameters (a parameter the URL has
// already stays); an argument that names no remote of the file, a URL,
// a path with a colon after its first element, and a scheme written
// rclone's way are left as they are.
func TestRemoteResolvesToItsURL(t *testing.T) {
	r, err := loadRemotes(writeConfig(t, `
[prod]
url = s3://bucket/datasets
endpoint = http://127.0.0.1:9000
path-style = true

[keep]
url = s3://bucket?region=eu-west-1
region = us-east-1

[local]
url = file:///srv/data
`), true)
	require.NoError(t, err)
	for arg, want := range map[string]string{
		"prod:daily":      "s3://bucket/datasets/daily?endpoint=http%3A%2F%2F127.0.0.1%3A9000&path_style=true",
		"prod:":           "s3://bucket/datasets?endpoint=http%3A%2F%2F127.0.0.1%3A9000&path_style=true",
		"prod:/a/b/":      "s3://bucket/datasets/a/b?endpoint=http%3A%2F%2F127.0.0.1%3A9000&path_style=true",
		"keep:x":          "s3://bucket/x?region=eu-west-1",
		"local:daily":     "file:///srv/data/daily",
		"other:daily":     "other:daily",
		"s3:bucket":       "s3:bucket",
		"./prod:daily":    "./prod:daily",
		"dir/prod:daily":  "dir/prod:daily",
		"s3://prod:1/x":   "s3://prod:1/x",
		"plain-directory": "plain-directory",
	} {
		assert.Equal(t, want, r.resolve(arg), arg)
	}
}

// TestRemoteConfigErrors: a config file that cannot be read right is a
// usage error that names the file, the remote and the key.
func TestRemoteConfigErrors(t *testing.T) {
	for body, want := range map[string]string{
		"[prod]\nendpoint = x\n":                "remote [prod] has no url",
		"[prod]\nurl = s3://b\nsse-c-key = k\n": `remote [prod] has the unknown key "sse-c-key" (known: url, connect-timeout, endpoint,`,
		"url = s3://b\n":                        `key "url" is outside any [remote] section`,
		"[s3]\nurl = s3://b\n":                  "remote name [s3] is a URL scheme",
		"[a.b]\nurl = s3://b\n":                 "remote name [a.b]: use letters, digits, - and _",
		"[prod]\nurl = bucket/prefix\n":         `remote [prod]: url "bucket/prefix" is not a URL`,
		"[prod]\nurl = ftp://host/x\n":          `remote [prod]: url "ftp://host/x": unknown scheme "ftp"`,
		"[prod\nurl = s3://b\n":                 "config file",
	} {
		path := writeConfig(t, body)
		_, err := loadRemotes(path, true)
		require.Error(t, err, body)
		assert.Contains(t, err.Error(), want, body)
		assert.Contains(t, err.Error(), path, body)
		var u *usageError
		assert.ErrorAs(t, err, &u, body)
	}
	r, err := loadRemotes(filepath.Join(t.TempDir(), "none"), false)
	require.NoError(t, err, "a missing default config file has no remotes")
	assert.Equal(t, "prod:x", r.resolve("prod:x"))
}

// TestRemoteReachesTheStoreWithItsSettings: put and ls through a remote
// that holds the S3 server's endpoint and path style, with no flags; a
// flag given on the command line wins over the remote's setting.
func TestRemoteReachesTheStoreWithItsSettings(t *testing.T) {
	srv := testenv.S3(t)
	tg := target{name: "s3", env: srv.Env()}
	bucket := srv.NewBucket(t)
	cfg := writeConfig(t, "[prod]\nurl = s3://"+bucket+"/datasets\nendpoint = "+srv.Endpoint+"\npath-style = true\n"+
		"[stale]\nurl = s3://"+bucket+"/datasets\nendpoint = http://127.0.0.1:9\npath-style = true\n")
	src := writeTree(t, map[string]string{"a.csv": "1"})

	r := tg.run(t, "--config", cfg, "put", src, "prod:daily")
	require.Zero(t, r.code, r.stderr)
	r = tg.run(t, "--config", cfg, "ls", "prod:daily")
	require.Zero(t, r.code, r.stderr)
	assert.Contains(t, r.stdout, "a.csv")
	r = tg.run(t, "--endpoint", srv.Endpoint, "--path-style", "ls", "s3://"+bucket+"/datasets/daily")
	require.Zero(t, r.code, r.stderr)
	assert.Contains(t, r.stdout, "a.csv", "the remote's URL is where the put went")

	r = tg.run(t, "--config", cfg, "--endpoint", srv.Endpoint, "ls", "stale:daily")
	require.Zero(t, r.code, "the flag's endpoint, not the remote's: %s", r.stderr)
	assert.Contains(t, r.stdout, "a.csv")
}

// TestRemoteNotResolvedAfterDash: the arguments of the command that run
// starts are passed as they are, even one that names a remote.
func TestRemoteNotResolvedAfterDash(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, "[prod]\nurl = file://"+filepath.ToSlash(dir)+"\n")
	code, out, errs := cli(t, "", "--config", cfg, "run", "--lease", "job", "prod:ds", "--", "sh", "-c", `test "$1" = prod:x`, "sh", "prod:x")
	require.Equal(t, exitOK, code, "stdout: %s\nstderr: %s", out, errs)
	_, err := os.Stat(filepath.Join(dir, "ds"))
	assert.NoError(t, err, "the lease was taken in the remote's directory")
}

// TestRemoteNotResolvedForCompletion: shell completion gets the argument
// being completed as typed, and a config file it cannot read does not
// break it.
func TestRemoteNotResolvedForCompletion(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	require.NoError(t, os.MkdirAll(filepath.Join(home, "publish"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(home, "publish", "config"), []byte("[prod\n"), 0o600))
	code, out, errs := cli(t, "", cobra.ShellCompRequestCmd, "ls", "prod:")
	require.Equal(t, exitOK, code, "stdout: %s\nstderr: %s", out, errs)
}

// TestPathStyleFlagOverridesTheURL: --path-style given on the command line,
// false included, decides the path style of an S3 URL whatever the URL or
// its remote says; without the flag the URL decides.
func TestPathStyleFlagOverridesTheURL(t *testing.T) {
	for _, c := range []struct {
		args    []string
		url     string
		want    string
		wantCfg bool
	}{
		{nil, "s3://b/p?path_style=true", "s3://b/p?path_style=true", false},
		{[]string{"--path-style=false"}, "s3://b/p?path_style=true", "s3://b/p?path_style=false", false},
		{[]string{"--path-style"}, "minio://b/p?region=r", "minio://b/p?path_style=true&region=r", false},
		{[]string{"--path-style"}, "file:///tmp/x", "file:///tmp/x", true},
	} {
		var g globalOptions
		cmd := &cobra.Command{Use: "x"}
		g.AddFlags(cmd)
		require.NoError(t, cmd.ParseFlags(c.args))
		u, err := store.ParseURL(c.url)
		require.NoError(t, err)
		got, cfg := g.pathStyle(u, c.url)
		assert.Equal(t, c.want, got, "%v %s", c.args, c.url)
		assert.Equal(t, c.wantCfg, cfg, "%v %s", c.args, c.url)
	}
}

// TestServeBucketNamesARemote: serve's NAME=REMOTE:PATH resolves the
// remote and keeps the bucket name; other commands take NAME=... as it
// is.
func TestServeBucketNamesARemote(t *testing.T) {
	cfg := writeConfig(t, "[prod]\nurl = s3://bucket/datasets\nregion = eu-west-1\n")
	g := globalOptions{Config: cfg}
	args := []string{"daily=prod:daily", "prod:weekly", "other=s3://b/x", "nosuch=none:x"}
	require.NoError(t, g.resolveRemotes(&cobra.Command{Use: "serve"}, args))
	assert.Equal(t, []string{
		"daily=s3://bucket/datasets/daily?region=eu-west-1",
		"s3://bucket/datasets/weekly?region=eu-west-1",
		"other=s3://b/x",
		"nosuch=none:x",
	}, args)

	args = []string{"daily=prod:daily"}
	require.NoError(t, g.resolveRemotes(&cobra.Command{Use: "ls"}, args))
	assert.Equal(t, []string{"daily=prod:daily"}, args)
}
