package lease_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/fs"
)

// The I5 soak test re-executes the test binary; TestHelperLeaseChild is the
// child's entry point, selected by these environment variables.
const (
	envChild    = "COMMITPTR_LEASE_CHILD"    // "fs" or "s3"
	envDir      = "COMMITPTR_LEASE_DIR"      // fs: the shared root
	envBucket   = "COMMITPTR_LEASE_BUCKET"   // s3: the bucket
	envEndpoint = "COMMITPTR_LEASE_ENDPOINT" // s3: the server
	envLog      = "COMMITPTR_LEASE_LOG"      // the child's interval log
	envID       = "COMMITPTR_LEASE_ID"
	// envSoak sets how long the children contend, as a Go duration or in
	// seconds. The default keeps CI short; run the 60 s soak with
	// COMMITPTR_LEASE_SOAK=60s go test -run TestProcesses ./lease.
	envSoak     = "COMMITPTR_LEASE_SOAK"
	defaultSoak = 8 * time.Second
	soakTTL     = 2 * time.Second
	procs       = 8
)

func soakDuration(t testing.TB) time.Duration {
	v := os.Getenv(envSoak)
	if v == "" {
		return defaultSoak
	}
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", envSoak, v, err)
	}
	return d
}

// TestProcesses checks I5 across OS processes: 8 processes contend for one
// lease on the fs driver and on the s3 driver. Each appends (token, start,
// end) to its own log for every interval it spent holding the lease, and
// only if the interval ended before its own deadline. Intervals are
// measured with the host's wall clock, which all the processes share.
// Merged, tokens strictly increase in time and no two intervals overlap.
func TestProcesses(t *testing.T) {
	t.Parallel() // its processes mostly sleep; overlap it with the other tests
	soak := soakDuration(t)
	t.Run("fs", func(t *testing.T) {
		t.Parallel()
		runSoak(t, soak, []string{envChild + "=fs", envDir + "=" + t.TempDir()})
	})
	t.Run("s3", func(t *testing.T) {
		t.Parallel()
		srv := testenv.S3(t)
		env := append(srv.Env(), envChild+"=s3", envBucket+"="+srv.NewBucket(t), envEndpoint+"="+srv.Endpoint)
		runSoak(t, soak, env)
	})
}

type interval struct {
	proc       int
	token      uint64
	start, end int64 // wall clock, ns
}

func runSoak(t *testing.T, soak time.Duration, env []string) {
	logs := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), soak+2*time.Minute)
	defer cancel()
	type child struct {
		cmd    *exec.Cmd
		stderr bytes.Buffer
	}
	children := make([]*child, procs)
	for i := range children {
		c := &child{cmd: exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperLeaseChild$", "-test.count=1")}
		c.cmd.Env = append(os.Environ(), env...)
		c.cmd.Env = append(c.cmd.Env,
			envID+"="+strconv.Itoa(i),
			envLog+"="+filepath.Join(logs, fmt.Sprintf("child-%d.log", i)),
			envSoak+"="+soak.String())
		c.cmd.Stderr = &c.stderr
		require.NoError(t, c.cmd.Start())
		children[i] = c
	}
	var all []interval
	for i, c := range children {
		require.NoError(t, c.cmd.Wait(), "child %d: %s", i, c.stderr.String())
		f, err := os.Open(filepath.Join(logs, fmt.Sprintf("child-%d.log", i)))
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var iv interval
			_, err := fmt.Sscan(sc.Text(), &iv.token, &iv.start, &iv.end)
			require.NoError(t, err, "child %d: line %q", i, sc.Text())
			iv.proc = i
			all = append(all, iv)
		}
		require.NoError(t, sc.Err())
		f.Close()
	}
	slices.SortFunc(all, func(a, b interval) int { return int(a.start - b.start) })

	owner := map[uint64]int{}
	holders := map[int]bool{}
	for i, cur := range all {
		holders[cur.proc] = true
		if p, ok := owner[cur.token]; ok {
			require.Equal(t, p, cur.proc, "token %d held by two processes", cur.token)
		}
		owner[cur.token] = cur.proc
		require.Less(t, cur.start, cur.end)
		if i == 0 {
			continue
		}
		prev := all[i-1]
		require.Less(t, prev.end, cur.start, "I5: intervals overlap: %+v and %+v", prev, cur)
		require.GreaterOrEqual(t, cur.token, prev.token, "I5: tokens go back in time: %+v then %+v", prev, cur)
		if cur.proc != prev.proc {
			require.Greater(t, cur.token, prev.token, "I5: a new holder without a larger token: %+v then %+v", prev, cur)
		}
	}
	t.Logf("%d intervals, %d tokens (max %d), %d of %d processes held the lease", len(all), len(owner), all[len(all)-1].token, len(holders), procs)
	assert.GreaterOrEqual(t, len(owner), 5, "the lease changed hands")
	assert.GreaterOrEqual(t, len(holders), 3, "several processes held the lease")
}

// TestHelperLeaseChild is one contending process of TestProcesses.
func TestHelperLeaseChild(t *testing.T) {
	mode := os.Getenv(envChild)
	if mode == "" {
		t.Skip("run by TestProcesses")
	}
	if err := soakChild(mode); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
}

func soakChild(mode string) error {
	ctx := context.Background()
	var s store.Store
	var err error
	switch mode {
	case "fs":
		s, err = fs.New(os.Getenv(envDir))
	case "s3":
		s, err = store.Open(ctx, "s3://"+os.Getenv(envBucket), store.Config{Endpoint: os.Getenv(envEndpoint), PathStyle: true})
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		return err
	}
	soak, err := time.ParseDuration(os.Getenv(envSoak))
	if err != nil {
		return err
	}
	log, err := os.OpenFile(os.Getenv(envLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	o := lease.Options{
		Owner: "p" + os.Getenv(envID), TTL: soakTTL,
		PollMin: 20 * time.Millisecond, PollMax: 200 * time.Millisecond,
	}
	stop := time.Now().Add(soak)
	for time.Now().Before(stop) {
		actx, cancel := context.WithDeadline(ctx, stop)
		l, err := lease.Acquire(actx, s, "soak", o)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			return fmt.Errorf("acquire: %w", err)
		}
		// Hold it for a few intervals of "work", renewing now and then.
		// Rarely, stall past the deadline (a GC pause, a stopped VM): the
		// interval then must not be recorded, and others take over.
		pause := rand.IntN(30) == 0
		for range 1 + rand.IntN(4) {
			if !l.Held() {
				break
			}
			start := time.Now().UnixNano()
			work := time.Duration(2+rand.IntN(20)) * time.Millisecond
			if pause {
				work = soakTTL
			}
			time.Sleep(work)
			end := time.Now().UnixNano()
			if !l.Held() {
				break // the interval did not end before the deadline
			}
			if _, err := fmt.Fprintf(log, "%d %d %d\n", l.Token(), start, end); err != nil {
				return err
			}
			if rand.IntN(2) == 0 {
				if err := l.Renew(ctx); err != nil && !errors.Is(err, lease.ErrLost) {
					return fmt.Errorf("renew: %w", err)
				}
			}
		}
		switch {
		case rand.IntN(30) == 0:
			// Walk away without releasing; the lease expires.
		default:
			if err := l.Release(ctx); err != nil {
				return fmt.Errorf("release: %w", err)
			}
		}
		// Rest longer than the longest poll interval, so that every waiter
		// polls before this process tries again: the lease promises no
		// fairness, and a process that retries at once after releasing can
		// win it over and over from waiters in backoff.
		time.Sleep(o.PollMax + rand.N(o.PollMax))
	}
	return nil
}
