package main

import (
	"net"
	"os"
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

// gateProxy forwards TCP connections to a target; while held, it closes
// the connections it has and keeps new ones waiting, unforwarded, until
// Open.
type gateProxy struct {
	l       net.Listener
	target  string
	mu      sync.Mutex
	held    bool
	conns   []net.Conn
	waiting []net.Conn
	arrived chan struct{} // a connection came while held
}

func startGateProxy(t *testing.T, target string) *gateProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &gateProxy{l: l, target: target, arrived: make(chan struct{}, 16)}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.held {
				p.waiting = append(p.waiting, c)
				p.arrived <- struct{}{}
				p.mu.Unlock()
				continue
			}
			p.mu.Unlock()
			p.forward(c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range append(p.conns, p.waiting...) {
			c.Close()
		}
	})
	return p
}

func (p *gateProxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, s)
	p.mu.Unlock()
	go pipe(c, s)
	go pipe(s, c)
}

// Hold closes every connection and keeps new ones waiting.
func (p *gateProxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Open forwards the waiting connections and every new one.
func (p *gateProxy) Open() {
	p.mu.Lock()
	waiting := p.waiting
	p.held, p.waiting = false, nil
	p.mu.Unlock()
	for _, c := range waiting {
		p.forward(c)
	}
}

// pendingSignal reports whether sig is pending for pid, not yet delivered.
func pendingSignal(t *testing.T, pid int, sig syscall.Signal) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "ShdPnd" || k == "SigPnd" {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			require.NoError(t, err)
			if mask&(1<<(uint(sig)-1)) != 0 {
				return true
			}
		}
	}
	return false
}

// TestRunReleasesDespiteSignalDuringRelease: the documented promise that,
// after the second signal, further signals change nothing: run still
// releases the lease and exits with 130. Here the third SIGTERM comes
// while the release is on its way to the store.
func TestRunReleasesDespiteSignalDuringRelease(t *testing.T) {
	tg := targets(t)[1]
	require.Equal(t, "s3", tg.name)
	url := tg.url(t)
	p := startGateProxy(t, strings.TrimPrefix(testenv.S3(t).Endpoint, "http://"))
	a := startHolder(t, tg, []string{"--endpoint", "http://" + p.l.Addr().String(), "--path-style"}, url, "--ttl", "20s")
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	waitFor(t, a.termed, 30*time.Second)
	p.Hold()
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.arrived: // the release (renewals stopped at the first signal)
	case <-time.After(time.Minute):
		t.Fatalf("no release came; stderr:\n%s", a.stderr())
	}
	pid, err := a.cmdPid()
	require.NoError(t, err)
	require.ErrorIs(t, syscall.Kill(-pid, 0), syscall.ESRCH, "the group is gone before the release")
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	for deadline := time.Now().Add(time.Minute); pendingSignal(t, a.cmd.Process.Pid, syscall.SIGTERM); {
		require.True(t, time.Now().Before(deadline), "the third SIGTERM stays pending")
		time.Sleep(10 * time.Millisecond)
	}
	p.Open()
	code := a.wait(t)
	assert.Equal(t, exitInterrupted, code, "run must exit 130, not die of the third signal: %s", a.stderr())
	b := tg.run(t, "run", "--lease", "job", "--ttl", "20s", url, "--", "true")
	assert.Equal(t, 0, b.code, "the lease must have been released: %s", b.stderr)
}
