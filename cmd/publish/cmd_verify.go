package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/localfile"
)

type verifyOptions struct {
	*globalOptions
	URL         string
	All         bool
	Concurrency int
	Repair      string
}

func newVerifyCommand(g *globalOptions) *cobra.Command {
	opts := verifyOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "verify URL",
		Short: "Check that every object of the current generation exists and matches its checksum",
		Long: `Verify is fsck for a dataset. It reads the pointer and the manifest it names
(checking the manifest's sha256), then reads every object the manifest
references and checks its size and sha256. With --all it does the same for
every retained generation along the parent chain, back to where the
collector removed older history; an object shared by several generations is
read once.

Every problem is listed with its path and object key. Verify reads every
byte, so it costs one GET per object. A collector run in progress can make
objects of generations it is removing look missing under --all.

With --repair SRC, the damaged files of the current generation are
uploaded again from SRC, the directory it was published from, and
committed as the next generation with every other file kept by
reference. A file in SRC whose size or sha256 differs from the manifest is
refused, so a repair never changes content, and so is one that changes
while it is uploaded (its size, modification time or status change time
moves, as for put). Status 0 then means every problem of the current
generation was repaired.` + exitStatus(exitOK, exitError, exitUsage, exitLost, exitFenced, exitUnknown, exitInterrupted) + `
  (1 also when a problem was found and not repaired)`,
		Example: `  publish verify s3://bucket/daily
  publish verify --all --json file:///srv/datasets/app
  publish verify --repair ./out s3://bucket/daily`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL = args[0]
			return runVerify(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "verify every retained generation, not only the current one")
	cmd.Flags().IntVar(&opts.Concurrency, "concurrency", 0, "parallel reads (default: --transfers, or 256 on a remote store and 16 on a local one)")
	cmd.Flags().StringVar(&opts.Repair, "repair", "", "upload damaged files of the current generation again from the directory `SRC` and commit")
	return cmd
}

type verifyProblem struct {
	Seq        uint64 `json:"seq"`
	Generation string `json:"generation"`
	Path       string `json:"path,omitempty"`
	Key        string `json:"key,omitempty"`
	Error      string `json:"error"`
}

type verifyResult struct {
	Generations int             `json:"generations"`
	Objects     int             `json:"objects"`
	Bytes       int64           `json:"bytes"`
	Problems    []verifyProblem `json:"problems"`
	// Summary is the final line's numbers.
	Summary *summary `json:"summary,omitempty"`
	// Repaired is the commit that replaced the damaged files (--repair).
	Repaired *putResult `json:"repaired,omitempty"`
}

func runVerify(ctx context.Context, opts verifyOptions, stdout, stderr io.Writer) error {
	start := time.Now()
	if opts.Concurrency < 0 {
		return usagef("--concurrency must be at least 1, or 0 for the default")
	}
	opts.Concurrency = opts.workers(opts.URL, opts.Concurrency)
	d, err := opts.openDataset(ctx, opts.URL)
	if err != nil {
		return err
	}
	snap, err := openSnapshot(ctx, d, opts.URL, "")
	if err != nil {
		return err
	}
	res := verifyResult{Problems: []verifyProblem{}}
	manifests := []*generation.Manifest{snap.Manifest}
	if opts.All {
		manifests = nil
		for m, err := range d.History(ctx, snap) {
			if errors.Is(err, commit.ErrCollected) {
				break
			}
			if err != nil {
				last := snap.Manifest
				if len(manifests) > 0 {
					last = manifests[len(manifests)-1]
				}
				res.Problems = append(res.Problems, verifyProblem{Seq: last.Seq - 1, Generation: last.Parent, Key: generation.ManifestKey(last.Parent), Error: err.Error()})
				break
			}
			manifests = append(manifests, m)
		}
	}
	res.Generations = len(manifests)

	type job struct {
		m *generation.Manifest
		e generation.Entry
	}
	var jobs []job
	var total int64
	seen := map[generation.Entry]bool{}
	for _, m := range manifests {
		for _, e := range m.Entries {
			shared := e
			// The same object under another path, or with another mode
			// or time, is the same check.
			shared.Path, shared.Mode, shared.MTime = "", "", time.Time{}
			if seen[shared] {
				continue
			}
			seen[shared] = true
			jobs = append(jobs, job{m, e})
			total += e.Size
		}
	}
	res.Objects = len(jobs)

	bar := newProgress(stderr, opts.globalOptions, total, len(jobs), "verifying", true)
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	heavy := newHeavyGate()
	for _, j := range jobs {
		g.Go(func() error {
			leave, err := heavy.enter(gctx, heavyDownload(j.e))
			if err != nil {
				return err
			}
			n, err := verifyEntry(gctx, snap, j.e)
			leave()
			if gctx.Err() != nil {
				return gctx.Err()
			}
			mu.Lock()
			res.Bytes += n
			if err != nil {
				res.Problems = append(res.Problems, verifyProblem{Seq: j.m.Seq, Generation: j.m.Generation, Path: j.e.Path, Key: j.e.Key, Error: err.Error()})
			}
			mu.Unlock()
			bar.Add(j.e.Size)
			return nil
		})
	}
	err = g.Wait()
	bar.Finish()
	if err != nil {
		return err
	}

	var repairErr error
	if opts.Repair != "" && len(res.Problems) > 0 {
		res.Repaired, repairErr = repairFrom(ctx, d, opts, snap, res.Problems)
	}
	res.Summary = newSummary("verify", "read", "")
	res.Summary.Files, res.Summary.Transferred, res.Summary.TransferredBytes = res.Objects, res.Objects, res.Bytes
	res.Summary.finish(start)
	if opts.JSON {
		if err := writeJSON(stdout, res); err != nil {
			return err
		}
	} else {
		// Problems are printed with -q too: they are what verify is for.
		for _, p := range res.Problems {
			fmt.Fprintf(stdout, "FAIL seq %d %s (key %q): %s\n", p.Seq, p.Path, p.Key, p.Error)
		}
		stdout := opts.out(stdout)
		defer res.Summary.write(stdout)
		status := "ok"
		if len(res.Problems) > 0 {
			status = plural(len(res.Problems), "problem")
		}
		fmt.Fprintf(stdout, "verified %s (%s) of %s: %s\n", plural(res.Objects, "object"), humanBytes(res.Bytes), plural(res.Generations, "generation"), status)
		if r := res.Repaired; r != nil {
			fmt.Fprintf(stdout, "repaired %s from %s: committed seq %d generation %s\n", plural(r.Files-r.Reused, "file"), opts.Repair, r.Seq, r.Generation)
		}
	}
	if repairErr != nil {
		return repairErr
	}
	if res.Repaired != nil {
		return nil // every problem was in the current generation, and is repaired
	}
	if len(res.Problems) > 0 {
		return fmt.Errorf("verify %s: %s found", redact(opts.URL), plural(len(res.Problems), "problem"))
	}
	return nil
}

// verifyEntry reads one object to its end, checking size and sha256, and
// the part checksums if the entry has them.
func verifyEntry(ctx context.Context, snap *commit.Snapshot, e generation.Entry) (int64, error) {
	rc, err := snap.OpenEntry(ctx, e)
	if errors.Is(err, commit.ErrCollected) || errors.Is(err, commit.ErrMissing) {
		return 0, errors.New("object is missing")
	}
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	if !e.HasParts() {
		return io.Copy(io.Discard, rc)
	}
	parts := generation.NewPartHasher(e.PartSize)
	n, err := io.Copy(parts, rc)
	if err != nil {
		return n, err
	}
	if _, got := parts.Parts(); got != e.Parts {
		return n, fmt.Errorf("%w: %q (key %q) matches its sha256, but not its part checksums: a reader of its ranges fails", commit.ErrChecksum, e.Path, e.Key)
	}
	return n, nil
}

// repairFrom commits the current generation again with the files that
// have problems uploaded from src, after checking each against its
// manifest entry. It refuses when the pointer moved since verification,
// or when a problem lies outside the current generation.
func repairFrom(ctx context.Context, d *commit.Dataset, opts verifyOptions, snap *commit.Snapshot, problems []verifyProblem) (*putResult, error) {
	type fix struct {
		e     generation.Entry
		local string
	}
	var fixes []fix
	for _, p := range problems {
		e, ok := snap.Manifest.Find(p.Path)
		if p.Generation != snap.Generation() || p.Path == "" || !ok {
			return nil, fmt.Errorf("repair: %s (key %q) is not a file of the current generation; only those are repaired", p.Path, p.Key)
		}
		local := filepath.Join(opts.Repair, filepath.FromSlash(p.Path))
		if err := matchesEntry(local, e); err != nil {
			return nil, fmt.Errorf("repair %s: %w", p.Path, err)
		}
		fixes = append(fixes, fix{e, local})
	}
	tx, err := d.Begin(ctx)
	if err != nil {
		return nil, describe(opts.URL, err)
	}
	defer tx.Discard(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op once committed
	if b := tx.Base(); b == nil || b.Generation != snap.Generation() {
		return nil, fmt.Errorf("repair: dataset %s changed since it was verified; verify again", redact(opts.URL))
	}
	if err := tx.KeepAll(ctx); err != nil {
		return nil, describe(opts.URL, err)
	}
	for _, f := range fixes {
		if err := putLocal(ctx, tx, f.e, f.local); err != nil {
			return nil, err
		}
	}
	p, err := tx.Commit(ctx, commit.CommitOptions{Message: fmt.Sprintf("repair of seq %d", snap.Seq())})
	if err != nil {
		if errors.Is(err, commit.ErrCommitUnknown) {
			return nil, fmt.Errorf("%w\ngeneration %s was kept; run 'publish show %s' to see whether it is current", err, tx.Generation(), redact(opts.URL))
		}
		return nil, withLeftover(describe(opts.URL, err), opts.URL, tx)
	}
	res := &putResult{Seq: p.Seq, Generation: p.Generation, Parent: p.Parent, Files: len(snap.Files()), Bytes: snap.Manifest.TotalSize(), Fence: p.Fence}
	res.Reused = res.Files - len(fixes)
	return res, nil
}

// matchesEntry checks that the local file has the entry's size and sha256.
func matchesEntry(local string, e generation.Entry) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("read %s: %w", local, err)
	}
	if n != e.Size || hex.EncodeToString(h.Sum(nil)) != e.SHA256 {
		return fmt.Errorf("%s differs from the manifest entry (%d bytes, sha256 %s); it is not the published file", local, e.Size, e.SHA256)
	}
	return nil
}

// putLocal stages a local file as the entry e: its content, mode and
// time. It fails if the file no longer has e's content: it may have changed
// since matchesEntry read it, and a repair never changes what is published.
// It fails too if the file changes while it is read, naming it, as put
// does: even a write to the part read already, which leaves the upload
// right.
func putLocal(ctx context.Context, tx *commit.Tx, e generation.Entry, local string) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return err
	}
	err = tx.Restage(ctx, e, f)
	if now, serr := f.Stat(); serr == nil && ctx.Err() == nil {
		if what := localfile.Changed(before, now); what != "" {
			return fmt.Errorf("repair %s: %s: %w (%s); nothing was committed: repair again once it is complete", e.Path, local, commit.ErrChanged, what)
		}
	}
	if err != nil {
		return fmt.Errorf("repair %s: %s changed after it was checked, or could not be uploaded; nothing was committed: %w", e.Path, local, err)
	}
	return nil
}
