package reliability_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// stopTrials is the number of pause trials per holder and target. Each
// paused trial waits out a lease TTL, so there are fewer than kill trials.
func stopTrials() int {
	if long() {
		return 100
	}
	return 4
}

// TestCrashStop pauses a lease holder with SIGSTOP at a random point, lets
// its lease expire, has the next holder ('publish put --lease --wait')
// commit, and only then resumes the paused one with SIGCONT: the case of a
// stopped VM or a long GC pause. The holder is 'publish put --lease', or
// 'publish run' whose CMD is a put with the lease's token. For run, every
// other trial's CMD waits for a gate before it starts its put; the test
// opens the gate after the next holder committed and resumes CMD first, so
// that its put starts from the next holder's commit with the old token and
// only the fence stands between it and a commit over the newer token.
//
// After each trial: every generation from the one before the trial to the
// head resolves completely and holds exactly one holder's files (I1); the
// chain is linear (I2); the next holder's commit is in it; a put --lease
// that exits 0 committed and one that fails did not; and a generation of
// the paused holder above the next holder's is there only if it was
// committed with a newer token of the same lease (I6: a resumed holder
// never commits over a newer token).
func TestCrashStop(t *testing.T) {
	for _, tg := range crashTargets(t) {
		for _, holder := range []string{"put", "run"} {
			t.Run(tg.name+"/"+holder, func(t *testing.T) {
				testCrashStop(t, tg, holder)
			})
		}
	}
}

func testCrashStop(t *testing.T, tg crashTarget, holder string) {
	ctx := context.Background()
	bin := testenv.PublishBinary(t)
	url, s := tg.dataset(t, "stop-"+holder)
	tmp := t.TempDir()
	// srcA's path marks the paused holder's processes (findProcs).
	srcA := filepath.Join(tmp, "paused-holder-src")
	srcB := filepath.Join(tmp, "next-holder-src")
	// On S3 a renewal is a round trip to a server on a loaded machine, and a
	// holder whose renewals are late loses its lease on its own; a longer
	// TTL keeps the trials about pauses.
	ttl := "2s"
	if tg.coarseClock {
		ttl = "6s"
	}
	argsA := []string{"put", "--lease", "job", "--lease-ttl", ttl, srcA, url}
	if holder == "run" {
		argsA = append([]string{"run", "--lease", "job", "--ttl", ttl, "--grace", "0.5s", url, "--", bin}, tg.flags...)
		argsA = append(argsA, "put", srcA, url)
	}
	// gatedA is run with a CMD that starts its put only once the gate file
	// exists: a job paused before it publishes, that publishes after the
	// next holder committed, with its old token.
	gate := filepath.Join(tmp, "gate")
	gatedA := []string{"run", "--lease", "job", "--ttl", ttl, "--grace", "0.5s", url, "--", "sh", "-c",
		`while [ ! -e "$0" ]; do sleep 0.05; done; exec "$@"`, gate, bin}
	gatedA = append(append(gatedA, tg.flags...), "put", srcA, url)
	argsB := []string{"put", "--lease", "job", "--lease-ttl", ttl, "--wait", "90s", srcB, url}

	writeSrc(t, srcA, -1)
	out, code := tg.run(t, "put", srcA, url)
	require.Zero(t, code, out)
	cal := -2
	window := calibrate(func() time.Duration {
		writeSrc(t, srcA, cal)
		cal--
		start := time.Now()
		out, code := tg.run(t, argsA...)
		require.Zero(t, code, out)
		return time.Since(start)
	})
	rnd := rand.New(rand.NewPCG(seed(t, 14), 0))
	var paused, committedA, afterB, gated int
	for i := range stopTrials() {
		before, _ := snapshotFiles(t, s)
		filesA := writeSrc(t, srcA, i)
		filesB := writeSrc(t, srcB, 100000+i)
		prev := leaseToken(ctx, s)
		cmdFirst := holder == "run" && i%2 == 1
		require.NoError(t, os.RemoveAll(gate))
		args := argsA
		if cmdFirst {
			args = gatedA
		}
		p := tg.start(t, args...)
		delay := time.Duration(rnd.Int64N(int64(window)))
		if i%4 != 3 {
			// Three trials in four pause a holder that has the lease, at a
			// random point of its remaining work; the fourth pauses it
			// anywhere, often before it asked for the lease.
			waitHeld(ctx, t, s, prev, p)
			delay /= 2
		}
		select {
		case <-p.done:
		case <-time.After(delay):
		}
		stopped := stopHolder(t, p, srcA)
		if len(stopped) > 0 {
			paused++
		}
		outB, codeB := tg.run(t, argsB...)
		require.Zero(t, codeB, "the next holder failed while the old one was paused: %s", outB)
		pB, _, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		tokenB := maxFence(pB)
		require.NotZero(t, tokenB, "the next holder committed without a token")
		if cmdFirst {
			require.NoError(t, os.WriteFile(gate, nil, 0o644))
		}
		if cmdFirst && len(stopped) > 1 {
			// run's CMD resumes first, starts its put on top of the next
			// holder's commit with the old token and finishes while run is
			// still paused: only the fence can stop that commit.
			for _, pid := range stopped[1:] {
				syscall.Kill(pid, syscall.SIGCONT)
			}
			waitOrphansBut(t, srcA, p.cmd.Process.Pid)
			gated++
		}
		for _, pid := range stopped {
			syscall.Kill(pid, syscall.SIGCONT)
		}
		killed, codeA := p.killAfter(2 * time.Minute)
		require.False(t, killed, "the resumed holder did not exit: %s", p.out.String())
		// 3: it lost the pointer CAS to the next holder; 6: fenced, or its
		// lease was lost.
		require.Contains(t, []int{0, 3, 6}, codeA, "the resumed holder: %s", p.out.String())
		if holder == "run" {
			waitOrphans(t, srcA)
		}

		// Walk the chain from the head down to the generation before the
		// trial and name each generation's writer by its files.
		head, _ := snapshotFiles(t, s)
		pF, _, err := pointer.Read(ctx, s)
		require.NoError(t, err)
		var chain []string // oldest first: "A" or "B"
		for seq := head.Seq(); seq > before.Seq(); seq-- {
			snap, err := commit.New(s).OpenAt(ctx, strconv.FormatUint(seq, 10))
			require.NoError(t, err, "I1: seq %d", seq)
			files := map[string][]byte{}
			for _, e := range snap.Files() {
				b, err := snap.ReadFile(ctx, e.Path)
				require.NoError(t, err, "I1: %q of seq %d", e.Path, seq)
				files[e.Path] = b
			}
			switch {
			case sameFiles(files, filesA):
				chain = append([]string{"A"}, chain...)
			case sameFiles(files, filesB):
				chain = append([]string{"B"}, chain...)
			default:
				t.Fatalf("I1: seq %d holds neither holder's files", seq)
			}
			if seq == before.Seq()+1 {
				require.Equal(t, before.Generation(), snap.Manifest.Parent, "I2: the chain does not start at the generation before the trial")
			}
		}
		nA, nB := count(chain, "A"), count(chain, "B")
		require.Equal(t, 1, nB, "the next holder's commit: chain %v", chain)
		require.LessOrEqual(t, nA, 1, "the paused holder committed twice: chain %v", chain)
		if holder == "put" {
			require.Equal(t, codeA == 0, nA == 1, "put --lease exited %d but the chain is %v: %s", codeA, chain, p.out.String())
		}
		if nA == 1 {
			committedA++
		}
		if slices.Equal(chain, []string{"B", "A"}) {
			afterB++
			require.Greater(t, maxFence(pF), tokenB, "I6: the resumed holder committed over the newer token %d of its lease", tokenB)
		}
	}
	t.Logf("CRASH stop %s on %s: %d trials (pause window %s), %d paused (%d with a gated CMD resumed before run), %d committed by the paused holder, %d of them after the next holder with a newer token; I1 I2 I6 held",
		holder, tg.name, stopTrials(), window.Round(time.Millisecond), paused, gated, committedA, afterB)
}

// waitOrphansBut waits until no process other than pid has marker in its
// command line.
func waitOrphansBut(t *testing.T, marker string, pid int) {
	t.Helper()
	for giveUp := time.Now().Add(2 * time.Minute); ; {
		pids := slices.DeleteFunc(findProcs(marker), func(q int) bool { return q == pid })
		if len(pids) == 0 {
			return
		}
		if time.Now().After(giveUp) {
			t.Fatalf("processes %v running %q did not exit", pids, marker)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopHolder sends SIGSTOP to the started process and to every other process with marker in its command line (run's CMD), until
// no new one turns up. It returns the stopped pids, none if the process
// had exited.
//
// On fs, a writer holds the flock of an object's directory while it checks
// and renames, and a writer paused there blocks every other writer of that
// directory until it resumes: no one may take the lock over, since the
// paused rename may still happen (the others give up after the store's lock
// wait, TestLockWaitBounded). That is the fs store's own pause, not a lease
// holder's, so a pause that lands inside such a section is moved: the
// processes go on for a moment and are stopped again.
func stopHolder(t *testing.T, p *proc, marker string) []int {
	t.Helper()
	for range 1000 {
		stopped := stopOnce(p, marker)
		if len(stopped) == 0 || !holdsFlock(stopped) {
			return stopped
		}
		for _, pid := range stopped {
			syscall.Kill(pid, syscall.SIGCONT)
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("1000 pauses in a row landed inside an fs lock")
	return nil
}

func stopOnce(p *proc, marker string) []int {
	select {
	case <-p.done:
		return nil
	default:
	}
	pid := p.cmd.Process.Pid
	if syscall.Kill(pid, syscall.SIGSTOP) != nil {
		return nil
	}
	stopped := []int{pid}
	for {
		var added bool
		for _, q := range findProcs(marker) {
			if !slices.Contains(stopped, q) && syscall.Kill(q, syscall.SIGSTOP) == nil {
				stopped = append(stopped, q)
				added = true
			}
		}
		if !added {
			break
		}
	}
	return stopped
}

// holdsFlock reports whether one of pids holds a flock, by /proc/locks
// ("1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF").
func holdsFlock(pids []int) bool {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[1] != "FLOCK" {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil && slices.Contains(pids, pid) {
			return true
		}
	}
	return false
}

// leaseToken returns the token of the lease "job", 0 if it was never taken.
func leaseToken(ctx context.Context, s store.Store) uint64 {
	info, err := lease.Status(ctx, s, "job")
	if err != nil {
		return 0
	}
	return info.Token
}

// waitHeld waits until the lease "job" is held with a token above prev, or
// p has exited.
func waitHeld(ctx context.Context, t *testing.T, s store.Store, prev uint64, p *proc) {
	t.Helper()
	for giveUp := time.Now().Add(time.Minute); time.Now().Before(giveUp); {
		select {
		case <-p.done:
			return
		default:
		}
		if info, err := lease.Status(ctx, s, "job"); err == nil && info.Token > prev && !info.Expired {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the holder took no lease within a minute")
}

func maxFence(p *pointer.Pointer) uint64 {
	m := p.Fence
	for _, v := range p.Fences {
		m = max(m, v)
	}
	return m
}

func sameFiles(got, want map[string][]byte) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if !bytes.Equal(got[k], v) {
			return false
		}
	}
	return true
}

func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}
