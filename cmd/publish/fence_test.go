package main

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/lease"
)

// TestFencesPerLeaseCLI: a fenced commit under one lease no longer locks
// every other writer out. After 'run --lease nightly -- publish put', a
// rollback and a plain put still commit; two leases whose tokens differ
// both commit; a lower token of the same lease is refused.
func TestFencesPerLeaseCLI(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			src := writeTree(t, map[string]string{"f": "1"})
			tg.ok(t, "put", src, url)

			// put under run: the token of run's lease, with its identity.
			src2 := writeTree(t, map[string]string{"f": "2"})
			inner := append(append([]string{testenv.PublishBinary(t)}, tg.flags...), "put", "--json", src2, url)
			out := tg.ok(t, append([]string{"run", "--lease", "nightly", url, "--"}, inner...)...)
			var put putResult
			require.NoError(t, json.Unmarshal([]byte(out), &put))
			id, err := lease.Identity(url, "nightly")
			require.NoError(t, err)
			assert.Equal(t, uint64(1), put.Fence)
			assert.Equal(t, id, put.FenceLease)

			tg.ok(t, "rollback", "--to", "1", url)
			tg.ok(t, "put", src, url)

			// Lease a reaches token 6, lease b is new: both commit.
			for range 5 {
				var got leaseResult
				require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "lease", "acquire", "--json", url, "a")), &got))
				tg.ok(t, "lease", "release", url, "a", "--token", strconv.FormatUint(got.Token, 10))
			}
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "put", "--json", "--lease", "a", src2, url)), &put))
			assert.Equal(t, uint64(6), put.Fence)
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "put", "--json", "--lease", "b", src, url)), &put))
			assert.Equal(t, uint64(1), put.Fence, "lease b's token 1 is not compared with lease a's 6")

			idA, err := lease.Identity(url, "a")
			require.NoError(t, err)
			r := tg.run(t, "put", "--fence", "5", "--fence-lease", idA, src, url)
			assert.Equal(t, exitFenced, r.code, r.stderr)
			assert.Contains(t, r.stderr, "token 5 of lease "+idA)

			var fences fencesResult
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "fences", "--json", url)), &fences))
			assert.Equal(t, map[string]uint64{id: 1, idA: 6, must(lease.Identity(url, "b")): 1}, fences.Fences)

			// Fenced writers only, then back.
			tg.ok(t, "fences", "--require", url)
			r = tg.run(t, "put", src2, url)
			assert.Equal(t, exitFenced, r.code, r.stderr)
			assert.Contains(t, r.stderr, "fenced writers only")
			tg.ok(t, "put", "--lease", "b", src2, url)
			tg.ok(t, "fences", "--allow-unfenced", url)
			tg.ok(t, "put", src, url)

			// Forgetting lease a's fence re-admits its lower token.
			var left fencesResult
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "fences", "--json", "--forget", idA, url)), &left))
			assert.Equal(t, map[string]uint64{id: 1, must(lease.Identity(url, "b")): 2}, left.Fences)
			tg.ok(t, "put", "--fence", "5", "--fence-lease", idA, src2, url)
			r = tg.run(t, "fences", "--forget", "s3://nowhere/_lease/x", url)
			assert.Equal(t, exitError, r.code, r.stderr)
			assert.Contains(t, r.stderr, "s3://nowhere/_lease/x")
		})
	}
}

// TestFenceNeedsLeaseIdentity: a token without the identity of its lease is
// refused before anything is written, not compared with another lease's.
func TestFenceNeedsLeaseIdentity(t *testing.T) {
	u := memURL()
	src := writeTree(t, map[string]string{"f": "x"})
	t.Setenv("COMMITPTR_LEASE_ID", "")
	os.Unsetenv("COMMITPTR_LEASE_ID")
	t.Setenv("COMMITPTR_FENCE", "3")
	code, _, errs := cli(t, "", "put", src, u)
	assert.Equal(t, exitUsage, code, errs)
	assert.Contains(t, errs, "COMMITPTR_LEASE_ID")
	code, _, errs = cli(t, "", "put", "--fence", "3", src, u)
	assert.Equal(t, exitUsage, code, errs)
	code, _, errs = cli(t, "", "put", "--lease", "w", "--fence", "3", "--fence-lease", "x", src, u)
	assert.Equal(t, exitUsage, code, errs)
	code, _, errs = cli(t, "", "show", u)
	assert.NotEqual(t, 0, code, "nothing was committed: %s", errs)

	t.Setenv("COMMITPTR_LEASE_ID", "file:///locks/_lease/job")
	ok(t, "put", src, u)
	assert.Regexp(t, `fence +3 \(file:///locks/_lease/job\)`, ok(t, "show", u))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
