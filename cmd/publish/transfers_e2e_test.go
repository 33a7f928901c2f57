package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/internal/wanproxy"
	"github.com/commitptr/commitptr/store"
)

// s3Away returns a fresh bucket of the S3 test server and a proxy that puts
// the server 10 ms away each way, closed when the test ends.
func s3Away(t *testing.T) (string, *wanproxy.Proxy) {
	t.Helper()
	srv := testenv.S3(t)
	srv.UseCredentials()
	bucket := srv.NewBucket(t)
	p, err := wanproxy.Start("127.0.0.1:0", srv.Endpoint, 10*time.Millisecond, nil)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return bucket, p
}

// TestTransfersBoundRequestsInFlight: put and get of 300 files through an
// S3 server 10 ms away. With --transfers 3 the server never has more than 3
// of their requests at once; without it the window adapts, and soon has
// more than the 16 it starts with.
func TestTransfersBoundRequestsInFlight(t *testing.T) {
	bucket, p := s3Away(t)
	files := map[string]string{}
	for i := range 300 {
		files[fmt.Sprintf("d%d/f%03d", i%7, i)] = fmt.Sprint(i)
	}
	src := writeTree(t, files)
	flags := []string{"--endpoint", p.URL, "--path-style", "--no-cache"}
	for _, c := range []struct {
		name      string
		transfers []string
		check     func(max int64) bool
		want      string
	}{
		{"pinned", []string{"--transfers", "3"}, func(m int64) bool { return m <= 3 }, "at most 3"},
		{"adaptive", nil, func(m int64) bool { return m > 16 }, "more than 16"},
	} {
		url := "s3://" + bucket + "/" + c.name
		for _, op := range [][]string{{"put", src, url}, {"get", url, t.TempDir()}} {
			p.Reset()
			ok(t, append(append(append([]string{}, flags...), c.transfers...), op...)...)
			if m := p.Counts().MaxInFlight; !c.check(m) {
				t.Errorf("%s %s: %d requests in flight at most, want %s", c.name, op[0], m, c.want)
			}
		}
	}
}

// TestPutUploadsFewLargeFilesAtOnce: put uploads at most heavyAtOnce
// files at a time that a driver may buffer or send in parts: those over
// largeFile, and with --compress those over bufferedFile too. Here the
// bounds are lowered so that 30 small files are such files.
func TestPutUploadsFewLargeFilesAtOnce(t *testing.T) {
	size, buffered, n := largeFile, bufferedFile, heavyAtOnce
	defer func() { largeFile, bufferedFile, heavyAtOnce = size, buffered, n }()
	bucket, p := s3Away(t)
	files := map[string]string{}
	for i := range 30 {
		files[fmt.Sprintf("f%02d", i)] = fmt.Sprint("content of ", i)
	}
	src := writeTree(t, files)
	for _, c := range []struct {
		name            string
		large, buffered int64
		args            []string
		most            int64 // 0: more than 2
	}{
		{"over largeFile", 1, size, nil, 2},
		{"compressed, over bufferedFile", size, 1, []string{"--compress", "zstd"}, 2},
		{"small, not compressed", size, 1, nil, 0},
	} {
		largeFile, bufferedFile, heavyAtOnce = c.large, c.buffered, 2
		p.Reset()
		args := append([]string{"--endpoint", p.URL, "--path-style", "--no-cache", "put"}, c.args...)
		ok(t, append(args, src, "s3://"+bucket+"/"+strings.ReplaceAll(c.name, " ", "-"))...)
		// The other requests of a first put (pointer GET, manifest and
		// pointer PUT) come one at a time, before or after the uploads.
		m := p.Counts().MaxInFlight
		if c.most > 0 && m > c.most {
			t.Errorf("%s: %d requests in flight at most, want 2 uploads at a time", c.name, m)
		}
		if c.most == 0 && m <= 2 {
			t.Errorf("%s: %d requests in flight at most, want more: the bound is for large files only", c.name, m)
		}
	}
}

// TestFewCompressedFilesDownloadAtOnce: get, sync and verify read at most
// heavyAtOnce zstd files over smallDecoded at a time, since each decoder
// keeps a window of up to 8 MiB; smaller ones, like plain files, go as
// many at once as the window allows. Here the bound is lowered so that 30
// small files are such files.
func TestFewCompressedFilesDownloadAtOnce(t *testing.T) {
	small, n := smallDecoded, heavyAtOnce
	defer func() { smallDecoded, heavyAtOnce = small, n }()
	bucket, p := s3Away(t)
	files := map[string]string{}
	for i := range 30 {
		files[fmt.Sprintf("f%02d", i)] = fmt.Sprint("content of ", i)
	}
	src := writeTree(t, files)
	flags := []string{"--endpoint", p.URL, "--path-style", "--no-cache"}
	zstd, plain := "s3://"+bucket+"/zstd", "s3://"+bucket+"/plain"
	ok(t, append(flags, "put", "--compress", "zstd", src, zstd)...)
	ok(t, append(flags, "put", src, plain)...)
	for _, c := range []struct {
		name  string
		url   string
		small int64
		heavy bool
	}{
		{"compressed, over smallDecoded", zstd, 1, true},
		{"compressed, under smallDecoded", zstd, small, false},
		{"plain, over smallDecoded", plain, 1, false},
	} {
		smallDecoded, heavyAtOnce = c.small, 2
		for _, op := range [][]string{{"get", c.url, t.TempDir()}, {"sync", c.url, t.TempDir()}, {"verify", c.url}} {
			p.Reset()
			ok(t, append(append([]string{}, flags...), op...)...)
			m := p.Counts().MaxInFlight
			if c.heavy && m > 2 {
				t.Errorf("%s, %s: %d requests in flight at most, want 2 downloads at a time", c.name, op[0], m)
			}
			if !c.heavy && m <= 2 {
				t.Errorf("%s, %s: %d requests in flight at most, want more: the bound is for large compressed files only", c.name, op[0], m)
			}
		}
	}
}

// TestHeavyPlacesComeBackWhenTransfersFail: with more corrupt zstd files
// than places for heavy transfers, get and sync fail and verify reports
// every file; none waits for a place a failed transfer kept.
func TestHeavyPlacesComeBackWhenTransfersFail(t *testing.T) {
	small, n := smallDecoded, heavyAtOnce
	defer func() { smallDecoded, heavyAtOnce = small, n }()
	smallDecoded, heavyAtOnce = 1, 2
	files := map[string]string{}
	for i := range 10 {
		files[fmt.Sprintf("f%02d", i)] = fmt.Sprint("content of ", i)
	}
	url := "file://" + filepath.Join(t.TempDir(), "store")
	ok(t, "put", "--compress", "zstd", writeTree(t, files), url)
	ctx := context.Background()
	s, err := store.Open(ctx, url, store.Config{})
	require.NoError(t, err)
	snap, err := commit.New(s).Open(ctx)
	require.NoError(t, err)
	enc, err := zstd.NewWriter(nil)
	require.NoError(t, err)
	for p, c := range files {
		e, found := snap.Manifest.Find(p)
		require.True(t, found, p)
		wrong := enc.EncodeAll([]byte(strings.ToUpper(c)), nil) // as long, other bytes
		_, err := s.Put(ctx, e.Key, bytes.NewReader(wrong), store.PutOptions{})
		require.NoError(t, err)
	}
	for _, args := range [][]string{{"verify", url}, {"get", url, filepath.Join(t.TempDir(), "out")}, {"sync", url, t.TempDir()}} {
		done := make(chan int, 1)
		go func() {
			code, _, _ := cli(t, "", append([]string{"--concurrency", "8"}, args...)...)
			done <- code
		}()
		select {
		case code := <-done:
			assert.NotEqual(t, 0, code, "%s of corrupt files", args[0])
		case <-time.After(time.Minute): // a run takes well under a second
			t.Fatalf("%s still runs after a minute: a failed transfer kept its place", args[0])
		}
	}
}

// TestWorkersPerStoreAndFlags: --concurrency wins, then --transfers, then 256 on
// a remote store and 16 on a local one.
func TestWorkersPerStoreAndFlags(t *testing.T) {
	for _, c := range []struct {
		transfers, concurrency int
		url                    string
		want                   int
	}{
		{0, 0, "s3://b/p", 256},
		{0, 0, "gs://b/p", 256},
		{0, 0, "az://acct/c", 256},
		{0, 0, "minio://b/p", 256},
		{0, 0, "file:///tmp/x", 16},
		{0, 0, "mem://x", 16},
		{0, 0, "./relative/dir", 16},
		{0, 0, "S3://b/p", 256},
		{3, 0, "s3://b/p", 3},
		{3, 0, "mem://x", 3},
		{3, 7, "s3://b/p", 7},
		{0, 7, "mem://x", 7},
		{-1, 0, "s3://b/p", 256},
	} {
		g := &globalOptions{Transfers: c.transfers}
		assert.Equal(t, c.want, g.workers(c.url, c.concurrency), "--transfers %d --concurrency %d %s", c.transfers, c.concurrency, c.url)
	}
}

// TestTransfersRefusesANegativeNumber: each command that opens a
// store refuses --transfers -1 with a usage error naming the flag, before
// it does anything.
func TestTransfersRefusesANegativeNumber(t *testing.T) {
	url := memURL()
	src := writeTree(t, map[string]string{"a": "a"})
	ok(t, "put", src, url)
	for _, args := range [][]string{
		{"put", src, url},
		{"get", url, t.TempDir()},
		{"sync", url, t.TempDir()},
		{"verify", url},
		{"ls", url},
		{"cat", url, "a"},
		{"gc", url},
	} {
		code, _, stderr := cli(t, "", append([]string{"--transfers", "-1"}, args...)...)
		require.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, "--transfers", "%v", args)
	}
	for _, cmd := range [][]string{{"put", src, url}, {"get", url, t.TempDir()}, {"sync", url, t.TempDir()}, {"verify", url}} {
		code, _, stderr := cli(t, "", append([]string{cmd[0], "--concurrency", "-1"}, cmd[1:]...)...)
		require.Equal(t, exitUsage, code, "%v: %s", cmd, stderr)
		require.Contains(t, stderr, "--concurrency", "%v", cmd)
	}
}
