package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// TestRolePoliciesAllowTheirCommandsOnly runs the commands of each role of
// OPERATIONS.md as a user whose only permissions are the role's policy
// (iamRoles), against an S3 server that enforces IAM policies, on a
// dataset that has what those commands meet in use: tags, pins, collected
// generations, a job, leftovers of interrupted writes, group commit's
// intents. Every command works; none of the user's requests is denied, not
// even one whose denial a command would survive (such as the LIST of
// intents before a commit); every grant of the policy is used, but for
// those iamRoles says no command here needs; and a command outside the
// role is refused, naming the request that was denied.
func TestRolePoliciesAllowTheirCommandsOnly(t *testing.T) {
	srv := testenv.IAMS3(t)
	srv.UseCredentials() // root's, for the setup this test does in process
	ctx := context.Background()
	bucket := srv.NewBucket(t)
	const prefix = "daily"
	url := "s3://" + bucket + "/" + prefix
	// Without the manifest cache, every command sends each request a
	// machine that never saw the dataset would.
	flags := []string{"--endpoint", srv.Endpoint, "--path-style", "--no-cache"}
	root := target{name: "root", flags: flags, env: srv.Env(), secret: srv.SecretKey}
	as := map[string]*roleUser{}
	for _, r := range iamRoles {
		u := srv.NewUser(t, strings.ReplaceAll(r.name, " ", "-"), []byte(r.policy(bucket, prefix)))
		as[r.name] = &roleUser{target: target{name: r.name, flags: flags, env: u.Env(), secret: u.SecretKey}, user: u}
	}
	writer, reader, collector, leaseUser, auditor := as["writer"], as["reader"], as["collector"], as["lease user"], as["auditor"]
	s, err := store.Open(ctx, url, store.Config{Endpoint: srv.Endpoint, PathStyle: true})
	require.NoError(t, err)

	// Seqs 1 to 4; then root tags 1, pins 3 for an hour and 2 for a
	// moment, begins a job, and leaves what a collection removes: the parts
	// of an interrupted upload, an intent no commit can carry, and two
	// epochs of an epoch lock.
	writer.ok(t, "put", writeTree(t, map[string]string{"a": "1", "b": "b"}), url) // the first commit probes the store
	writer.ok(t, "put", writeTree(t, map[string]string{"a": "2", "b": "b"}), url)
	writer.ok(t, "put", "--into", "part/", writeTree(t, map[string]string{"x": "3"}), url)
	writer.ok(t, "put", writeTree(t, map[string]string{"a": "4", "b": "b"}), url)
	root.ok(t, "tag", url, "release", "--seq", "1")
	root.ok(t, "pin", "--seq", "3", "--ttl", "1h", url)
	root.ok(t, "pin", "--seq", "2", "--ttl", "1ms", url)
	root.ok(t, "job", "begin", "--job", "j1", url)
	// By then the leftover is older than the collector's orphan age, and
	// the 1 ms pin has expired by the store's clock: its age must reach
	// the TTL plus a second, judged on a Date that whole seconds truncate.
	leftUntil := time.Now().Add(3 * time.Second)
	interruptedUpload(t, srv, bucket, prefix+"/"+generation.Dir+newGen(t)+"/big")
	putObject(t, s, commit.IntentDir+newGen(t)+"/"+newGen(t), "{}")
	putObject(t, s, lease.EpochKey("batch", 1), "{}")
	putObject(t, s, lease.EpochKey("batch", 2), "{}")

	// A put the dataset refuses after it staged: it deletes what it staged.
	root.ok(t, "fences", "--require", url)
	r := writer.run(t, "put", writeTree(t, map[string]string{"a": "refused"}), url)
	require.Equal(t, exitFenced, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.NotContains(t, r.stderr, "could not delete")
	root.ok(t, "fences", "--allow-unfenced", url)

	// A put --into on a head open to group commit, where another writer
	// is at work (root's intent on the head): it joins the round, carries
	// it, and deletes the round's intents.
	head := openHead(t, s)
	putObject(t, s, commit.IntentDir+head+"/"+newGen(t), "{}")
	writer.ok(t, "put", "--into", "late/", writeTree(t, map[string]string{"y": "y"}), url)
	assert.Empty(t, listKeys(t, s, commit.IntentDir+head+"/"), "the writer deleted the round's intents")

	time.Sleep(time.Until(leftUntil))
	gcOut := collector.ok(t, "gc", "--keep", "0", "--grace", "0s", "--orphan-age", "0s", url)
	for _, want := range []string{
		"expired pins dropped: 1", "abandoned or finished jobs dropped: 1",
		"dead group-commit intents dropped: 1", "leftovers of interrupted writes removed: 1",
	} {
		assert.Contains(t, gcOut, want)
	}
	assert.Regexp(t, `deleted \(superseded\): [1-9]`, gcOut)
	collector.ok(t, "gc", url) // the collector's lease exists now

	dest := t.TempDir()
	assert.Contains(t, reader.ok(t, "ls", url), "late/y")
	assert.Equal(t, "4", reader.ok(t, "cat", url, "a"))
	reader.ok(t, "get", url, filepath.Join(dest, "get"))
	reader.ok(t, "sync", url, filepath.Join(dest, "sync"))
	assert.Equal(t, "3", reader.ok(t, "cat", "--seq", "3", url, "part/x"), "seq 3 through its pin: the seq after it is collected")
	assert.Equal(t, "1", reader.ok(t, "cat", "--seq", "1", url, "a"), "seq 1 through its tag")
	reader.ok(t, "get", "--tag", "release", url, filepath.Join(dest, "release"))

	auditor.ok(t, "log", url)
	auditor.ok(t, "show", url)
	auditor.ok(t, "show", "--seq", "3", url)
	auditor.ok(t, "diff", url, "tag:release", "3")
	auditor.ok(t, "verify", url)
	auditor.ok(t, "verify", "--all", url)
	auditor.ok(t, "gc", "--dry-run", url)

	acquired := leaseUser.ok(t, "lease", "acquire", url, "maintenance") // the lease's first use probes the store
	token := regexp.MustCompile(`token (\d+)`).FindStringSubmatch(acquired)
	require.NotNil(t, token, acquired)
	leaseUser.ok(t, "lease", "status", url, "maintenance")
	leaseUser.ok(t, "lease", "release", url, "maintenance", "--token", token[1])
	leaseUser.ok(t, "run", "--lease", "nightly", url, "--", "true")
	leaseUser.ok(t, "run", "--lease", "nightly", url, "--", "true")

	assert.Contains(t, writer.ok(t, "rollback", url, "--to", "1"), "the files of seq 1", "through the tag, below the collector's floor")
	assert.Contains(t, writer.ok(t, "rollback", url, "--to", "3"), "the files of seq 3", "through the pin")

	for _, role := range iamRoles {
		for _, c := range role.commands {
			assert.True(t, as[role.name].ran(c), "the %s did not run %q", role.name, c)
		}
		requests := srv.Requests(t, as[role.name].user.AccessKey)
		for _, q := range requests {
			assert.NotEqual(t, 403, q.Status, "the %s was denied %+v", role.name, q)
		}
		for _, g := range role.unused(t, prefix, requests) {
			t.Errorf("the %s's policy grants %q, which none of its requests used", role.name, g)
		}
	}

	root.ok(t, "put", writeTree(t, map[string]string{"c": "c"}), "s3://"+bucket+"/other")
	for _, c := range []struct {
		as   *roleUser
		args []string
	}{
		{reader, []string{"put", writeTree(t, map[string]string{"a": "5"}), url}},
		{reader, []string{"ls", "s3://" + bucket + "/other"}},
		{writer, []string{"gc", url}},
		{collector, []string{"put", writeTree(t, map[string]string{"a": "6"}), url}},
		{leaseUser, []string{"ls", url}},
		{auditor, []string{"gc", url}},
	} {
		r := c.as.run(t, c.args...)
		assert.Equal(t, exitError, r.code, "the %s: publish %s\nstdout: %s\nstderr: %s", c.as.name, strings.Join(c.args, " "), r.stdout, r.stderr)
		assert.Regexp(t, `publish: .*\b(get|head|put|list) "[^"]+": access denied: .*AccessDenied`, r.stderr,
			"the %s: publish %s: the message names the request refused", c.as.name, strings.Join(c.args, " "))
		t.Logf("the %s: publish %s: %s", c.as.name, strings.Join(c.args, " "), r.stderr)
	}
}

// roleUser runs the binary as the user of a role, and records what it ran.
type roleUser struct {
	target
	user *testenv.User
	args [][]string
}

func (u *roleUser) run(t *testing.T, args ...string) result {
	t.Helper()
	u.args = append(u.args, args)
	return u.target.run(t, args...)
}

func (u *roleUser) ok(t *testing.T, args ...string) string {
	t.Helper()
	u.args = append(u.args, args)
	return u.target.ok(t, args...)
}

// ran reports whether the user ran command, such as "put --into": a
// command line that begins with its first word and has the others.
func (u *roleUser) ran(command string) bool {
	words := strings.Fields(command)
	for _, args := range u.args {
		if args[0] == words[0] && !slices.ContainsFunc(words[1:], func(w string) bool { return !slices.Contains(args, w) }) {
			return true
		}
	}
	return false
}

// unused returns the grants of r, as untested names them, that none of
// requests used, leaving out those untested lists. A DeleteObjects
// request names no key in the log, so it counts for every s3:DeleteObject
// grant of the role; the test checks what those deleted by what is gone.
func (r iamRole) unused(t *testing.T, prefix string, requests []testenv.Request) []string {
	t.Helper()
	used := func(action, key string) bool {
		for _, q := range requests {
			a, ok := requestActions[q.Op]
			require.True(t, ok, "a request the roles' test does not know: %+v", q)
			switch {
			case a != action:
			case key == "":
				return true
			case a == s3ListBucket:
				if wildcardMatch(prefix+"/"+key, q.Prefix) {
					return true
				}
			case q.Op == "s3_DeleteObjects" || wildcardMatch(prefix+"/"+key, q.Key):
				return true
			}
		}
		return false
	}
	var unused []string
	check := func(action, key string) {
		name := strings.TrimSpace(action + " " + key)
		if _, ok := r.untested[name]; !ok && !used(action, key) {
			unused = append(unused, name)
		}
	}
	for _, g := range r.objects {
		for _, a := range g.actions {
			check(a, g.key)
		}
	}
	for _, p := range r.list {
		check(s3ListBucket, p)
	}
	for _, a := range r.bucket {
		check(a, "")
	}
	return unused
}

// requestActions maps the operations versitygw logs to the action that
// authorizes them.
var requestActions = map[string]string{
	"s3_GetObject":               s3GetObject,
	"s3_HeadObject":              s3GetObject,
	"s3_PutObject":               s3PutObject,
	"s3_CreateMultipartUpload":   s3PutObject,
	"s3_UploadPart":              s3PutObject,
	"s3_CompleteMultipartUpload": s3PutObject,
	"s3_DeleteObject":            s3DeleteObject,
	"s3_DeleteObjects":           s3DeleteObject,
	"s3_AbortMultipartUpload":    s3AbortMultipartUpload,
	"s3_ListParts":               s3ListMultipartUploadParts,
	"s3_ListObjectsV2":           s3ListBucket,
	"s3_ListMultipartUploads":    s3ListBucketMultipartUploads,
	"s3_GetBucketVersioning":     s3GetBucketVersioning,
}

// wildcardMatch reports whether s matches pattern, in which * stands for
// any run of characters, slashes included, as in IAM policies.
func wildcardMatch(pattern, s string) bool {
	before, after, found := strings.Cut(pattern, "*")
	if !found {
		return pattern == s
	}
	if !strings.HasPrefix(s, before) {
		return false
	}
	for i := len(before); i <= len(s); i++ {
		if wildcardMatch(after, s[i:]) {
			return true
		}
	}
	return false
}

// openHead commits, in process, a generation that rebased three times:
// three commits land while it commits, each just before one of its
// pointer writes. Its value is open to group commit (PROTOCOL.md, G3). It
// returns the value's write id.
func openHead(t *testing.T, s store.Store) string {
	t.Helper()
	ctx := context.Background()
	rivals := 0
	racing := &beforePointerWrite{Store: s, before: func() {
		if rivals == 3 {
			return
		}
		rivals++
		tx, err := commit.New(s).Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.KeepAll(ctx))
		require.NoError(t, tx.PutBytes(ctx, fmt.Sprintf("rival/%d", rivals), []byte("r")))
		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(t, err)
	}}
	tx, err := commit.New(racing).Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.EnableRebase(commit.Rebase{}))
	require.NoError(t, tx.KeepAll(ctx))
	require.NoError(t, tx.PutBytes(ctx, "opened", []byte("o")))
	p, err := tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(t, err)
	require.Equal(t, 3, tx.Rebased())
	return p.WriteID
}

// beforePointerWrite calls before ahead of every write of the pointer.
type beforePointerWrite struct {
	store.Store
	before func()
}

func (s *beforePointerWrite) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	if key == pointer.Key {
		s.before()
	}
	return s.Store.Put(ctx, key, body, opts)
}

// interruptedUpload starts a multipart upload of key in bucket, uploads a
// part and leaves it, as a writer killed midway does.
func interruptedUpload(t *testing.T, srv *testenv.S3Server, bucket, key string) {
	t.Helper()
	ctx := context.Background()
	c := srv.Client()
	up, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key})
	require.NoError(t, err)
	_, err = c.UploadPart(ctx, &awss3.UploadPartInput{
		Bucket: &bucket, Key: &key, UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("part")),
	})
	require.NoError(t, err)
}

func putObject(t *testing.T, s store.Store, key, body string) {
	t.Helper()
	_, err := s.Put(context.Background(), key, strings.NewReader(body), store.PutOptions{})
	require.NoError(t, err)
}

func listKeys(t *testing.T, s store.Store, prefix string) []string {
	t.Helper()
	var keys []string
	for o, err := range store.List(context.Background(), s, prefix, "", "") {
		require.NoError(t, err)
		keys = append(keys, o.Key)
	}
	return keys
}

func newGen(t *testing.T) string {
	t.Helper()
	id, err := generation.New()
	require.NoError(t, err)
	return id
}
