package reliability_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	_ "github.com/commitptr/commitptr/store/fs" // registers file://
	"github.com/commitptr/commitptr/store/s3"
)

// crashTarget is where the crash trials publish: a dataset URL for the
// CLI, and the same dataset as a store for verification.
type crashTarget struct {
	name  string
	flags []string // global flags
	env   []string
	// coarseClock: the store's Date header has a resolution of one second,
	// and a collection keeps orphans written within the second of its
	// clock reading, even with no orphan age.
	coarseClock bool
	// dataset returns the URL and store of a fresh dataset.
	dataset func(t *testing.T, name string) (string, store.Store)
}

func crashTargets(t *testing.T) []crashTarget {
	fsTarget := crashTarget{name: "fs", dataset: func(t *testing.T, name string) (string, store.Store) {
		dir := filepath.Join(t.TempDir(), name)
		s, err := store.Open(context.Background(), dir, store.Config{})
		require.NoError(t, err)
		return "file://" + dir, s
	}}
	if !long() {
		return []crashTarget{fsTarget}
	}
	srv := testenv.S3(t)
	bucket := srv.NewBucket(t)
	s3Target := crashTarget{
		name:        "s3",
		flags:       []string{"--endpoint", srv.Endpoint, "--path-style"},
		env:         srv.Env(),
		coarseClock: true,
		dataset: func(t *testing.T, name string) (string, store.Store) {
			srv.UseCredentials()
			s, err := s3.New(context.Background(), s3.Options{Bucket: bucket, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true})
			require.NoError(t, err)
			return "s3://" + bucket + "/" + name, store.WithPrefix(s, name+"/")
		},
	}
	return []crashTarget{fsTarget, s3Target}
}

// crashTrials is the number of trials per command and target.
func crashTrials() int {
	if long() {
		return 200
	}
	return 20
}

// proc is a started publish process.
type proc struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func (tg crashTarget) start(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(testenv.PublishBinary(t), append(slices.Clone(tg.flags), args...)...)
	cmd.Env = append(os.Environ(), tg.env...)
	p := &proc{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	require.NoError(t, cmd.Start())
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p
}

// killAfter SIGKILLs the process after d unless it exited first. It
// reports whether the process was killed, and its exit code otherwise.
func (p *proc) killAfter(d time.Duration) (killed bool, code int) {
	select {
	case <-p.done:
	case <-time.After(d):
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return true, -1
		}
	}
	return false, p.cmd.ProcessState.ExitCode()
}

// run runs a publish command to completion and returns its output.
func (tg crashTarget) run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	p := tg.start(t, args...)
	_, code := p.killAfter(2 * time.Minute)
	return p.out.String(), code
}

// writeSrc writes a source directory for trial i: a few files that stay
// the same across trials (so puts are incremental) and a few that change.
func writeSrc(t *testing.T, dir string, i int) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for k := range 6 {
		files[fmt.Sprintf("stable/%d.bin", k)] = bytes.Repeat([]byte{byte('a' + k)}, 4096*(k+1))
	}
	for k := range 24 {
		files[fmt.Sprintf("trial/%02d.txt", k)] = []byte(strings.Repeat(fmt.Sprintf("trial %d file %d\n", i, k), 100*(k+1)))
	}
	require.NoError(t, os.RemoveAll(dir))
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, b, 0o644))
	}
	return files
}

// snapshotFiles reads every file of the current generation, verified
// (I1), or returns nil if there is no commit.
func snapshotFiles(t *testing.T, s store.Store) (*commit.Snapshot, map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	snap, err := commit.New(s).Open(ctx)
	if errors.Is(err, commit.ErrNoCommits) {
		return nil, nil
	}
	require.NoError(t, err, "I1: the pointer resolves")
	files := map[string][]byte{}
	for _, e := range snap.Files() {
		b, err := snap.ReadFile(ctx, e.Path)
		require.NoError(t, err, "I1: %q of generation %s", e.Path, snap.Generation())
		files[e.Path] = b
	}
	return snap, files
}

// checkAfterPut asserts I1 and I2 after a put that may have been killed:
// the pointer is where it was, or one commit further and holding exactly
// the source files.
func checkAfterPut(t *testing.T, s store.Store, before *commit.Snapshot, src map[string][]byte, completed bool) (committed bool) {
	t.Helper()
	snap, files := snapshotFiles(t, s)
	require.NotNil(t, snap, "I2: the pointer vanished")
	switch {
	case snap.Seq() == before.Seq():
		require.Equal(t, before.Generation(), snap.Generation(), "I2: seq %d changed generation", snap.Seq())
		require.False(t, completed, "I2: put exited 0 but its commit is not the pointer's value")
		return false
	case snap.Seq() == before.Seq()+1:
		require.Equal(t, before.Generation(), snap.Manifest.Parent, "I2: the new generation is not built on the old")
		require.Equal(t, len(src), len(files), "I1: the committed generation has the wrong files")
		for p, b := range src {
			require.True(t, bytes.Equal(b, files[p]), "I1: %q differs from the source", p)
		}
		return true
	}
	t.Fatalf("I2: pointer went from seq %d to %d after one put", before.Seq(), snap.Seq())
	return false
}

// checkCollected asserts I7 after a collection that ran to completion
// with --keep keep and no orphan age: every key left under _gen/ belongs
// to, or is referenced by, a retained generation.
func checkCollected(t *testing.T, s store.Store, keep int) {
	t.Helper()
	ctx := context.Background()
	d := commit.New(s)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	marked := map[string]bool{}
	n := 0
	for m, err := range d.History(ctx, snap) {
		if err != nil || n > keep {
			break
		}
		n++
		marked[m.Generation] = true
		for _, k := range m.Keys() {
			marked[k] = true
		}
	}
	var left []string
	for o, err := range store.List(ctx, s, generation.Dir, "", "") {
		require.NoError(t, err)
		if !marked[o.Key] && !marked[generation.FromKey(o.Key)] {
			left = append(left, o.Key)
		}
	}
	require.Empty(t, left, "I7: keys of lost, aborted or crashed writers survived a collection")
}

// calibrate runs fn three times to completion and returns 1.5 times the
// shortest duration it reports: kill delays are drawn from [0, that), so
// most kills land mid-flight and some runs complete.
func calibrate(fn func() time.Duration) time.Duration {
	d := min(fn(), fn(), fn())
	return max(d*3/2, 20*time.Millisecond)
}

// TestCrashPut SIGKILLs 'publish put' at random points. After each trial
// the pointer resolves completely (I1) and is either unchanged or the
// put's complete generation (I2); after a final collection past
// orphan-age nothing of the killed puts is left (I7).
func TestCrashPut(t *testing.T) {
	for _, tg := range crashTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			url, s := tg.dataset(t, "put")
			srcDir := filepath.Join(t.TempDir(), "src")
			writeSrc(t, srcDir, -1)
			out, code := tg.run(t, "put", srcDir, url)
			require.Zero(t, code, out)
			rnd := rand.New(rand.NewPCG(seed(t, 11), 0))
			cal := -2
			window := calibrate(func() time.Duration {
				writeSrc(t, srcDir, cal)
				cal--
				start := time.Now()
				out, code := tg.run(t, "put", srcDir, url)
				require.Zero(t, code, out)
				return time.Since(start)
			})
			var killed, committed int
			for i := range crashTrials() {
				before, _ := snapshotFiles(t, s)
				src := writeSrc(t, srcDir, i)
				p := tg.start(t, "put", srcDir, url)
				k, code := p.killAfter(time.Duration(rnd.Int64N(int64(window))))
				if k {
					killed++
				} else {
					require.Zero(t, code, "an unkilled put failed: %s", p.out.String())
				}
				if checkAfterPut(t, s, before, src, !k) {
					committed++
				}
			}
			if tg.coarseClock {
				time.Sleep(1100 * time.Millisecond)
			}
			dir, isFS := strings.CutPrefix(url, "file://")
			tmp := ""
			if isFS {
				tmp = fmt.Sprintf("; %d fs temp files left by killed writes", len(testenv.FSTempFiles(dir)))
			}
			out, code = tg.run(t, "gc", "--keep", "1", "--grace", "0", "--orphan-age", "0", url)
			require.Zero(t, code, out)
			checkCollected(t, s, 1)
			if isFS {
				require.Empty(t, testenv.FSTempFiles(dir), "I7: temp files of killed writes survived a collection")
			}
			t.Logf("CRASH put on %s: %d trials (kill window %s), %d killed, %d committed; I1 I2 I7 held%s",
				tg.name, crashTrials(), window.Round(time.Millisecond), killed, committed, tmp)
		})
	}
}

// TestCrashGC SIGKILLs 'publish gc' at random points while it collects
// superseded generations and orphans, each trial on a fresh dataset. After
// each trial the pointer is unchanged and resolves completely (I1, I2), and
// so does the ancestor the collector keeps (I4). Every fourth trial, once
// the killed collector's lease expires, an uninterrupted collection
// finishes the job (I7).
func TestCrashGC(t *testing.T) {
	for _, tg := range crashTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			ctx := context.Background()
			// dataset returns a fresh dataset holding superseded
			// generations and orphans.
			dataset := func(name string) (string, store.Store) {
				url, s := tg.dataset(t, name)
				d := commit.New(s, commit.WithWriter("crash-gc"))
				for k := range 5 {
					tx, err := d.Begin(ctx)
					require.NoError(t, err)
					require.NoError(t, tx.KeepAll(ctx))
					for f := range 4 {
						require.NoError(t, tx.PutBytes(ctx, fmt.Sprintf("d%d/f%d", k%2, f), []byte(fmt.Sprintf("%s commit %d file %d", name, k, f))))
					}
					_, err = tx.Commit(ctx, commit.CommitOptions{})
					require.NoError(t, err)
				}
				for range 2 {
					tx, err := d.Begin(ctx)
					require.NoError(t, err)
					require.NoError(t, tx.PutBytes(ctx, "orphan", []byte("never committed")))
				}
				return url, s
			}
			args := func(url string) []string {
				// The lease must outlive a renewal's round trip on a loaded
				// machine; a killed collector's lease then blocks the next
				// run for TTL + 1 s, which the loop below waits out.
				return []string{"gc", "--keep", "1", "--grace", "0", "--orphan-age", "0", "--lease-ttl", "3s", url}
			}
			rnd := rand.New(rand.NewPCG(seed(t, 12), 0))
			cal := 0
			window := calibrate(func() time.Duration {
				url, _ := dataset(fmt.Sprintf("gc-cal-%d", cal))
				cal++
				start := time.Now()
				out, code := tg.run(t, args(url)...)
				require.Zero(t, code, out)
				return time.Since(start)
			})
			var killed, finished int
			for i := range crashTrials() {
				url, s := dataset(fmt.Sprintf("gc-%d", i))
				before, _ := snapshotFiles(t, s)
				p := tg.start(t, args(url)...)
				k, code := p.killAfter(time.Duration(rnd.Int64N(int64(window))))
				if k {
					killed++
				} else {
					require.Zero(t, code, "an unkilled gc failed: %s", p.out.String())
				}
				snap, _ := snapshotFiles(t, s)
				require.Equal(t, before.Seq(), snap.Seq(), "I2: gc changed the pointer's seq")
				require.Equal(t, before.Generation(), snap.Generation(), "I2")
				parent, err := commit.New(s).OpenAt(ctx, strconv.FormatUint(snap.Seq()-1, 10))
				require.NoError(t, err, "I4: the kept ancestor")
				for _, e := range parent.Files() {
					_, err := parent.ReadFile(ctx, e.Path)
					require.NoError(t, err, "I4: %q of the kept ancestor", e.Path)
				}
				if i%4 != 0 {
					continue
				}
				if tg.coarseClock {
					time.Sleep(1100 * time.Millisecond)
				}
				var out string
				// A killed collector's lease expires after TTL + 1 s.
				for giveUp := time.Now().Add(30 * time.Second); ; {
					out, code = tg.run(t, args(url)...)
					if code != 4 || time.Now().After(giveUp) {
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
				require.Zero(t, code, out)
				checkCollected(t, s, 1)
				finished++
			}
			t.Logf("CRASH gc on %s: %d trials (kill window %s), %d killed, %d finished by a later run; I1 I2 I4 I7 held",
				tg.name, crashTrials(), window.Round(time.Millisecond), killed, finished)
		})
	}
}

// TestCrashRun SIGKILLs 'publish run', whose CMD is a 'publish put' with
// the lease's fencing token, at random points. run dies; its put may go on
// alone. After the put ends, the pointer resolves completely and is
// unchanged or the put's complete generation (I1, I2), and every few
// trials a new run takes the lease over once it expires.
func TestCrashRun(t *testing.T) {
	for _, tg := range crashTargets(t) {
		t.Run(tg.name, func(t *testing.T) {
			bin := testenv.PublishBinary(t)
			srcDir := filepath.Join(t.TempDir(), "src")
			rnd := rand.New(rand.NewPCG(seed(t, 13), 0))
			runArgs := func(url string, extra ...string) []string {
				args := append([]string{"run", "--lease", "job", "--ttl", "2s", "--grace", "0.5s"}, extra...)
				args = append(args, url, "--", bin)
				args = append(args, tg.flags...)
				return append(args, "put", srcDir, url)
			}
			cal := 0
			window := calibrate(func() time.Duration {
				url, _ := tg.dataset(t, fmt.Sprintf("run-cal-%d", cal))
				cal++
				writeSrc(t, srcDir, -1)
				start := time.Now()
				out, code := tg.run(t, runArgs(url)...)
				require.Zero(t, code, out)
				return time.Since(start)
			})
			var killed, committed, takeovers int
			for i := range crashTrials() {
				url, s := tg.dataset(t, fmt.Sprintf("run-%d", i))
				writeSrc(t, srcDir, -1)
				out, code := tg.run(t, "put", srcDir, url)
				require.Zero(t, code, out)
				before, _ := snapshotFiles(t, s)
				src := writeSrc(t, srcDir, i)
				p := tg.start(t, runArgs(url)...)
				k, code := p.killAfter(time.Duration(rnd.Int64N(int64(window))))
				if k {
					killed++
					waitOrphans(t, srcDir) // run's put goes on alone
				} else {
					require.Zero(t, code, "an unkilled run failed: %s", p.out.String())
				}
				if checkAfterPut(t, s, before, src, !k) {
					committed++
				}
				if i%7 == 0 {
					// The lease of the killed run expires; the next run gets
					// it and commits with a higher token.
					src = writeSrc(t, srcDir, 1000+i)
					before, _ = snapshotFiles(t, s)
					out, code := tg.run(t, runArgs(url, "--wait", "20s")...)
					require.Zero(t, code, "a run after a killed one: %s", out)
					require.True(t, checkAfterPut(t, s, before, src, true))
					takeovers++
				}
			}
			t.Logf("CRASH run on %s: %d trials (kill window %s), %d killed, %d committed, %d takeovers after a kill; I1 I2 held",
				tg.name, crashTrials(), window.Round(time.Millisecond), killed, committed, takeovers)
		})
	}
}

// waitOrphans waits until no process of ours has marker in its command
// line (the put that a killed run left behind), and SIGKILLs by pid any
// that outlive a minute.
func waitOrphans(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		pids := findProcs(marker)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range pids {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Fatalf("processes %v running %q did not exit", pids, marker)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// findProcs returns the pids of this user's processes whose command line
// contains marker, other than this one.
func findProcs(marker string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(marker)) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && isZombie(st) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

func isZombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// writePartition writes a source directory for one partition in trial i.
func writePartition(t *testing.T, dir string, i int) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for k := range 8 {
		files[fmt.Sprintf("part-%02d.csv", k)] = []byte(strings.Repeat(fmt.Sprintf("trial %d part %d\n", i, k), 200*(k+1)))
	}
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for p, b := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), b, 0o644))
	}
	return files
}

// under returns the files of all below prefix, with the prefix cut.
func under(all map[string][]byte, prefix string) map[string][]byte {
	out := map[string][]byte{}
	for p, b := range all {
		if rest, ok := strings.CutPrefix(p, prefix); ok {
			out[rest] = b
		}
	}
	return out
}

// burstWriters is how many 'put --into' a trial of TestCrashPutInto starts
// together: enough that a commit of the burst rebases three times and opens
// its value to group-commit rounds (G3), so that the signalled put may lead
// a round, be carried by another's commit, or commit alone.
const burstWriters = 10

// TestCrashPutInto signals, at a random point, one 'publish put --into' of
// a burst of burstWriters, each of its own prefix. SIGKILL: the killed
// put's partition holds its old files or exactly its new ones, the other
// puts commit what they published, and every other partition is as it was
// (or holds what the put killed the trial before published: a commit of
// this trial may carry its intent). SIGSTOP until the others have exited,
// then SIGCONT: the paused put commits, by its own commit or carried by
// another's. After each trial the pointer resolves completely (I1); after
// a final collection nothing of the killed puts is left (I7). The history
// must hold commits that carried others.
func TestCrashPutInto(t *testing.T) {
	for _, tg := range crashTargets(t) {
		for _, stop := range []bool{false, true} {
			name := tg.name + "/kill"
			if stop {
				name = tg.name + "/stop"
			}
			t.Run(name, func(t *testing.T) { testCrashPutInto(t, tg, stop) })
		}
	}
}

func testCrashPutInto(t *testing.T, tg crashTarget, stop bool) {
	ctx := context.Background()
	name := "into-kill"
	if stop {
		name = "into-stop"
	}
	url, s := tg.dataset(t, name) // on s3 the targets share a bucket
	const parts = 4
	srcs := make([]string, parts)
	for k := range parts {
		srcs[k] = filepath.Join(t.TempDir(), "src")
		writePartition(t, srcs[k], -1-k)
		out, code := tg.run(t, "put", "--into", fmt.Sprintf("p%d/", k), srcs[k], url)
		require.Zero(t, code, out)
	}
	others := make([]string, burstWriters-1)
	for k := range others {
		others[k] = filepath.Join(t.TempDir(), "other")
	}
	rnd := rand.New(rand.NewPCG(seed(t, 17), 0))
	cal := -10
	window := calibrate(func() time.Duration {
		writePartition(t, srcs[0], cal)
		cal--
		start := time.Now()
		out, code := tg.run(t, "put", "--into", "p0/", srcs[0], url)
		require.Zero(t, code, out)
		return time.Since(start)
	})
	// The burst slows each put down: a window of twice the calibrated one
	// per pair of writers lets some of them finish.
	window *= burstWriters
	var signalled, committed, landedKilled, lateLanded int
	// zombie holds the files of a put killed in the trial before, whose
	// intent may still be carried by the next commit.
	zombie := map[string]map[string][]byte{}
	for i := range crashTrials() {
		_, before := snapshotFiles(t, s)
		victim := i % parts
		prefix := fmt.Sprintf("p%d/", victim)
		src := writePartition(t, srcs[victim], i)
		p := tg.start(t, "put", "--into", prefix, srcs[victim], url)
		want := make([]map[string][]byte, len(others))
		outs, codes := make([]string, len(others)), make([]int, len(others))
		var wg sync.WaitGroup
		for k, dir := range others {
			want[k] = writePartition(t, dir, i*len(others)+k)
			wg.Go(func() { outs[k], codes[k] = tg.run(t, "put", "--into", fmt.Sprintf("o%d/", k), dir, url) })
		}
		delay := time.Duration(rnd.Int64N(int64(window)))
		var hit bool
		var code int
		if stop {
			select {
			case <-p.done:
			case <-time.After(delay):
			}
			paused := stopHolder(t, p, srcs[victim])
			wg.Wait()
			for _, pid := range paused {
				syscall.Kill(pid, syscall.SIGCONT)
			}
			hit = len(paused) > 0
			_, code = p.killAfter(2 * time.Minute)
			require.Zero(t, code, "trial %d: a put --into paused (%v) and resumed failed: %s", i, hit, p.out.String())
		} else {
			hit, code = p.killAfter(delay)
			wg.Wait()
			if !hit {
				require.Zero(t, code, "trial %d: an unkilled put --into failed: %s", i, p.out.String())
			}
		}
		if hit {
			signalled++
		}
		for k := range others {
			require.Zero(t, codes[k], "trial %d: put --into o%d/, beside the signalled one, must commit: %s", i, k, outs[k])
		}
		_, after := snapshotFiles(t, s)
		got := under(after, prefix)
		switch {
		case maps.EqualFunc(got, src, bytes.Equal):
			committed++
		case maps.EqualFunc(got, under(before, prefix), bytes.Equal):
			require.True(t, hit && !stop, "trial %d: put --into exited 0 but its partition is the old one", i)
		default:
			t.Fatalf("trial %d: partition %s holds neither its old files nor exactly the new ones", i, prefix)
		}
		for k := range others {
			require.True(t, maps.EqualFunc(under(after, fmt.Sprintf("o%d/", k)), want[k], bytes.Equal), "trial %d: partition o%d/", i, k)
		}
		for q := range parts {
			if q == victim {
				continue
			}
			qp := fmt.Sprintf("p%d/", q)
			now := under(after, qp)
			if z, ok := zombie[qp]; ok && maps.EqualFunc(now, z, bytes.Equal) && !maps.EqualFunc(now, under(before, qp), bytes.Equal) {
				// The put killed in the trial before had published its
				// intent on the value it lost to; the first commit on
				// that value carried it.
				lateLanded++
				continue
			}
			require.True(t, maps.EqualFunc(now, under(before, qp), bytes.Equal), "trial %d: partition %s changed", i, qp)
		}
		// An intent is bound to one pointer value: this trial's commits
		// carried or killed the one left before it.
		clear(zombie)
		if hit && !stop && maps.EqualFunc(got, src, bytes.Equal) {
			landedKilled++
		}
		if hit && !stop && !maps.EqualFunc(got, src, bytes.Equal) {
			zombie[prefix] = src
		}
	}
	carriers, carried := carriedCommits(ctx, t, s)
	require.Positive(t, carriers, "no commit of %d bursts of %d writers carried another: the trials never held a round", crashTrials(), burstWriters)
	if tg.coarseClock {
		time.Sleep(1100 * time.Millisecond)
	}
	out, code := tg.run(t, "gc", "--keep", "1", "--grace", "0", "--orphan-age", "0", url)
	require.Zero(t, code, out)
	checkCollected(t, s, 1)
	outcome := fmt.Sprintf("%d killed, %d committed (%d of them killed after the commit landed, %d carried by the next trial's commit)", signalled, committed, landedKilled, lateLanded)
	if stop {
		outcome = fmt.Sprintf("%d paused, %d committed", signalled, committed)
	}
	t.Logf("CRASH put --into, %d at once, on %s: %d trials (signal window %s), %s; %d commits carried %d others; other partitions intact, I1 I7 held",
		burstWriters, tg.name, crashTrials(), window.Round(time.Millisecond), outcome, carriers, carried)
}

// carriedCommits walks the dataset's history and returns how many commits
// carried other writers' changes, and how many changes they carried.
func carriedCommits(ctx context.Context, t *testing.T, s store.Store) (carriers, carried int) {
	t.Helper()
	d := commit.New(s)
	snap, err := d.Open(ctx)
	require.NoError(t, err)
	for m, err := range d.History(ctx, snap) {
		require.NoError(t, err)
		if len(m.Carried) > 0 {
			carriers++
			carried += len(m.Carried)
		}
	}
	return carriers, carried
}
