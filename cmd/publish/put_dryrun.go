package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
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
func dryRunPut(ctx context.Context, opts putOptions, files []srcFile, maxDelete *commit.DeleteLimit, stdout, stderr io.Writer, start time.Time) error {
	d, err := opts.openDataset(ctx, opts.URL, opts.manifestCache())
	if err != nil {
		return err
	}
	base, err := readPutBase(ctx, d, opts.URL, opts.Into)
	if err != nil {
		return err
	}
	res := putResult{DryRun: true, Files: len(files), Into: opts.Into, Kept: base.kept}
	if base.snap != nil {
		res.Seq, res.Generation, res.Parent = base.snap.Seq(), base.snap.Generation(), base.snap.Pointer.Parent
	}
	if maxDelete != nil {
		if err := checkMaxDelete(*maxDelete, base.files, files); err != nil {
			return err
		}
	}
	matches, err := base.compare(ctx, files, opts.Concurrency, !opts.NoReuse)
	if err != nil {
		return err
	}

	sum := newSummary("put", "uploaded", "reused")
	sum.gone, sum.dryRun = "removed", true
	sum.Files = len(files)
	modeChanged := false
	for i, f := range files {
		res.Bytes += f.size
		if matches[i].same {
			res.Reused++
			sum.Reused++
			sum.ReusedBytes += f.size
			modeChanged = modeChanged || matches[i].modeDiffers
			opts.fileAction(stderr, "would reuse", f.path)
		} else {
			sum.Transferred++
			sum.TransferredBytes += f.size
			opts.fileAction(stderr, "would upload", f.path)
		}
	}
	for _, p := range base.missing(files) {
		sum.Deleted++
		opts.fileAction(stderr, "would remove", p)
	}
	res.Unchanged = base.snap != nil && res.Reused == len(files) && sum.Deleted == 0 && !modeChanged
	sum.finish(start)
	res.Summary = sum
	if opts.JSON {
		return writeJSON(stdout, res)
	}
	out := opts.out(stdout)
	at := "on a dataset without commits"
	if base.snap != nil {
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

// putBase is the generation a put would build on, as read without writing:
// the current snapshot (nil for a dataset without commits), its files
// under --into's prefix (all of them without --into) by path, and how
// many files lie outside the prefix.
type putBase struct {
	snap  *commit.Snapshot
	files map[string]generation.Entry
	kept  int
}

// readPutBase reads the current pointer and manifest of d, taking the
// files under the prefix into ("" for all).
func readPutBase(ctx context.Context, d *commit.Dataset, rawURL, into string) (putBase, error) {
	snap, err := d.Open(ctx)
	if err != nil && !errors.Is(err, commit.ErrNoCommits) {
		return putBase{}, describe(rawURL, err)
	}
	b := putBase{files: map[string]generation.Entry{}}
	if snap == nil {
		return b, nil
	}
	b.snap = snap
	for _, e := range snap.Files() {
		if strings.HasPrefix(e.Path, into) {
			b.files[e.Path] = e
		} else {
			b.kept++
		}
	}
	return b, nil
}

// fileMatch is how a file of SRC compares with the base's file at its path.
type fileMatch struct {
	old    generation.Entry
	inBase bool // the base has a file at this path, old
	// same: of the same size and sha256, so a put reuses it; modeDiffers:
	// same, but put would record another mode (generation.FormatMode).
	same, modeDiffers bool
}

// compare compares each file with the base's file at its path, hashing
// those of the same size, concurrency at a time. With hash false nothing
// is read and no file is the same (put --no-reuse).
func (b putBase) compare(ctx context.Context, files []srcFile, concurrency int, hash bool) ([]fileMatch, error) {
	matches := make([]fileMatch, len(files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i, f := range files {
		old, ok := b.files[f.path]
		matches[i] = fileMatch{old: old, inBase: ok}
		if !ok || !hash || old.Size != f.size {
			continue
		}
		g.Go(func() error {
			same, err := sameSHA256(gctx, f.local, old.SHA256)
			if err != nil {
				return err
			}
			matches[i].same = same
			matches[i].modeDiffers = same && old.Mode != generation.FormatMode(f.info.Mode())
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return matches, nil
}

// missing returns the paths of the base's files that files lacks, sorted:
// those a put would remove.
func (b putBase) missing(files []srcFile) []string {
	inSRC := make(map[string]bool, len(files))
	for _, f := range files {
		inSRC[f.path] = true
	}
	var out []string
	for p := range b.files {
		if !inSRC[p] {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
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
