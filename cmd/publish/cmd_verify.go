package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
)

type verifyOptions struct {
	*globalOptions
	URL         string
	All         bool
	Concurrency int
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
objects of generations it is removing look missing under --all.` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted) + `
  (1 also when a problem was found)`,
		Example: `  publish verify s3://bucket/daily
  publish verify --all --json file:///srv/datasets/app`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL = args[0]
			return runVerify(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "verify every retained generation, not only the current one")
	cmd.Flags().IntVar(&opts.Concurrency, "concurrency", 16, "parallel reads")
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
}

func runVerify(ctx context.Context, opts verifyOptions, stdout, stderr io.Writer) error {
	if opts.Concurrency < 1 {
		return usagef("--concurrency must be at least 1")
	}
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
			shared.Path = "" // the same object under another path is the same check
			if seen[shared] {
				continue
			}
			seen[shared] = true
			jobs = append(jobs, job{m, e})
			total += e.Size
		}
	}
	res.Objects = len(jobs)

	bar := newProgress(stderr, opts.globalOptions, total, "verifying", true)
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	for _, j := range jobs {
		g.Go(func() error {
			n, err := verifyEntry(gctx, snap, j.e)
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

	if opts.JSON {
		if err := writeJSON(stdout, res); err != nil {
			return err
		}
	} else {
		for _, p := range res.Problems {
			fmt.Fprintf(stdout, "FAIL seq %d %s (key %q): %s\n", p.Seq, p.Path, p.Key, p.Error)
		}
		status := "ok"
		if len(res.Problems) > 0 {
			status = fmt.Sprintf("%d problems", len(res.Problems))
		}
		fmt.Fprintf(stdout, "verified %d objects (%s) of %d generations: %s\n", res.Objects, humanBytes(res.Bytes), res.Generations, status)
	}
	if len(res.Problems) > 0 {
		return fmt.Errorf("verify %s: %d problems found", redact(opts.URL), len(res.Problems))
	}
	return nil
}

// verifyEntry reads one object to its end, checking size and sha256.
func verifyEntry(ctx context.Context, snap *commit.Snapshot, e generation.Entry) (int64, error) {
	rc, err := snap.OpenEntry(ctx, e)
	if errors.Is(err, commit.ErrCollected) {
		return 0, errors.New("object is missing")
	}
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	return io.Copy(io.Discard, rc)
}
