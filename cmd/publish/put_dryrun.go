package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
)

// dryRunPut says what put would do with files, reading the current
// generation's pointer and manifest and the local files only: a file whose
// path, size and sha256 match the current generation would be reused, the
// others uploaded, and the current files (under --into's prefix) that SRC
// lacks removed. It writes nothing to the store: no staging, no lease, no
// fencing token, no probe. Whether the reused objects still exist is not
// checked (a put would check, and upload a missing one again).
func dryRunPut(ctx context.Context, opts putOptions, files []srcFile, maxDelete maxDelete, stdout, stderr io.Writer, start time.Time) error {
	d, err := opts.openDataset(ctx, opts.URL)
	if err != nil {
		return err
	}
	snap, err := d.Open(ctx)
	if err != nil && !errors.Is(err, commit.ErrNoCommits) {
		return describe(opts.URL, err)
	}
	res := putResult{DryRun: true, Files: len(files), Into: opts.Into}
	base := map[string]generation.Entry{}
	if snap != nil {
		res.Seq, res.Generation, res.Parent = snap.Seq(), snap.Generation(), snap.Pointer.Parent
		for _, e := range snap.Files() {
			if strings.HasPrefix(e.Path, opts.Into) {
				base[e.Path] = e
			} else {
				res.Kept++
			}
		}
	}
	if maxDelete.set {
		paths := make(map[string]bool, len(base))
		for p := range base {
			paths[p] = true
		}
		if err := maxDelete.check(paths, files); err != nil {
			return err
		}
	}

	// Hash the files that could be reused, in parallel.
	reused := make([]bool, len(files))
	var modeChanged atomic.Bool
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for i, f := range files {
		old, ok := base[f.path]
		if !ok || opts.NoReuse || old.Size != f.size {
			continue
		}
		g.Go(func() error {
			same, err := sameSHA256(gctx, f.local, old.SHA256)
			if err != nil {
				return err
			}
			reused[i] = same
			if same && old.Mode != generation.FormatMode(f.info.Mode()) {
				modeChanged.Store(true)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}

	sum := newSummary("put", "uploaded", "reused")
	sum.gone, sum.dryRun = "removed", true
	sum.Files = len(files)
	inSRC := make(map[string]bool, len(files))
	for i, f := range files {
		inSRC[f.path] = true
		res.Bytes += f.size
		if reused[i] {
			res.Reused++
			sum.Reused++
			sum.ReusedBytes += f.size
			opts.fileAction(stderr, "would reuse", f.path)
		} else {
			sum.Transferred++
			sum.TransferredBytes += f.size
			opts.fileAction(stderr, "would upload", f.path)
		}
	}
	for p := range base {
		if !inSRC[p] {
			sum.Deleted++
			opts.fileAction(stderr, "would remove", p)
		}
	}
	res.Unchanged = snap != nil && res.Reused == len(files) && sum.Deleted == 0 && !modeChanged.Load()
	sum.finish(start)
	res.Summary = sum
	if opts.JSON {
		return writeJSON(stdout, res)
	}
	out := opts.out(stdout)
	at := "on a dataset without commits"
	if snap != nil {
		at = fmt.Sprintf("on seq %d generation %s", res.Seq, res.Generation)
	}
	switch {
	case res.Unchanged && !opts.AllowUnchanged:
		fmt.Fprintf(out, "dry run %s: unchanged, it already holds exactly these files (%s, %s); a put would commit nothing\n",
			at, plural(res.Files, "file"), humanBytes(res.Bytes))
	case opts.Into != "":
		fmt.Fprintf(out, "dry run %s: a put would commit %s under %s (%d reused), %s; %s outside it kept; nothing was written\n",
			at, plural(res.Files, "file"), opts.Into, res.Reused, humanBytes(res.Bytes), plural(res.Kept, "file"))
	default:
		fmt.Fprintf(out, "dry run %s: a put would commit %s (%d reused), %s; nothing was written\n",
			at, plural(res.Files, "file"), res.Reused, humanBytes(res.Bytes))
	}
	sum.write(out)
	return nil
}

// sameSHA256 reports whether the local file's sha256 is want.
func sameSHA256(ctx context.Context, local, want string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	f, err := os.Open(local)
	if err != nil {
		return false, fmt.Errorf("SRC %s: %w", local, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, fmt.Errorf("SRC %s: read: %w", local, err)
	}
	return hex.EncodeToString(h.Sum(nil)) == want, nil
}
