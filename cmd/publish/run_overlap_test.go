package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
)

// TestRunNoOverlapWhenCutOff: holder A's CMD ignores SIGTERM and keeps
// appending timestamps to a log; A is then cut off from the store, so its
// renewals fail. B waits for the lease on a path that still reaches the
// store, takes it over once it expires, and logs its start. Both CMDs
// read one clock (date on this host). No line of A's may come after B's
// start: A must have killed its CMD's whole process group by its own
// deadline, which is before anyone can take the lease over.
//
// On s3, A talks to versitygw through a TCP proxy on loopback, and the
// proxy is killed. On file://, A reaches the store through a symlink, as a
// host reaches a shared volume through its mount point, and the symlink is
// replaced by a plain file: every operation of A's then fails with "root
// directory is gone" (not "not found", which would read as a takeover),
// while B uses the directory itself.
func TestRunNoOverlapWhenCutOff(t *testing.T) {
	const ttl = 6 * time.Second // grace defaults to 2/5 of it
	for _, tg := range targets(t) {
		if tg.name != "fs" && tg.name != "s3" {
			continue // the cut is made for these two: a swapped path, a killed proxy
		}
		t.Run(tg.name, func(t *testing.T) {
			url, scratch := tg.url(t), t.TempDir()
			aURL, aFlags, cut := cutOffPath(t, tg, url)
			logf, ready := filepath.Join(scratch, "log"), filepath.Join(scratch, "ready")

			scriptA := fmt.Sprintf(`trap "" TERM; touch %s; while :; do echo "A $(date +%%s%%N)" >> %s; sleep 0.05; done`, ready, logf)
			a := exec.Command(testenv.PublishBinary(t), append(aFlags,
				"run", "--lease", "job", "--ttl", ttl.String(), aURL, "--", "sh", "-c", scriptA)...)
			a.Env = append(os.Environ(), append(tg.env, "AWS_EC2_METADATA_DISABLED=true")...)
			var aErr bytes.Buffer
			a.Stderr = &aErr
			require.NoError(t, a.Start())
			var aWait error
			aExited := make(chan struct{})
			go func() { aWait = a.Wait(); close(aExited) }()
			t.Cleanup(func() {
				// If the test failed early: A stops its CMD and exits.
				a.Process.Signal(syscall.SIGTERM)
				<-aExited
			})
			waitFor(t, ready, 15*time.Second)

			cutAt := time.Now()
			cut()
			b := tg.run(t, "run", "--lease", "job", "--wait", "60s", "--ttl", ttl.String(), url,
				"--", "sh", "-c", fmt.Sprintf(`echo "B $(date +%%s%%N)" >> %s`, logf))
			require.Equal(t, 0, b.code, "B: %s", b.stderr)
			var ee *exec.ExitError
			<-aExited
			require.ErrorAs(t, aWait, &ee, aErr.String())
			assert.Equal(t, exitFenced, ee.ExitCode(), aErr.String())
			assert.Contains(t, aErr.String(), "could not be renewed", "A stops its CMD before its deadline")

			lastA, bStart := readRunLog(t, logf)
			require.NotZero(t, bStart, "B's CMD must have run")
			require.True(t, lastA.After(cutAt), "A's CMD must have run after the cut (last line %s, cut %s)", lastA, cutAt)
			assert.True(t, lastA.Before(bStart), "A's CMD ran until %s, after B's started at %s: overlap of %s",
				lastA.Format(time.StampMicro), bStart.Format(time.StampMicro), lastA.Sub(bStart))
			t.Logf("%s: cut at +0, A's last line at +%s, B started at +%s (gap %s)", tg.name,
				lastA.Sub(cutAt).Round(time.Millisecond), bStart.Sub(cutAt).Round(time.Millisecond), bStart.Sub(lastA).Round(time.Millisecond))
		})
	}
}

// cutOffPath returns the URL and global flags by which A reaches the store
// at url, and the function that cuts that path while url itself keeps
// working.
func cutOffPath(t *testing.T, tg target, rawURL string) (aURL string, flags []string, cut func()) {
	t.Helper()
	switch tg.name {
	case "fs":
		u, err := url.Parse(rawURL)
		require.NoError(t, err)
		require.NoError(t, os.Mkdir(u.Path, 0o700))
		view := filepath.Join(t.TempDir(), "view")
		require.NoError(t, os.Symlink(u.Path, view))
		return "file://" + view, nil, func() {
			require.NoError(t, os.WriteFile(view+".cut", nil, 0o600))
			require.NoError(t, os.Rename(view+".cut", view))
		}
	case "s3":
		srv := testenv.S3(t)
		p := startProxy(t, strings.TrimPrefix(srv.Endpoint, "http://"))
		return rawURL, []string{"--endpoint", "http://" + p.Addr(), "--path-style"}, p.Cut
	}
	t.Fatalf("no way to cut %s off", tg.name)
	return "", nil, nil
}

// readRunLog returns the time of A's last line and of B's line in the log
// that both CMDs append to ("A|B <unix nanoseconds>").
func readRunLog(t *testing.T, path string) (lastA, bStart time.Time) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		who, ns, ok := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseInt(ns, 10, 64)
		if !ok || err != nil {
			continue // a line cut short when A was killed mid-write
		}
		at := time.Unix(0, n)
		switch who {
		case "A":
			if at.After(lastA) {
				lastA = at
			}
		case "B":
			require.True(t, bStart.IsZero(), "B ran twice")
			bStart = at
		}
	}
	require.NoError(t, sc.Err())
	return lastA, bStart
}

// proxy forwards TCP connections on loopback to a target until Cut, which
// closes the listener and every connection, as if the proxy was killed:
// the client behind it loses the server at once.
type proxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{l: l, target: target}
	go p.serve()
	t.Cleanup(p.Cut)
	return p
}

// Addr returns the proxy's host:port.
func (p *proxy) Addr() string { return p.l.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return // cut
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		go pipe(c, s)
		go pipe(s, c)
	}
}

// track remembers the connections for Cut, or closes them if it came first.
func (p *proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		for _, c := range conns {
			c.Close()
		}
		return false
	}
	p.conns = append(p.conns, conns...)
	return true
}

// pipe copies src to dst until either side ends, then closes both.
func pipe(dst, src net.Conn) {
	io.Copy(dst, src) //nolint:errcheck // any end of either side ends both
	dst.Close()
	src.Close()
}

// Cut closes the listener and every connection; it may be called again.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return
	}
	p.cut = true
	p.l.Close()
	for _, c := range p.conns {
		c.Close()
	}
}

// TestRunStopsLeftoversBeforeRelease: CMD starts a background process that
// ignores SIGTERM and exits. run must stop what CMD left in its process
// group before it releases the lease, or the next holder's CMD runs beside
// it: when run exits, that process is gone.
func TestRunStopsLeftoversBeforeRelease(t *testing.T) {
	tg := targets(t)[0]
	scratch := t.TempDir()
	bgPID := filepath.Join(scratch, "bg.pid")
	// The background sh writes its pid once SIGTERM is ignored, then loops.
	// It does not hold run's output open, so run's exit ends tg.run.
	script := fmt.Sprintf(`sh -c 'trap "" TERM; echo $$ > %[1]s.tmp; mv %[1]s.tmp %[1]s; while :; do sleep 0.05; done' </dev/null >/dev/null 2>&1 &
while [ ! -e %[1]s ]; do sleep 0.01; done`, bgPID)
	r := tg.run(t, "run", "--lease", "job", "--ttl", "3s", tg.url(t), "--", "sh", "-c", script)
	b, err := os.ReadFile(bgPID)
	require.NoError(t, err, r.stderr)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	alive := syscall.Kill(pid, 0) == nil
	if alive {
		syscall.Kill(pid, syscall.SIGKILL) // what run should have done
	}
	assert.Equal(t, 0, r.code, "run exits with CMD's status: %s", r.stderr)
	assert.False(t, alive, "process %d that CMD left in its group outlived run", pid)
	assert.Contains(t, r.stderr, "left processes in its group")
}

// TestRunKeepsCMDWhileRenewing: while renewals succeed, the holder's
// deadline − grace keeps moving ahead, and CMD is never stopped: here it
// outlives the TTL 2.5 times over.
func TestRunKeepsCMDWhileRenewing(t *testing.T) {
	code, _, errs := cli(t, "", "run", "--lease", "job", "--ttl", "2s", memURL(), "--", "sleep", "5")
	assert.Equal(t, 0, code, errs)
	assert.Empty(t, errs)
}
