package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A put remembers, by dataset, the sha256 of the manifest it committed
// (or found current), under the user's cache directory beside the
// manifests. The next put on this machine expects its base to have that
// manifest (commit.BeginAhead), and uploads the files that differ from it
// while it reads the pointer. A wrong or missing record costs that round
// trip, nothing else: the base is still read and checked.

// headPath returns where the record of the dataset at rawURL is kept, or
// "" when put keeps none (see manifestCache).
func (g *globalOptions) headPath(rawURL string) string {
	if g.NoCache || g.SSECKey != "" {
		return ""
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(redact(rawURL)))
	return filepath.Join(dir, "publish", "heads", hex.EncodeToString(sum[:]))
}

// lastHead returns the sha256 of the manifest a put to rawURL committed
// last on this machine, or "".
func (g *globalOptions) lastHead(rawURL string) string {
	path := g.headPath(rawURL)
	if path == "" {
		return ""
	}
	// A FIFO in its place does not wait for a writer. Whatever is read is
	// only a guess, checked as a sha256 before use.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 2*sha256.Size+1))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// noteHead records sum as the manifest the dataset at rawURL has now.
// Failing to is only a round trip lost next time.
func (g *globalOptions) noteHead(rawURL, sum string) {
	path := g.headPath(rawURL)
	if path == "" || sum == "" {
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return
	}
	_, werr := io.WriteString(tmp, sum+"\n")
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		os.Remove(tmp.Name()) //nolint:errcheck // our own temporary file
	}
}
