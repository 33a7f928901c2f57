package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
)

// The real S3 clients the serve tests drive: scripts/tools.sh
// (install_clients) installs them and exports these variables. Unset, the
// system's own paths are used. A test fails when its client is missing.
func s3ClientPath(t *testing.T, env, fallback string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = fallback
	}
	if _, err := exec.LookPath(p); err != nil {
		t.Fatalf("%s (%s) is missing: %v; install it with install_clients in scripts/tools.sh", p, env, err)
	}
	return p
}

func awsCLI(t *testing.T) string { return s3ClientPath(t, "COMMITPTR_AWS", "/usr/bin/aws") }
func rcloneCLI(t *testing.T) string {
	return s3ClientPath(t, "COMMITPTR_RCLONE", "/usr/bin/rclone")
}

func boto3Python(t *testing.T) string {
	t.Helper()
	p := s3ClientPath(t, "COMMITPTR_PYTHON", "/usr/bin/python3")
	if out, err := exec.Command(p, "-c", "import boto3").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import boto3: %v\n%s; install it with install_clients in scripts/tools.sh", p, err, out)
	}
	return p
}

// clientEnv is the environment of an S3 client of a local serve: none of
// the AWS_ and RCLONE_ settings of the test's own environment, fixed
// credentials (serve on loopback without keys takes any), path-style
// addressing, no metadata service, no pager.
func clientEnv(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "aws-config")
	require.NoError(t, os.WriteFile(cfg, []byte("[default]\nregion = us-east-1\ns3 =\n  addressing_style = path\n"), 0o600))
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "RCLONE_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"AWS_ACCESS_KEY_ID=reader", "AWS_SECRET_ACCESS_KEY=reader-secret", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_CONFIG_FILE="+cfg, "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "none"),
		"AWS_EC2_METADATA_DISABLED=true", "AWS_PAGER=", "HOME="+dir,
		"RCLONE_CONFIG="+filepath.Join(dir, "rclone.conf"),
	)
}

func runClient(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "%s %v\nstdout: %s\nstderr: %s", name, args, out.String(), errb.String())
	return out.String()
}

// startServe runs publish serve on a free loopback port until the test
// ends, and returns its endpoint. The serve must then end with status 0 on
// SIGTERM.
func startServe(t *testing.T, tg target, args ...string) string {
	t.Helper()
	cmd := tg.command(t, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errb := &lockedBuffer{}
	cmd.Stderr = errb
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "publish serve printed no endpoint; stderr: %s", errb.String())
	m := regexp.MustCompile(`at (http://127\.0\.0\.1:\d+)`).FindStringSubmatch(line)
	require.NotNil(t, m, "publish serve printed %q", line)
	t.Cleanup(func() {
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, cmd.Wait(), "publish serve on SIGTERM; stderr: %s", errb.String())
	})
	return m[1]
}

// writeFiles writes files below dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, body := range files {
		name := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(name), 0o755))
		require.NoError(t, os.WriteFile(name, []byte(body), 0o644))
	}
}

func s3Target(t *testing.T) target {
	return remoteTarget("s3", "s3", testenv.S3(t))
}

// twoSnapshots publishes two snapshots at a fresh dataset of tg and
// returns its URL and what publish get gets of each.
func twoSnapshots(t *testing.T, tg target) (url string, first, second map[string]string) {
	t.Helper()
	url = tg.url(t)
	big := make([]byte, 300<<10)
	_, _ = rand.Read(big)
	v1 := map[string]string{
		"a.txt": "first a\n", "dir/b.bin": string(big), "dir/sub/c.txt": "c\n",
		"with space.txt": "spaced\n", "empty": "", "unicode-é.txt": "é\n",
	}
	src := t.TempDir()
	writeFiles(t, src, v1)
	tg.ok(t, "put", src, url)
	v2 := map[string]string{"a.txt": "second a\n", "new/n.txt": "new\n"}
	require.NoError(t, os.Remove(filepath.Join(src, "dir", "sub", "c.txt")))
	writeFiles(t, src, v2)
	tg.ok(t, "put", src, url)

	dir := t.TempDir()
	tg.ok(t, "get", "--seq", "1", url, filepath.Join(dir, "1"))
	tg.ok(t, "get", url, filepath.Join(dir, "current"))
	first, second = readTree(t, filepath.Join(dir, "1")), readTree(t, filepath.Join(dir, "current"))
	require.Equal(t, v1, first)
	require.NotEqual(t, first, second)
	return url, first, second
}

func TestServeAwsCLIListsAndCopiesWhatGetGets(t *testing.T) {
	aws := awsCLI(t)
	tg := s3Target(t)
	url, first, second := twoSnapshots(t, tg)
	endpoint := startServe(t, tg, url)
	env := clientEnv(t)
	out := t.TempDir()

	ls := runClient(t, env, aws, "--endpoint-url", endpoint, "s3", "ls", "s3://daily/")
	require.Contains(t, ls, "PRE @2/")
	require.Contains(t, ls, "PRE current/")
	ls = runClient(t, env, aws, "--endpoint-url", endpoint, "s3", "ls", "--recursive", "s3://daily/@1/")
	require.Contains(t, ls, "@1/dir/sub/c.txt")

	runClient(t, env, aws, "--endpoint-url", endpoint, "s3", "cp", "--recursive", "--only-show-errors", "s3://daily/current/", filepath.Join(out, "current"))
	runClient(t, env, aws, "--endpoint-url", endpoint, "s3", "cp", "--recursive", "--only-show-errors", "s3://daily/@1/", filepath.Join(out, "1"))
	require.Equal(t, second, readTree(t, filepath.Join(out, "current")))
	require.Equal(t, first, readTree(t, filepath.Join(out, "1")))

	// Writing is refused.
	cmd := exec.Command(aws, "--endpoint-url", endpoint, "s3", "cp", filepath.Join(out, "1", "a.txt"), "s3://daily/current/x")
	cmd.Env = env
	b, err := cmd.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(b), "AccessDenied")
}

func TestServeRcloneListsAndCopiesWhatGetGets(t *testing.T) {
	rclone := rcloneCLI(t)
	tg := s3Target(t)
	url, first, second := twoSnapshots(t, tg)
	endpoint := startServe(t, tg, url)
	env := clientEnv(t)
	out := t.TempDir()
	flags := []string{"--s3-provider", "Other", "--s3-endpoint", endpoint, "--s3-access-key-id", "reader", "--s3-secret-access-key", "reader-secret", "--s3-force-path-style"}

	lsf := runClient(t, env, rclone, append([]string{"lsf", ":s3:daily"}, flags...)...)
	require.Equal(t, "@2/\ncurrent/\n", lsf)
	for ref, want := range map[string]map[string]string{"current": second, "@1": first} {
		runClient(t, env, rclone, append([]string{"copy", ":s3:daily/" + ref, filepath.Join(out, ref)}, flags...)...)
		require.Equal(t, want, readTree(t, filepath.Join(out, ref)), ref)
	}
}

// boto3Copy lists REF/ through a paginator and downloads every key below
// DEST; it prints the keys it copied.
const boto3Copy = `
import os, sys, boto3
endpoint, ref, dest = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=endpoint)
print(" ".join(b["Name"] for b in s3.list_buckets()["Buckets"]))
for page in s3.get_paginator("list_objects_v2").paginate(Bucket="daily", Prefix=ref + "/"):
    for o in page.get("Contents", []):
        path = os.path.join(dest, o["Key"][len(ref) + 1:])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        s3.download_file("daily", o["Key"], path)
        print(o["Key"])
`

func TestServeBoto3ListsAndCopiesWhatGetGets(t *testing.T) {
	python := boto3Python(t)
	tg := s3Target(t)
	url, first, second := twoSnapshots(t, tg)
	endpoint := startServe(t, tg, url)
	env := clientEnv(t)
	out := t.TempDir()
	for ref, want := range map[string]map[string]string{"current": second, "@1": first} {
		printed := runClient(t, env, python, "-c", boto3Copy, endpoint, ref, filepath.Join(out, ref))
		require.True(t, strings.HasPrefix(printed, "daily\n"), printed)
		require.Equal(t, want, readTree(t, filepath.Join(out, ref)), ref)
	}
}

// boto3Pages lists current/ two keys a page. After the first page it says
// so and waits for a line on stdin; at the end it prints the keys and
// ETags of the whole listing, and of a new listing, as JSON.
const boto3Pages = `
import json, sys, boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1])
def listing(wait):
    seen = {}
    for i, page in enumerate(s3.get_paginator("list_objects_v2").paginate(
            Bucket="daily", Prefix="current/", PaginationConfig={"PageSize": 2})):
        for o in page.get("Contents", []):
            seen[o["Key"]] = o["ETag"].strip('"')
        if wait and i == 0:
            print("first page", flush=True)
            sys.stdin.readline()
    return seen
paged = listing(True)
print(json.dumps({"paged": paged, "fresh": listing(False)}), flush=True)
`

func TestServeBoto3PagedListingDoesNotMixGenerationsWhenACommitLands(t *testing.T) {
	python := boto3Python(t)
	tg := s3Target(t)
	url := tg.url(t)
	v1 := map[string]string{}
	for _, p := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		v1[p] = "one " + p
	}
	src := t.TempDir()
	writeFiles(t, src, v1)
	tg.ok(t, "put", src, url)
	// The pointer is read again for every request: the commit below is
	// seen by the next page.
	endpoint := startServe(t, tg, "--refresh", "1ns", url)

	cmd := exec.Command(python, "-c", boto3Pages, endpoint)
	cmd.Env = clientEnv(t)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errb := &lockedBuffer{}
	cmd.Stderr = errb
	require.NoError(t, cmd.Start())
	r := bufio.NewReader(stdout)
	line, err := r.ReadString('\n')
	require.NoError(t, err, "stderr: %s", errb.String())
	require.Equal(t, "first page\n", line)

	v2 := map[string]string{"0": "two", "bb": "two"}
	for p := range v1 {
		v2[p] = "two " + p
	}
	writeFiles(t, src, v2)
	tg.ok(t, "put", src, url)
	_, err = io.WriteString(stdin, "go on\n")
	require.NoError(t, err)
	var res struct{ Paged, Fresh map[string]string }
	require.NoError(t, json.NewDecoder(r).Decode(&res), "stderr: %s", errb.String())
	require.NoError(t, cmd.Wait(), "stderr: %s", errb.String())

	want := func(files map[string]string) map[string]string {
		m := map[string]string{}
		for p, body := range files {
			sum := sha256.Sum256([]byte(body))
			m["current/"+p] = hex.EncodeToString(sum[:])
		}
		return m
	}
	require.Equal(t, want(v1), res.Paged, "every page of the listing comes from the generation of its first")
	require.Equal(t, want(v2), res.Fresh, "a listing begun after the commit sees it")
}

func TestServeRefusesAnOpenAddressWithoutAccessKeysAndBadBucketNames(t *testing.T) {
	u := memURL()
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"serve", "--listen", "0.0.0.0:0", "daily=" + u}, "access keys"},
		{[]string{"serve", "--listen", ":0", "daily=" + u}, "access keys"},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--access-key", "a", "daily=" + u}, "--secret-key"},
		{[]string{"serve", "--listen", "127.0.0.1:0", "Daily_Data=" + u}, "not a valid bucket name"},
		{[]string{"serve", "--listen", "127.0.0.1:0", "daily=" + u, "daily=" + memURL()}, "two datasets are named"},
	} {
		code, _, errs := cli(t, "", c.args...)
		require.Equal(t, exitUsage, code, "%v: %s", c.args, errs)
		require.Contains(t, errs, c.says, c.args)
	}
}
