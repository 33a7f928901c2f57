package main

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
)

// TestStalledEndpoint: ls and put against an endpoint that never answers,
// or whose answers stop partway, end within the configured timeouts (given
// as flags or as URL parameters) with an error naming the endpoint and the
// limit, on both S3 drivers.
func TestStalledEndpoint(t *testing.T) {
	const limit = 2 * time.Second
	const slack = 20 * time.Second // further attempts, back-off, a loaded machine
	const guard = time.Minute      // ends a hung binary so that the test fails
	env := testenv.S3(t).Env()
	src := writeTree(t, map[string]string{"a.txt": "A"})
	tests := []struct {
		name string
		mode faults.Stall
		// args builds the command line for a stalled endpoint.
		args func(endpoint string) []string
		want string // a regular expression for the limit in the message
	}{
		{"s3 ls, flags", faults.StallAnswer, func(ep string) []string {
			return []string{"--endpoint", ep, "--path-style", "--timeout", "2s", "--idle-timeout", "4s", "ls", "s3://stalled/x"}
		}, `2s \(response header timeout\)`},
		{"s3 put, flags", faults.StallAnswer, func(ep string) []string {
			return []string{"--endpoint", ep, "--path-style", "--timeout", "2s", "--idle-timeout", "4s", "put", src, "s3://stalled/x"}
		}, `2s \(response header timeout\)`},
		{"s3 ls, body stalls", faults.StallBody, func(ep string) []string {
			return []string{"--endpoint", ep, "--path-style", "--idle-timeout", "2s", "ls", "s3://stalled/x"}
		}, `2s \(idle timeout\)`},
		{"minio ls, URL parameters", faults.StallAnswer, func(ep string) []string {
			return []string{"ls", "minio://stalled/x?path_style=true&timeout=2s&idle_timeout=4s&endpoint=" + url.QueryEscape(ep)}
		}, `2s \(response header timeout\)`},
		{"minio put, URL parameters", faults.StallAnswer, func(ep string) []string {
			return []string{"put", src, "minio://stalled/x?path_style=true&timeout=2s&idle_timeout=4s&endpoint=" + url.QueryEscape(ep)}
		}, `2s \(response header timeout\)`},
		{"minio ls, body stalls", faults.StallBody, func(ep string) []string {
			return []string{"ls", "minio://stalled/x?path_style=true&idle_timeout=2s&endpoint=" + url.QueryEscape(ep)}
		}, `2s \(idle timeout\)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each waits out its limits on a listener of its own
			endpoint := faults.Stalled(t, tt.mode)
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			tg := target{env: env}
			cmd := tg.command(t, tt.args(endpoint)...)
			run := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
			run.Env = cmd.Env
			var stderr bytes.Buffer
			run.Stderr = &stderr
			start := time.Now()
			err := run.Run()
			elapsed := time.Since(start)
			require.NoError(t, ctx.Err(), "publish hung until the test's guard killed it; stderr: %s", stderr.String())
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "publish: %v", err)
			assert.Equal(t, exitError, ee.ExitCode(), "stderr: %s", stderr.String())
			assert.Less(t, elapsed, limit+slack)
			u, err := url.Parse(endpoint)
			require.NoError(t, err)
			assert.Contains(t, stderr.String(), u.Host)
			assert.Regexp(t, tt.want, stderr.String())
			t.Logf("after %s: %s", elapsed.Round(time.Millisecond), stderr.String())
		})
	}
}
