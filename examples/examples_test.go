// Package examples holds runnable programs, one per directory. This test
// builds each of them and runs it against a local (file://) store,
// checking its output.
package examples

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// bin builds all examples once and returns the path of one.
func bin(t *testing.T, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "commitptr-examples-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+string(filepath.Separator),
			"./batch-publish", "./snapshot-reader", "./rmw-counter", "./leader-election", "../cmd/publish")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = err
			binDir = string(out)
		}
	})
	require.NoError(t, buildErr, "build examples: %s", binDir)
	return filepath.Join(binDir, name)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" && buildErr == nil {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin(t, name), args...).CombinedOutput()
	require.NoError(t, err, "%s %v:\n%s", name, args, out)
	return string(out)
}

func storeURL(t *testing.T) string {
	return "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "store"))
}

func TestBatchPublish(t *testing.T) {
	url := storeURL(t)
	out := run(t, "batch-publish", "-runs", "3", url)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	for i, line := range lines {
		assert.Contains(t, line, "committed seq "+strconv.Itoa(i+1))
		assert.Contains(t, line, "4 files")
	}
	// Later runs reuse the unchanged files instead of uploading them.
	assert.Contains(t, lines[2], "2 reused")

	d, err := commitptr.Open(context.Background(), url)
	require.NoError(t, err)
	snap, err := d.Open(context.Background())
	require.NoError(t, err)
	b, err := snap.ReadFile(context.Background(), "report.csv")
	require.NoError(t, err)
	assert.Equal(t, "run,total\n3,300\n", string(b))
}

func TestSnapshotReader(t *testing.T) {
	out := run(t, "snapshot-reader", "-commits", "15", storeURL(t))
	assert.Contains(t, out, "writer: 15 commits")
	assert.Regexp(t, `reader: [1-9][0-9]* snapshots, each consistent, seqs \d+\.\.15`, out)
}

func TestRMWCounter(t *testing.T) {
	const procs, each = 4, 10
	url := storeURL(t)
	var wg sync.WaitGroup
	outs := make([]string, procs)
	for i := range procs {
		wg.Go(func() { outs[i] = run(t, "rmw-counter", "-n", strconv.Itoa(each), url, "counter") })
	}
	wg.Wait()
	for _, out := range outs {
		assert.Contains(t, out, "incremented 10 times")
	}
	d, err := commitptr.Open(context.Background(), url)
	require.NoError(t, err)
	rc, _, err := d.Store().Get(context.Background(), "counter")
	require.NoError(t, err)
	defer rc.Close()
	b := make([]byte, 32)
	n, _ := rc.Read(b)
	assert.Equal(t, strconv.Itoa(procs*each), strings.TrimSpace(string(b[:n])), "no increment may be lost")
}

func TestLeaderElection(t *testing.T) {
	const workers, terms = 3, 2
	url, check := storeURL(t), t.TempDir()
	var wg sync.WaitGroup
	outs := make([]string, workers)
	for i := range workers {
		wg.Go(func() {
			outs[i] = run(t, "leader-election", "-id", "w"+strconv.Itoa(i), "-terms", strconv.Itoa(terms),
				"-hold", "100ms", "-check", check, url)
		})
	}
	wg.Wait()

	// Every term got its own token, and the tokens are 1..workers*terms.
	re := regexp.MustCompile(`(w\d) leader token (\d+)`)
	var tokens []int
	for _, out := range outs {
		for _, m := range re.FindAllStringSubmatch(out, -1) {
			n, _ := strconv.Atoi(m[2])
			tokens = append(tokens, n)
		}
	}
	slices.Sort(tokens)
	want := make([]int, workers*terms)
	for i := range want {
		want[i] = i + 1
	}
	require.Equal(t, want, tokens, strings.Join(outs, "\n"))

	// The leaders' fenced commits landed in token order.
	ctx := context.Background()
	d, err := commitptr.Open(ctx, url)
	require.NoError(t, err)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(workers*terms), snap.Pointer.Fence)
	log, err := snap.ReadFile(ctx, "leaders.log")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	require.Len(t, lines, workers*terms)
	for i, line := range lines {
		assert.True(t, strings.HasPrefix(line, strconv.Itoa(i+1)+" "), "line %d of leaders.log: %q", i, line)
	}
}

// TestFanOutJob runs the fan-out example: 16 tasks through xargs -P, one of
// them attempted twice at once, and one job commit that publishes every
// part.
func TestFanOutJob(t *testing.T) {
	url := storeURL(t)
	cmd := exec.Command("bash", "fan-out-job/fan-out.sh", url, "16", "8")
	cmd.Env = append(os.Environ(), "PUBLISH="+bin(t, "publish"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Regexp(t, `job \S+: open, 16 tasks`, string(out))
	assert.Regexp(t, `job \S+ committed: seq 1 generation`, string(out))

	d, err := commitptr.Open(context.Background(), url)
	require.NoError(t, err)
	snap, err := d.Open(context.Background())
	require.NoError(t, err)
	require.Len(t, snap.Files(), 16)
	b, err := snap.ReadFile(context.Background(), "part-7.txt")
	require.NoError(t, err)
	assert.Equal(t, "part 7\n", string(b))
}
