package main

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
)

// TestPutWhoseCleanupIsDeniedSaysWhatItLeft: a writer that may not ask
// whether the bucket keeps versions, which a delete asks first, cannot
// delete what it wrote and then drops: the probe's scratch object at the
// first commit, and what a put staged before the dataset refused its
// commit. Each time it says what it left, why, and how to remove it; and
// 'publish gc' does remove the staged objects, as it says.
func TestPutWhoseCleanupIsDeniedSaysWhatItLeft(t *testing.T) {
	srv := testenv.IAMS3(t)
	srv.UseCredentials()
	ctx := context.Background()
	bucket := srv.NewBucket(t)
	url := "s3://" + bucket + "/daily"
	flags := []string{"--endpoint", srv.Endpoint, "--path-style"}
	root := target{name: "root", flags: flags, env: srv.Env(), secret: srv.SecretKey}
	role := iamRoles[slices.IndexFunc(iamRoles, func(r iamRole) bool { return r.name == "writer" })]
	role.bucket = nil
	u := srv.NewUser(t, "writer", []byte(role.policy(bucket, "daily")))
	writer := target{name: "writer", flags: flags, env: u.Env(), secret: u.SecretKey}
	s, err := store.Open(ctx, url, store.Config{Endpoint: srv.Endpoint, PathStyle: true})
	require.NoError(t, err)

	r := writer.run(t, "put", writeTree(t, map[string]string{"a": "1"}), url)
	require.Equal(t, exitOK, r.code, r.stderr)
	probe := regexp.MustCompile(`left the probe's scratch object (_probe/\S+) of ` + regexp.QuoteMeta(url) + `: deleting it failed: .*s3:GetBucketVersioning`).FindStringSubmatch(r.stderr)
	require.NotNil(t, probe, r.stderr)
	assert.Contains(t, r.stderr, "delete it yourself")
	assert.Equal(t, []string{probe[1]}, listKeys(t, s, store.ProbePrefix))

	root.ok(t, "fences", "--require", url)
	r = writer.run(t, "put", writeTree(t, map[string]string{"a": "2"}), url)
	require.Equal(t, exitFenced, r.code, r.stderr)
	staged := regexp.MustCompile(`left 2 objects under (_gen/[0-9a-f-]+/) of ` + regexp.QuoteMeta(url) + `: deleting what it staged failed: .*s3:GetBucketVersioning`).FindStringSubmatch(r.stderr)
	require.NotNil(t, staged, r.stderr)
	assert.Contains(t, r.stderr, "nothing references them: 'publish gc' deletes them once older than its --orphan-age (24h by default), or delete them yourself")
	assert.Len(t, listKeys(t, s, staged[1]), 2, "the file and the manifest")

	time.Sleep(1100 * time.Millisecond) // older than the orphan age, which the store's clock judges to the second
	root.ok(t, "gc", "--orphan-age", "0s", url)
	assert.Empty(t, listKeys(t, s, staged[1]), "gc deleted what the put left")
}
