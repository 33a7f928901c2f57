package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGCEvery: publish gc --every keeps collecting, one line of stats per
// run, picks up garbage made while it runs, and ends with status 0 on
// SIGTERM, releasing its lease.
func TestGCEvery(t *testing.T) {
	for _, tg := range targets(t) {
		if !slices.Contains([]string{"fs", "s3"}, tg.name) {
			continue
		}
		t.Run(tg.name, func(t *testing.T) {
			url := tg.url(t)
			for i := range 3 {
				tg.ok(t, "put", writeTree(t, map[string]string{"v.txt": fmt.Sprint("version ", i)}), url)
			}
			// Every generation here commits, so there are no orphans to
			// wait for; an orphan age of an hour keeps the horizon an hour
			// back, where it cannot make the put below stale when a run
			// publishes it in the same second (orphan age 0 did, on a
			// loaded machine: exit 6).
			cmd := tg.command(t, "--json", "gc", "--every", "200ms", "--keep", "1", "--grace", "0", "--orphan-age", "1h", url)
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			var errb lockedBuffer
			cmd.Stderr = &errb
			require.NoError(t, cmd.Start())
			lines := make(chan gcRunStats)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					var st gcRunStats
					if assert.NoError(t, json.Unmarshal(sc.Bytes(), &st), sc.Text()) {
						lines <- st
					}
				}
			}()
			next := func() gcRunStats {
				t.Helper()
				select {
				case st, ok := <-lines:
					require.True(t, ok, "gc --every ended early: %s", errb.String())
					return st
				case <-time.After(2 * time.Minute):
					t.Fatalf("no line from gc --every: %s", errb.String())
				}
				return gcRunStats{}
			}

			first := next()
			assert.Equal(t, 1, first.Run)
			assert.Equal(t, "ok", first.Outcome, first.Error)
			assert.Equal(t, 1, first.Generations, "seq 1 is collected")
			assert.Equal(t, 2, first.ObjectsDeleted, "its file and manifest")
			assert.Positive(t, first.Requests)

			// Garbage made while it runs is collected by a later run.
			tg.ok(t, "put", writeTree(t, map[string]string{"v.txt": "version 3"}), url)
			for st := next(); st.ObjectsDeleted == 0; st = next() {
				assert.Equal(t, "ok", st.Outcome, st.Error)
				assert.Greater(t, st.Run, 1)
			}

			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			for range lines {
				// a run that was under way may still report
			}
			require.NoError(t, cmd.Wait(), "gc --every exits with status 0 on SIGTERM: %s", errb.String())
			assert.NotContains(t, errb.String(), "publish:", "no error")
			assert.NotContains(t, errb.String(), "level=WARN", "a run stopped by the signal is no cause for a warning")
			s := tg.open(t, url)
			assert.Contains(t, string(readObject(t, s, "_lease/gc")), `"released":true`, "the lease was released")
			tg.ok(t, "verify", url)
		})
	}
}

// TestGCStatsLine: the text form of a run's line.
func TestGCStatsLine(t *testing.T) {
	var b bytes.Buffer
	st := gcRunStats{Run: 3, Outcome: "ok", Seq: 42, Generations: 3, Orphans: 1, ObjectsDeleted: 120, BytesDeleted: 10445, PinsDropped: 1, Requests: 152, ElapsedSeconds: 0.4}
	require.NoError(t, st.write(&b, false))
	assert.Equal(t, "gc: run 3 ok at seq 42: 120 objects deleted (3 generations, 1 orphan, 10.2 KiB), 0 left, 1 pin dropped; 152 requests, 400ms\n", b.String())
	b.Reset()
	st = gcRunStats{Run: 4, Outcome: "held", Error: `lease "gc" is held by gc@host:1`}
	require.NoError(t, st.write(&b, false))
	assert.Equal(t, "gc: run 4 held: 0 objects deleted (0 generations, 0 orphans, 0 B), 0 left, 0 pins dropped; 0 requests, 0s; lease \"gc\" is held by gc@host:1\n", b.String())
}

// lockedBuffer is a bytes.Buffer that a process's output can be copied
// into while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
