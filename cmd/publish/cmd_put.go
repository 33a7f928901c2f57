package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

type putOptions struct {
	*globalOptions
	Src, URL    string
	Message     string
	Meta        []string
	Compress    string
	Concurrency int
	Lease       string
	LeaseTTL    time.Duration
	Wait        time.Duration
	Probe       bool
	fenceFlags
	NoReuse bool
	// NoResume uploads every file again, forgetting what an interrupted
	// put of SRC to URL staged.
	NoResume bool
	// IgnoreChanging publishes a file that changes while put reads it
	// (see the help).
	IgnoreChanging bool
	// AllowEmpty, AllowUnchanged and MaxDelete guard against publishing
	// what is most likely a mistake: see the help.
	AllowEmpty, AllowUnchanged bool
	MaxDelete                  string
	sourceOptions
	// DryRun says what would be uploaded, reused and removed, and writes
	// nothing.
	DryRun bool
}

func (o *putOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&o.Message, "message", "m", "", "commit message, kept in the pointer and the manifest")
	f.StringArrayVar(&o.Meta, "meta", nil, "metadata `key=value` kept with the commit (repeatable)")
	f.StringVar(&o.Compress, "compress", "none", "store data objects encoded: none or zstd (readers decode transparently)")
	f.IntVar(&o.Concurrency, "concurrency", 0, "parallel uploads (default: --transfers, or 256 on a remote store and 16 on a local one)")
	f.StringVar(&o.Lease, "lease", "", "commit fenced under the lease `NAME`: acquire it, and commit with its token")
	f.DurationVar(&o.LeaseTTL, "lease-ttl", 30*time.Second, "TTL of the lease taken with --lease; it is renewed every TTL/3")
	f.DurationVar(&o.Wait, "wait", 0, "with --lease, wait up to this long for the lease instead of failing at once")
	o.fenceFlags.add(cmd)
	f.BoolVar(&o.NoReuse, "no-reuse", false, "upload every file, even one the current generation holds unchanged")
	f.BoolVar(&o.NoResume, "no-resume", false, "upload every file again, ignoring (and forgetting) what an interrupted put of SRC to URL staged")
	f.BoolVar(&o.IgnoreChanging, "ignore-changing", false, "publish a file that changes while put reads it, as far as put read it, instead of failing (for logs that are always being written)")
	f.BoolVar(&o.Probe, "probe", false, "check that the store enforces conditional writes even if the dataset has commits")
	f.BoolVar(&o.AllowEmpty, "allow-empty", false, "publish SRC even if it holds no files (the new generation is empty)")
	f.BoolVar(&o.AllowUnchanged, "allow-unchanged", false, "commit even if SRC is exactly the current generation (default: say so and commit nothing)")
	f.StringVar(&o.MaxDelete, "max-delete", "", "refuse to drop more than `N` files (or N% of them) of the current generation")
	f.BoolVar(&o.DryRun, "dry-run", false, "say what would be uploaded, reused and removed, and write nothing to the store (no lease, no fencing token, no probe)")
	o.sourceOptions.addFlags(cmd, "publish SRC as the subtree `PREFIX/` of the dataset, keeping every file outside it; concurrent puts into different prefixes all commit")
}

func newPutCommand(g *globalOptions) *cobra.Command {
	opts := putOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "put SRC URL",
		Short: "Publish a directory or a file as the dataset's next generation",
		Long: `Put publishes SRC, a directory or a single file, as a new generation of the
dataset at URL, and prints the new seq and generation.

Files are staged under a fresh generation id, in parallel, hashing each
(sha256) as it streams; then the manifest is written, and one conditional
write of the pointer commits. Readers never see a partial generation. A
file whose path, size and sha256 match the current generation is reused,
not uploaded (--no-reuse uploads all); before the commit, put proves that
each reused object still exists (about one LIST per 1,000 files), and
uploads again one that is missing or damaged. Files not in SRC, files the
filters leave out, and empty directories are not in the new generation. A
single file is published under its base name. A local store inside SRC
('put . ./store') is left out. Each file's mode (at most 0777) and
modification time are recorded; get and sync restore them.

Symbolic links: --links refuse (the default) stops at a link before
anything is written; skip leaves links out; follow publishes a link's
target if it lies inside SRC, follow-any wherever it lies. Loops, dangling
links and special files are refused, naming them.

A file that changes while put reads it (its size, mtime or ctime moved)
fails the put with status 1, naming it ("PATH: changed while it was
read"), and nothing is committed. --ignore-changing publishes it as far as
put read it, up to its size when opened: right for a log that only grows,
a mix of old and new content for a file rewritten in place.

If another writer commits first, put deletes what it staged and exits with
status 3. With --into PREFIX/ (a relative path ending in '/'), SRC replaces
the subtree PREFIX/ and every file outside it is kept; when another writer
committed first without touching PREFIX/, put commits again on top of it
(a rebase) without uploading again, so jobs publishing different prefixes
all succeed.

With --lease NAME, put holds the lease while it stages and commits with
its fencing token; under 'publish run' it uses run's token
(COMMITPTR_FENCE, COMMITPTR_LEASE_ID; see --fence). The token is
registered in the pointer before staging, so a holder with a lower token
of the same lease can no longer commit (status 6).

Guards, which write nothing: an empty SRC is refused unless --allow-empty;
dropping more files than --max-delete N (or N%) is refused; an SRC that is
exactly the current generation (paths, sizes, sha256, modes; times alone
do not count) prints "unchanged" and exits 0 unless --allow-unchanged.
Under --into they look at PREFIX/ only. The first commit of a dataset
checks that the store enforces conditional writes (--probe: every put).

--dry-run reads SRC, the pointer and the manifest, prints what put would
do ("would be" uploaded, reused, removed) and writes nothing; it does not
check that reused objects still exist. 'publish status SRC URL' compares
the same way and lists the files that differ.

Resuming: an interrupted put (Ctrl-C, or a failure while staging) keeps
what it staged and records it in a journal under the user's cache
directory (publish/resume), and says so. The next put of the same SRC to
the same URL, with the same --into and object settings, references each
staged object whose file still has the same size and sha256, after
proving the object is there, and uploads only the rest. --no-resume
uploads everything again, and Ctrl-C then deletes the staged generation.
What no put resumes, 'publish gc' deletes once older than --orphan-age.
Ctrl-C during the pointer write can end with status 5: the commit may
have landed, and nothing is deleted.
` + filterHelp + exitStatus(exitOK, exitError, exitUsage, exitLost, exitHeld, exitUnknown, exitFenced, exitInterrupted),
		Example: `  publish put ./out s3://bucket/daily
  publish put -m "nightly build" --meta commit=$GIT_SHA ./out file:///srv/datasets/app
  publish put --lease nightly --compress zstd ./out s3://bucket/daily
  publish put --into region=eu/ ./out-eu s3://bucket/sales
  publish put --exclude '*.tmp' --exclude '/cache/**' --links skip ./out s3://bucket/daily
  publish put --endpoint http://127.0.0.1:9000 --path-style ./out s3://bucket/daily`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Src, opts.URL = args[0], args[1]
			if err := opts.fenceFromEnv(cmd); err != nil {
				return err
			}
			return changedSource(runPut(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr()), opts.IgnoreChanging)
		},
	}
	opts.AddFlags(cmd)
	return cmd
}

func runPut(ctx context.Context, opts putOptions, stdout, stderr io.Writer) error {
	start := time.Now()
	meta, err := parseMeta(opts.Meta)
	if err != nil {
		return err
	}
	var compress bool
	switch opts.Compress {
	case "", "none":
	case "zstd":
		compress = true
	default:
		return usagef("--compress %q: want none or zstd", opts.Compress)
	}
	if opts.Concurrency < 0 {
		return usagef("--concurrency must be at least 1, or 0 for the default")
	}
	opts.Concurrency = opts.workers(opts.URL, opts.Concurrency)
	maxDelete, err := parseMaxDelete(opts.MaxDelete)
	if err != nil {
		return err
	}
	// Look at SRC before touching the store: a bad SRC writes nothing.
	files, err := collectSource(ctx, opts.globalOptions, &opts.sourceOptions, opts.Src, opts.URL, stderr)
	if err != nil {
		return err
	}
	if len(files) == 0 && !opts.AllowEmpty {
		if opts.Into != "" {
			return fmt.Errorf("SRC %s holds no files: publishing it would empty %s; pass --allow-empty if that is what you want (or 'publish rm --into')", opts.Src, opts.Into)
		}
		return fmt.Errorf("SRC %s holds no files: publishing it would replace the dataset with an empty generation; pass --allow-empty if that is what you want", opts.Src)
	}
	if opts.DryRun {
		return dryRunPut(ctx, opts, files, maxDelete, stdout, stderr, start)
	}
	d, err := opts.openDataset(ctx, opts.URL, opts.manifestCache(), commit.WithConcurrency(opts.Concurrency), commit.WithCompression(compress), commit.WithReuse(!opts.NoReuse))
	if err != nil {
		return err
	}
	s := d.Store()
	for _, f := range files {
		if err := d.CheckPath(f.path); err != nil {
			return fmt.Errorf("SRC %s: %s cannot be published: %w", opts.Src, f.local, err)
		}
	}

	fence, fenceLease := opts.Fence, opts.FenceLease
	var held *lease.Lease
	if opts.Lease != "" {
		if err := probeNewLease(ctx, s, opts.URL, opts.Lease, stderr); err != nil {
			return err
		}
		held, err = acquireLease(ctx, s, opts.Lease, opts.LeaseTTL, opts.Wait, "")
		if err != nil {
			return err
		}
		defer releaseLease(held, opts.globalOptions)
		held.KeepAlive(ctx)
		fence = held.Token()
		if fenceLease, err = lease.Identity(opts.URL, opts.Lease); err != nil {
			return err
		}
		opts.log().Info("lease acquired", "name", opts.Lease, "token", fence)
	}
	if fence != 0 {
		// Before staging: from now on a lower token of this lease cannot
		// commit, even one whose holder was paused past its TTL.
		if err := d.RegisterFence(ctx, fenceLease, fence); err != nil {
			return describe(opts.URL, err)
		}
	}

	// With the manifest this machine committed last, files that differ
	// from it upload while the pointer is read. A first write is probed
	// before it commits: before staging after Begin, after it after
	// BeginAhead, which learns only then that there is no pointer.
	expected := opts.lastHead(opts.URL)
	ahead := expected != "" && !opts.Probe
	var tx *commit.Tx
	if ahead {
		tx, err = d.BeginAhead(ctx, expected)
	} else {
		tx, err = d.Begin(ctx)
	}
	if err != nil {
		return describe(opts.URL, err)
	}
	if !ahead && (tx.Base() == nil || opts.Probe) {
		// No pointer yet: the first write to this dataset. Prove the
		// store enforces the conditions everything else relies on.
		if err := probeStore(ctx, s, opts.URL, stderr); err != nil {
			tx.Discard(context.WithoutCancel(ctx)) //nolint:errcheck // nothing was staged
			return probeError(opts.URL, err)
		}
	}
	kept := 0
	if opts.Into != "" {
		if _, kept, err = tx.ReplacePrefix(ctx, opts.Into); err != nil {
			tx.Discard(context.WithoutCancel(ctx)) //nolint:errcheck // nothing was staged
			return describe(opts.URL, err)
		}
	}
	if maxDelete != nil {
		// The files it replaces cost the base manifest's GET, which a put
		// reads anyway to reuse files, except with --no-reuse.
		replaced, err := tx.Replaced(ctx)
		if err == nil {
			err = checkMaxDelete(*maxDelete, replaced, files)
		}
		if err != nil {
			tx.Discard(context.WithoutCancel(ctx)) //nolint:errcheck // nothing was staged
			return describe(opts.URL, err)
		}
	}
	j := resumeJournal(opts, tx)
	defer j.finish(true) //nolint:errcheck // a journal left open is kept for the next put
	opts.log().Info("staging", "generation", tx.Generation(), "files", len(files))

	staged := stage(ctx, opts, tx, files, j, stderr)
	if ahead {
		// The pointer was read while files uploaded. If it could not be,
		// the dataset needs looking at, not a resume: what was staged is
		// deleted, as Begin would have written nothing.
		if err := tx.WaitBase(ctx); err != nil && ctx.Err() == nil {
			j.finish(false) //nolint:errcheck // what it names is deleted now
			return discardStaged(ctx, opts.URL, tx, describe(opts.URL, err), stderr)
		}
	}
	if staged != nil {
		return keepOrDiscard(ctx, opts, tx, j, staged, stderr)
	}
	if held != nil && !held.Held() {
		return keepOrDiscard(ctx, opts, tx, j, fmt.Errorf("lease %q lost while staging: %w", opts.Lease, lease.ErrLost), stderr)
	}
	if ahead && tx.Base() == nil {
		// The dataset has no pointer any more: a first write is probed
		// before it commits.
		if err := probeStore(ctx, s, opts.URL, stderr); err != nil {
			return discardStaged(ctx, opts.URL, tx, probeError(opts.URL, err), stderr)
		}
	}
	if !opts.AllowUnchanged {
		same, err := tx.Unchanged(ctx)
		if err != nil {
			return keepOrDiscard(ctx, opts, tx, j, err, stderr)
		}
		if same {
			tx.Discard(context.WithoutCancel(ctx)) //nolint:errcheck // nothing was staged
			j.finish(false)                        //nolint:errcheck // it recorded only reuses of the current generation
			return reportUnchanged(stdout, opts, tx.Base(), files, fence, fenceLease, start)
		}
	}
	// From here what the journal names may be committed, even by a put
	// killed before it returns, so no later put may resume it.
	if err := j.finish(false); err != nil {
		opts.log().Warn("cannot remove the journal before the commit", "err", err)
	}
	p, err := tx.Commit(ctx, commit.CommitOptions{Message: opts.Message, Meta: meta, Fence: fence, FenceLease: fenceLease})
	if err != nil {
		if errors.Is(err, commit.ErrCommitUnknown) {
			gen := tx.Generation()
			if a := tx.Attempted(); a != nil {
				gen = a.Generation
			}
			return fmt.Errorf("%w\ngeneration %s was kept; run 'publish show %s' to see whether it is current", err, gen, redact(opts.URL))
		}
		if ctx.Err() != nil && tx.Leftover() == nil {
			fmt.Fprintf(stderr, "publish: interrupted while committing; staged generation %s was discarded\n", tx.Generation())
		}
		return withLeftover(describe(opts.URL, err), opts.URL, tx)
	}
	opts.noteHead(opts.URL, p.ManifestSHA256)
	res := putResult{Seq: p.Seq, Generation: p.Generation, Parent: p.Parent, Files: len(files), Reused: tx.Reused(), Resumed: tx.Resumed(), Repaired: tx.Repaired(), Fence: fence, FenceLease: fenceLease,
		Into: opts.Into, Kept: kept, Rebased: tx.Rebased(), Carried: tx.CarriedBy() != ""}
	res.Summary = newSummary("put", "uploaded", "reused")
	res.Summary.Files = len(files)
	for _, f := range files {
		res.Bytes += f.size
		switch {
		case tx.Reuses(f.path):
			res.Summary.Reused++
			res.Summary.ReusedBytes += f.size
		case tx.Resumes(f.path):
			res.Summary.Resumed++
			res.Summary.ResumedBytes += f.size
		default:
			res.Summary.Transferred++
			res.Summary.TransferredBytes += f.size
		}
	}
	res.Summary.finish(start)
	if opts.JSON {
		return writeJSON(stdout, res)
	}
	stdout = opts.out(stdout)
	var repaired string
	if res.Resumed > 0 {
		repaired = fmt.Sprintf(", %d resumed", res.Resumed)
	}
	if res.Repaired > 0 {
		repaired += fmt.Sprintf(", %d uploaded again: their stored objects were missing or damaged", res.Repaired)
	}
	if res.Into != "" {
		rebased := rebaseNote(res.Rebased, res.Carried)
		fmt.Fprintf(stdout, "committed seq %d generation %s: %s under %s (%d reused%s), %s; %s outside it kept%s\n",
			res.Seq, res.Generation, plural(res.Files, "file"), res.Into, res.Reused, repaired, humanBytes(res.Bytes), plural(res.Kept, "file"), rebased)
	} else {
		fmt.Fprintf(stdout, "committed seq %d generation %s: %s (%d reused%s), %s\n",
			res.Seq, res.Generation, plural(res.Files, "file"), res.Reused, repaired, humanBytes(res.Bytes))
	}
	res.Summary.write(stdout)
	return nil
}

// localStoreDir is the directory of a file:// store (a plain path is
// one), or "" for a store of another kind: put leaves it out of SRC, so
// that 'put . ./store' does not publish the store's own objects.
func localStoreDir(rawURL string) string {
	u, err := store.ParseURL(rawURL)
	if err != nil || u.Scheme != "file" {
		return ""
	}
	return filepath.FromSlash(u.Path)
}

// stage uploads the files in parallel, recording in j (if not nil) each
// file it staged or resumed.
func stage(ctx context.Context, opts putOptions, tx *commit.Tx, files []srcFile, j *journal, stderr io.Writer) error {
	var total int64
	for _, f := range files {
		total += f.size
	}
	bar := newProgress(stderr, opts.globalOptions, total, len(files), "uploading", true)
	defer bar.Finish()
	var changing []commit.FileOption
	if opts.IgnoreChanging {
		changing = append(changing, commit.IgnoreChanges())
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	// The reused files are proven while the others upload. Under --into
	// the proof waits for Commit, which knows which files a group commit
	// may carry.
	var proof *commit.ReuseProof
	if opts.Into == "" {
		proof = tx.NewReuseProof(ctx, len(files))
		changing = append(changing, proof.Option())
	}
	heavy := newHeavyGate()
	compressing := opts.Compress == "zstd"
	for _, f := range files {
		g.Go(func() error {
			leave, err := heavy.enter(gctx, heavyUpload(f.size, compressing))
			if err != nil {
				return err
			}
			defer leave()
			if err := tx.PutFile(gctx, f.path, f.local, append([]commit.FileOption{commit.Expect(f.info)}, changing...)...); err != nil {
				return err
			}
			action := "uploaded"
			switch {
			case tx.Reuses(f.path):
				action = "reused"
			case tx.Resumes(f.path):
				action = "resumed"
			}
			if action != "reused" {
				if e, ok := tx.Entry(f.path); ok {
					j.record(e)
				}
			}
			opts.fileAction(stderr, action, f.path)
			bar.Add(f.size)
			return nil
		})
	}
	err := g.Wait()
	if proof != nil {
		err = errors.Join(err, proof.Wait())
	}
	return err
}

// changedSource says in the user's terms that a file of SRC changed while
// put read it (to upload it, to compare it with the current generation,
// or to upload again a file whose stored object turned out missing), and
// what to do; other errors it returns as they are.
func changedSource(err error, ignoring bool) error {
	var ce *commit.ChangedError
	if !errors.As(err, &ce) {
		return err
	}
	hint := "publish again once it is complete, or pass --ignore-changing to publish what put reads of a file that is always being written, such as a log"
	if ignoring {
		hint = "--ignore-changing publishes a file that grows or is rewritten while put reads it, not one cut short"
	}
	return fmt.Errorf("%s: %w (%s); nothing was committed: %s", ce.Local, commit.ErrChanged, ce.What, hint)
}

// resumeJournal opens the journal of this put and offers tx what it
// recorded. It returns nil with --no-resume, which forgets the journal,
// and when the journal cannot be used, which costs only the resume.
func resumeJournal(opts putOptions, tx *commit.Tx) *journal {
	dir, err := journalDir()
	if err != nil {
		opts.log().Warn("no cache directory for the journal; an interrupted put will not resume", "err", err)
		return nil
	}
	settings := []string{opts.SSE, opts.SSEKMSKeyID, opts.StorageClass}
	if key, err := opts.customerKey(); err == nil && key != nil {
		sum := sha256.Sum256(key)
		settings = append(settings, hex.EncodeToString(sum[:]))
	}
	src := opts.Src
	if abs, err := filepath.Abs(src); err == nil {
		src = abs
	}
	path := filepath.Join(dir, journalName(opts.URL, src, opts.Into, settings))
	if opts.NoResume {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			opts.log().Warn("cannot remove the journal of an earlier put", "journal", path, "err", err)
		}
		return nil
	}
	h := journalHeader{Format: journalFormat, Dataset: redact(opts.URL), Source: src, Into: opts.Into}
	j, entries, err := openJournal(path, h)
	if err != nil {
		opts.log().Warn("cannot open the journal; an interrupted put will not resume", "journal", path, "err", err)
		return nil
	}
	if len(entries) == 0 {
		return j
	}
	if err := tx.Resume(entries); err != nil {
		// Not what a put records: start the journal again.
		opts.log().Warn("ignoring a journal that a put did not write", "journal", path, "err", err)
		j.finish(false) //nolint:errcheck // opened again below
		if j, _, err = openJournal(path, h); err != nil {
			return nil
		}
		return j
	}
	opts.log().Info("resuming", "staged", len(entries), "journal", path)
	return j
}

// keepOrDiscard ends a put whose staging failed or was interrupted. It
// keeps what was staged for the next put, when the journal recorded it,
// and says so; otherwise it deletes it (see discardStaged).
//
// A put that recorded nothing deletes what it staged, but keeps the
// journal of an earlier put, whose objects stay resumable.
func keepOrDiscard(ctx context.Context, opts putOptions, tx *commit.Tx, j *journal, cause error, stderr io.Writer) error {
	n, dirs := j.held()
	if j.recorded() == 0 {
		if n == 0 || j.finish(true) != nil {
			j.finish(false) //nolint:errcheck // nothing it names is resumable
			return discardStaged(ctx, opts.URL, tx, cause, stderr)
		}
		err := discardStaged(ctx, opts.URL, tx, cause, stderr)
		fmt.Fprintf(stderr, "publish: kept what an earlier put staged, %s under %s of %s: putting %s there again resumes from them (--no-resume starts over)\n",
			plural(n, "file"), strings.Join(dirs, " and "), redact(opts.URL), opts.Src)
		return err
	}
	if j.finish(true) != nil {
		j.finish(false) //nolint:errcheck // what it names is deleted now
		return discardStaged(ctx, opts.URL, tx, cause, stderr)
	}
	what := "interrupted"
	if ctx.Err() == nil {
		what = "failed"
	}
	fmt.Fprintf(stderr, "publish: %s; kept %s staged so far under %s of %s: putting %s there again resumes from them (--no-resume starts over), and 'publish gc' deletes them once older than its --orphan-age\n",
		what, plural(n, "file"), strings.Join(dirs, " and "), redact(opts.URL), opts.Src)
	return cause
}

// discardStaged deletes a generation that will not be committed, on a
// fresh context so that it also runs after Ctrl-C, and says what happened:
// the error cause, and what is left if the delete failed.
func discardStaged(ctx context.Context, url string, tx *commit.Tx, cause error, stderr io.Writer) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if tx.Discard(dctx) == nil && ctx.Err() != nil {
		fmt.Fprintf(stderr, "publish: interrupted; staged generation %s was discarded\n", tx.Generation())
	}
	return withLeftover(cause, url, tx)
}

// withLeftover adds to err, why tx did not commit, what tx left in the
// dataset at url when it could not delete what it staged, and how that
// goes.
func withLeftover(err error, url string, tx *commit.Tx) error {
	left := tx.Leftover()
	if left == nil {
		return err
	}
	var dirs []string
	count := map[string]int{}
	for _, k := range left.Keys {
		// The directory of its generation (_gen/<id>/) or of its intents.
		dir := k
		if i := strings.Index(k, "/"); i >= 0 {
			if j := strings.Index(k[i+1:], "/"); j >= 0 {
				dir = k[:i+1+j+1]
			}
		}
		if count[dir] == 0 {
			dirs = append(dirs, dir)
		}
		count[dir]++
	}
	where := make([]string, len(dirs))
	for i, dir := range dirs {
		where[i] = fmt.Sprintf("%s under %s", plural(count[dir], "object"), dir)
	}
	them := "them"
	if len(left.Keys) == 1 {
		them = "it"
	}
	return fmt.Errorf("%w\nleft %s of %s: deleting what it staged failed: %w\nnothing references %s: 'publish gc' deletes %s once older than its --orphan-age (24h by default), or delete %s yourself",
		err, strings.Join(where, ", "), redact(url), left.Err, them, them, them)
}

// fenceFromEnv fills --fence and --fence-lease from what 'publish run'
// exports, unless --lease brings its own token.
func (o *putOptions) fenceFromEnv(cmd *cobra.Command) error {
	if o.Lease != "" {
		// --lease brings its own token and identity.
		if cmd.Flags().Changed("fence") || cmd.Flags().Changed("fence-lease") {
			return usagef("--lease takes its own token; it cannot be combined with --fence or --fence-lease")
		}
		return nil
	}
	return o.fenceFlags.fromEnv(cmd)
}

// fenceFlags are --fence and --fence-lease: a fencing token and the
// identity of the lease that issued it.
type fenceFlags struct {
	Fence      uint64
	FenceLease string
}

func (o *fenceFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.Uint64Var(&o.Fence, "fence", 0, "commit with this fencing token of the lease --fence-lease (default: $COMMITPTR_FENCE, which 'publish run' sets)")
	f.StringVar(&o.FenceLease, "fence-lease", "", "the identity of the lease that issued --fence, as 'publish run' exports it (default: $COMMITPTR_LEASE_ID)")
}

// fromEnv takes the flags not given from $COMMITPTR_FENCE and
// $COMMITPTR_LEASE_ID, and checks that a token comes with its lease.
func (o *fenceFlags) fromEnv(cmd *cobra.Command) error {
	if !cmd.Flags().Changed("fence") {
		if v := os.Getenv("COMMITPTR_FENCE"); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil || n == 0 {
				return usagef("COMMITPTR_FENCE=%q is not a fencing token", v)
			}
			o.Fence = n
		}
	}
	if !cmd.Flags().Changed("fence-lease") {
		o.FenceLease = os.Getenv("COMMITPTR_LEASE_ID")
	}
	switch {
	case o.Fence != 0 && o.FenceLease == "":
		return usagef("fencing token %d comes without the identity of its lease: pass --fence-lease, or set COMMITPTR_LEASE_ID as 'publish run' does", o.Fence)
	case o.Fence == 0 && o.FenceLease != "" && cmd.Flags().Changed("fence-lease"):
		return usagef("--fence-lease needs --fence")
	}
	return nil
}

// reportUnchanged says that SRC is the current generation already.
// A fencing token was registered all the same.
func reportUnchanged(stdout io.Writer, opts putOptions, p *pointer.Pointer, files []srcFile, fence uint64, fenceLease string, start time.Time) error {
	opts.noteHead(opts.URL, p.ManifestSHA256)
	res := putResult{Seq: p.Seq, Generation: p.Generation, Parent: p.Parent, Files: len(files), Reused: len(files), Unchanged: true,
		Fence: fence, FenceLease: fenceLease}
	res.Summary = newSummary("put", "uploaded", "reused")
	res.Summary.Files, res.Summary.Reused = len(files), len(files)
	for _, f := range files {
		res.Bytes += f.size
	}
	res.Summary.ReusedBytes = res.Bytes
	res.Summary.finish(start)
	if opts.JSON {
		return writeJSON(stdout, res)
	}
	stdout = opts.out(stdout)
	fmt.Fprintf(stdout, "unchanged: seq %d generation %s already holds exactly these files (%s, %s); nothing committed (--allow-unchanged commits anyway)\n",
		res.Seq, res.Generation, plural(res.Files, "file"), humanBytes(res.Bytes))
	return nil
}

// parseMaxDelete reads --max-delete; nil when it is not set.
func parseMaxDelete(v string) (*commit.DeleteLimit, error) {
	if v == "" {
		return nil, nil
	}
	l, err := commit.ParseDeleteLimit(v)
	if err != nil {
		return nil, usagef("--max-delete %q: want a number of files, or a percentage from 0%% to 100%%", v)
	}
	return &l, nil
}

// checkMaxDelete refuses a put of files that drops more of the files it
// replaces than --max-delete allows, before anything is written.
func checkMaxDelete(l commit.DeleteLimit, replaced map[string]generation.Entry, files []srcFile) error {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.path
	}
	var e *commit.DeleteLimitError
	if err := l.Check(replaced, paths); errors.As(err, &e) {
		return fmt.Errorf("refusing to publish: it would drop %d of the current generation's %d files, more than --max-delete %s allows; nothing was written", e.Dropped, e.Replaced, e.Limit)
	} else if err != nil {
		return err
	}
	return nil
}
