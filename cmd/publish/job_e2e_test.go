package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/job"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/store"
)

// TestJobOfManyTaskProcesses: task processes stage the parts of one
// output (64 on the S3 test server, 6 elsewhere, 16 at a time), some tasks
// run two attempts at once, and one attempt is killed mid-upload and run
// again. Nothing is visible before 'job commit'; after it every part is,
// each exactly one attempt's, and the job's records are gone; a second
// 'job commit' reports the same generation.
func TestJobOfManyTaskProcesses(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			tasks := 6
			if tg.name == "s3" {
				tasks = 64
			}
			url := tg.url(t)
			id := strings.TrimSpace(tg.ok(t, "job", "begin", "--job", "run-1", url))
			require.Equal(t, "run-1", id)
			srcs := make([]string, tasks)
			for i := range tasks {
				srcs[i] = writeTree(t, map[string]string{fmt.Sprintf("part-%d", i): "task " + strconv.Itoa(i)})
			}
			// The attempt killed mid-upload: a file large enough to be
			// still uploading when the log says staging.
			big := writeTree(t, map[string]string{"part-0": strings.Repeat("k", 8<<20)})
			killed := tg.command(t, "-v", "job", "put", "--job", id, "--task", "t0", "--attempt", "killed", big, url)
			stderr, err := killed.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, killed.Start())
			var log bytes.Buffer
			buf := make([]byte, 4096)
			for !strings.Contains(log.String(), "staging") {
				n, err := stderr.Read(buf)
				log.Write(buf[:n])
				require.NoError(t, err, log.String())
			}
			require.NoError(t, killed.Process.Signal(syscall.SIGKILL))
			go io.Copy(io.Discard, stderr) //nolint:errcheck // drained until the process is gone
			_ = killed.Wait()

			// Every fifth task from t1 on also runs a speculative second
			// attempt, at the same time as its first.
			twice := func(i int) bool { return i%5 == 1 }
			firsts := make([]result, tasks)
			seconds := make([]result, tasks)
			var wg sync.WaitGroup
			slots := make(chan struct{}, 16)
			for i := range tasks {
				for _, a := range []string{"a1", "a2"} {
					if a == "a2" && !twice(i) {
						continue
					}
					wg.Go(func() {
						slots <- struct{}{}
						defer func() { <-slots }()
						r := tg.run(t, "job", "put", "--job", id, "--task", "t"+strconv.Itoa(i), "--attempt", a, srcs[i], url)
						if a == "a1" {
							firsts[i] = r
						} else {
							seconds[i] = r
						}
					})
				}
			}
			wg.Wait()
			for i := range tasks {
				if !twice(i) {
					require.Equal(t, exitOK, firsts[i].code, "task %d: %s", i, firsts[i].stderr)
					continue
				}
				assert.ElementsMatch(t, []int{exitOK, exitLost}, []int{firsts[i].code, seconds[i].code}, "exactly one attempt of t%d wins: %s / %s", i, firsts[i].stderr, seconds[i].stderr)
				loser := firsts[i]
				if loser.code == exitOK {
					loser = seconds[i]
				}
				assert.Contains(t, loser.stderr, "won")
			}

			r := tg.run(t, "ls", url)
			assert.NotEqual(t, exitOK, r.code, "nothing is visible before the job commit: %s", r.stdout)

			var st jobStatusInfo
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "--json", "job", "status", "--job", id, url)), &st))
			assert.Equal(t, "open", st.State)
			assert.Len(t, st.Tasks, tasks)

			var first, again jobCommitInfo
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "--json", "job", "commit", "--job", id, "--expect-tasks", strconv.Itoa(tasks), url)), &first))
			assert.False(t, first.Recovered)
			require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "--json", "job", "commit", "--job", id, "--expect-tasks", strconv.Itoa(tasks), url)), &again))
			assert.True(t, again.Recovered)
			assert.Equal(t, first.Generation, again.Generation, "committed once")

			dest := filepath.Join(t.TempDir(), "out")
			tg.ok(t, "get", url, dest)
			want := map[string]string{}
			for i := range tasks {
				want[fmt.Sprintf("part-%d", i)] = "task " + strconv.Itoa(i)
			}
			assert.Equal(t, want, readTree(t, dest), "every part, each exactly one attempt's")

			s := tg.open(t, url)
			ctx := context.Background()
			d := commit.New(s)
			snap, err := d.Open(ctx)
			require.NoError(t, err)
			gens := map[string]bool{}
			for _, e := range snap.Files() {
				gens[generation.FromKey(e.Key)] = true
			}
			assert.Len(t, gens, tasks, "each part from its own attempt's generation")
			for o, err := range store.List(ctx, s, job.Dir, "", "") {
				require.NoError(t, err)
				assert.Equal(t, job.Prefix(id)+"commit", o.Key, "only the commit record is left")
			}

			// Nothing is left in staging after gc: the losing and the
			// killed attempts' objects are orphans, the commit record goes
			// with the orphan age, once the store's clock (whole seconds)
			// is past the newest of them.
			var newest time.Time
			for o, err := range store.List(ctx, s, "", "", "") {
				require.NoError(t, err)
				if o.LastModified.After(newest) {
					newest = o.LastModified
				}
			}
			for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
				a, err := s.Head(ctx, "_pointer")
				require.NoError(t, err)
				if a.ServerTime.After(newest) {
					break
				}
				require.Less(t, time.Since(start), time.Minute, "the store's clock stands still at %v", a.ServerTime)
			}
			tg.ok(t, "gc", "--orphan-age", "0", url)
			kept := map[string]bool{generation.ManifestKey(snap.Generation()): true}
			for _, e := range snap.Files() {
				kept[e.Key] = true
			}
			for o, err := range store.List(ctx, s, "", "", "") {
				require.NoError(t, err)
				if strings.HasPrefix(o.Key, "_lease/") || o.Key == "_pointer" {
					continue
				}
				assert.True(t, kept[o.Key], "left after gc: %s", o.Key)
			}
		})
	}
}

// TestJobBegunWithAFenceCommitsFencedByIt: 'job begin' under a fencing
// token (flags, or what 'publish run' exports) registers it, and the job's
// commit is refused with exit 6 once a higher token of the lease was
// registered.
func TestJobBegunWithAFenceCommitsFencedByIt(t *testing.T) {
	tg := targets(t)[0]
	url := tg.url(t)
	src := writeTree(t, map[string]string{"part-0": "0"})
	id, err := lease.Identity(url, "a")
	require.NoError(t, err)
	tg.ok(t, "put", writeTree(t, map[string]string{"base": "b"}), url)

	tg.ok(t, "job", "begin", "--job", "j1", "--fence", "3", "--fence-lease", id, url)
	var fences fencesResult
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "fences", "--json", url)), &fences))
	assert.Equal(t, map[string]uint64{id: 3}, fences.Fences, "begin registered the token")
	tg.ok(t, "job", "put", "--job", "j1", "--task", "t0", src, url)
	// A writer with a higher token of the lease commits first.
	tg.ok(t, "put", "--fence", "4", "--fence-lease", id, src, url)
	r := tg.run(t, "job", "commit", "--job", "j1", url)
	assert.Equal(t, exitFenced, r.code, r.stderr)

	r = tg.run(t, "job", "begin", "--job", "j2", "--fence", "2", "--fence-lease", id, url)
	assert.Equal(t, exitFenced, r.code, "a lower token is refused at begin: %s", r.stderr)

	// Under 'publish run', begin takes run's token from the environment.
	inner := append(append([]string{testenv.PublishBinary(t)}, tg.flags...), "job", "begin", "--job", "j3", url)
	tg.ok(t, append([]string{"run", "--lease", "nightly", url, "--"}, inner...)...)
	nightly, err := lease.Identity(url, "nightly")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "fences", "--json", url)), &fences))
	assert.Equal(t, uint64(1), fences.Fences[nightly], "begin registered run's token")
	tg.ok(t, "job", "put", "--job", "j3", "--task", "t0", src, url)
	tg.ok(t, "job", "commit", "--job", "j3", url)
}
