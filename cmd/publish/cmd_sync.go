package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
)

type syncOptions struct {
	*globalOptions
	URL, Dest   string
	Ref         refFlags
	Concurrency int
	Attrs       attrFlags
	Filters     filters
	DryRun      bool
}

func (o *syncOptions) AddFlags(cmd *cobra.Command) {
	o.Ref.AddFlags(cmd)
	cmd.Flags().IntVar(&o.Concurrency, "concurrency", 0, "parallel downloads and local checksums (default: --transfers, or 256 on a remote store and 16 on a local one)")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "say what would change, and change nothing")
	o.Attrs.AddFlags(cmd)
	o.Filters.AddFlags(cmd, "snapshot's")
}

func newSyncCommand(g *globalOptions) *cobra.Command {
	opts := syncOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "sync URL DEST",
		Short: "Update a directory in place to one snapshot, downloading only what changed",
		Long: `Sync makes the directory DEST hold the current snapshot of the dataset at URL
(or the retained one that --seq, --gen or --tag names), downloading only
the files whose content differs: a file on disk with the snapshot's size
and sha256 is kept (its mode and time are set to the recorded ones, unless
--no-perms or --no-times), every other file of the snapshot is downloaded
and verified against the manifest, and files in DEST that are not in the
snapshot are deleted, as are the directories that this leaves empty. DEST
and its missing parents are created. It prints a summary; -v adds one line
per change on stderr ("+" added, "M" content replaced, "m" only the mode or
time set, "-" deleted). --dry-run prints the same, saying what would be
done, and changes nothing.

What is atomic, and what is not. Each file is replaced atomically: it is
downloaded to a temporary name in its own directory (.NAME.publish-sync-*),
verified and synced, then renamed over the old one, so a reader opening a
file sees either its old or its new content, whole. DEST as a whole is not
replaced atomically: while sync runs, a reader can see some files of the
new snapshot beside some of the old one. Deletions come last, after every
download was verified. If a download fails, or sync is interrupted, the
files already renamed into place stay, nothing is deleted, and sync says
how many are in place: a sync again downloads only the rest. When sync
returns, its changes are durable: each file it downloaded or whose mode or
time it set was fsynced, then each directory where it created, renamed or
removed a name. For a
directory that changes all at once, use 'publish get --force' (a new
directory swapped in) or publish into a path that readers reach through a
symbolic link you switch.

Nothing is written outside DEST: every path is validated, every file is
opened through a handle that cannot leave DEST, and a symbolic link inside
DEST is never followed: a link where the snapshot has a file is deleted
and replaced by the file; a link where the snapshot needs a directory is
deleted unless filters leave it out, and then sync fails, naming it. A DEST
that is itself a symbolic link is refused.

With filters, only the files they select are downloaded or deleted: a file
in DEST that the filters leave out is left alone, whether or not it is in
the snapshot; if it is below a directory where the snapshot has a file,
sync fails, naming both.

` + filterHelp + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish sync s3://bucket/daily /srv/daily
  publish sync --exclude '*.log' --tag release s3://bucket/daily ./daily
  publish sync --dry-run file:///srv/datasets/app ./app`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL, opts.Dest = args[0], args[1]
			return runSync(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	opts.AddFlags(cmd)
	return cmd
}

// syncResult is what sync reports.
type syncResult struct {
	Seq        uint64   `json:"seq"`
	Generation string   `json:"generation"`
	Dest       string   `json:"dest"`
	DryRun     bool     `json:"dry_run,omitempty"`
	Added      []string `json:"added"`
	Updated    []string `json:"updated"`
	// Attrs are files whose content matched, but whose mode or time was set.
	Attrs     []string `json:"attrs"`
	Deleted   []string `json:"deleted"`
	Unchanged int      `json:"unchanged"`
	// Bytes is what was downloaded.
	Bytes int64 `json:"bytes"`
	// Summary is the final line's numbers.
	Summary *summary `json:"summary"`
}

// localFile is what DEST holds at a path.
type localFile struct {
	mode  fs.FileMode // type bits only matter, and the permission bits
	size  int64
	mtime int64 // UnixNano
}

func runSync(ctx context.Context, opts syncOptions, stdout, stderr io.Writer) error {
	start := time.Now()
	ref, err := opts.Ref.ref()
	if err != nil {
		return err
	}
	if opts.Concurrency < 0 {
		return usagef("--concurrency must be at least 1, or 0 for the default")
	}
	opts.Concurrency = opts.workers(opts.URL, opts.Concurrency)
	dest, err := filepath.Abs(opts.Dest)
	if err != nil {
		return fmt.Errorf("DEST %s: %w", opts.Dest, err)
	}
	fi, err := os.Lstat(dest)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("DEST %s: %w", dest, unwrapPathError(err))
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("DEST %s is a symbolic link; refusing to follow it (name the target directory instead)", dest)
	case !fi.IsDir():
		return fmt.Errorf("DEST %s exists and is not a directory", dest)
	}
	d, err := opts.openDataset(ctx, opts.URL, opts.manifestCache(), commit.WithConcurrency(opts.Concurrency))
	if err != nil {
		return err
	}
	snap, err := openSnapshot(ctx, d, opts.URL, ref)
	if err != nil {
		return err
	}
	entries := selectEntries(snap.Files(), &opts.Filters)
	for _, e := range entries {
		if err := generation.CheckPath(e.Path); err != nil {
			return err
		}
	}
	if err := checkTree(entries); err != nil {
		return err
	}
	if !opts.DryRun {
		if err := mkdirAll(dest); err != nil {
			return fmt.Errorf("DEST %s: %w", dest, unwrapPathError(err))
		}
	}
	s := &syncer{opts: opts, snap: snap, dest: dest, res: syncResult{Seq: snap.Seq(), Generation: snap.Generation(), Dest: dest, DryRun: opts.DryRun,
		Added: []string{}, Updated: []string{}, Attrs: []string{}, Deleted: []string{}}}
	if err := s.run(ctx, entries, stderr); err != nil {
		what := "interrupted"
		if ctx.Err() == nil {
			what = "failed"
		}
		switch {
		case s.past:
			// The error says what failed after the downloads.
		case s.placed > 0:
			fmt.Fprintf(stderr, "publish: %s; %d of the %s to download are in place in %s, each whole and verified, and no file was deleted: it holds a mix of old and new files, and a sync again downloads only the rest\n",
				what, s.placed, plural(s.fetching, "file"), dest)
		case ctx.Err() != nil:
			fmt.Fprintf(stderr, "publish: interrupted before a download was in place; no file of %s was replaced or deleted\n", dest)
		}
		return describe(opts.URL, err)
	}
	res := s.res
	res.Summary = newSummary("sync", "downloaded", "unchanged")
	res.Summary.dryRun = opts.DryRun
	res.Summary.Files = len(entries)
	res.Summary.Transferred = len(res.Added) + len(res.Updated)
	res.Summary.TransferredBytes = res.Bytes
	res.Summary.Deleted = len(res.Deleted)
	fetched := make(map[string]bool, res.Summary.Transferred)
	for _, p := range append(slices.Clone(res.Added), res.Updated...) {
		fetched[p] = true
	}
	for _, e := range entries {
		if !fetched[e.Path] {
			res.Summary.Reused++
			res.Summary.ReusedBytes += e.Size
		}
	}
	res.Summary.finish(start)
	if opts.JSON {
		return writeJSON(stdout, res)
	}
	// One line per change at -v, on stderr as put's and get's.
	for _, c := range []struct {
		op    string
		paths []string
	}{{"+", res.Added}, {"M", res.Updated}, {"m", res.Attrs}, {"-", res.Deleted}} {
		for _, p := range c.paths {
			opts.fileAction(stderr, c.op, p)
		}
	}
	stdout = opts.out(stdout)
	if opts.DryRun {
		fmt.Fprintf(stdout, "dry run of sync of seq %d generation %s into %s: would add %d, update %d, delete %d, leave %d unchanged (%d with mode or time to set), download %s; nothing was changed\n",
			res.Seq, res.Generation, dest, len(res.Added), len(res.Updated), len(res.Deleted), res.Unchanged+len(res.Attrs), len(res.Attrs), humanBytes(res.Bytes))
	} else {
		fmt.Fprintf(stdout, "synced seq %d generation %s into %s: %d added, %d updated, %d deleted, %d unchanged (%d with mode or time set), %s downloaded\n",
			res.Seq, res.Generation, dest, len(res.Added), len(res.Updated), len(res.Deleted), res.Unchanged+len(res.Attrs), len(res.Attrs), humanBytes(res.Bytes))
	}
	res.Summary.write(stdout)
	return nil
}

type syncer struct {
	opts syncOptions
	snap *commit.Snapshot
	dest string
	root *os.Root
	res  syncResult
	// fetching is how many files are to be downloaded, placed how many of
	// them are in place; past says that every download is, and sync went
	// on to set attributes and delete.
	fetching, placed int
	past             bool
}

func (s *syncer) run(ctx context.Context, entries []generation.Entry, stderr io.Writer) error {
	local := map[string]localFile{}
	if !s.opts.DryRun || dirExists(s.dest) {
		root, err := os.OpenRoot(s.dest)
		if err != nil {
			return fmt.Errorf("DEST %s: %w", s.dest, unwrapPathError(err))
		}
		defer root.Close()
		s.root = root
		if local, err = s.scan(); err != nil {
			return err
		}
	}
	want := make(map[string]generation.Entry, len(entries))
	dirs := map[string]bool{} // directories the snapshot's files need
	for _, e := range entries {
		want[e.Path] = e
		for d := path.Dir(e.Path); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}

	// Plan. A path in DEST that is in the way of the snapshot is dealt
	// with so that nothing is lost if a download fails: a non-directory
	// where the snapshot needs a directory (blocked) is renamed aside
	// before the downloads, and put back if one fails; a directory, link or
	// special file where the snapshot has a file (replaced) is removed only
	// after every download was verified. Other extra files go last.
	var blocked, replaced, extra []string
	for p, lf := range local {
		_, wanted := want[p]
		switch {
		case lf.mode.IsDir():
			if wanted {
				if kept := s.filteredBelow(local, p); kept != "" {
					return fmt.Errorf("DEST %s is a directory, but the snapshot has a file there, and the filters leave out %s below it; remove it, or change the filters", filepath.Join(s.dest, p), filepath.Join(s.dest, kept))
				}
				replaced = append(replaced, p)
			}
		case dirs[p]:
			if !s.opts.Filters.Match(p) {
				return fmt.Errorf("DEST %s is not a directory, but the snapshot has files below it, and the filters leave it out; remove it, or change the filters", filepath.Join(s.dest, p))
			}
			blocked = append(blocked, p)
		case wanted && !lf.mode.IsRegular():
			replaced = append(replaced, p)
		case !wanted && s.opts.Filters.Match(p):
			extra = append(extra, p)
		}
	}

	// Extra files below a directory that the snapshot replaces by a file
	// go with that directory.
	var withReplaced []string
	extra = slices.DeleteFunc(extra, func(p string) bool {
		if below(p, replaced) {
			withReplaced = append(withReplaced, p)
			return true
		}
		return false
	})

	// Compare the files on disk with the snapshot, by size and sha256.
	var fetch, fix []generation.Entry
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Concurrency)
	for _, e := range entries {
		lf, ok := local[e.Path]
		if !ok || !lf.mode.IsRegular() || lf.size != e.Size {
			mu.Lock()
			fetch = append(fetch, e)
			mu.Unlock()
			continue
		}
		g.Go(func() error {
			same, err := s.sameContent(gctx, e)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case !same:
				fetch = append(fetch, e)
			case s.attrsDiffer(e, lf):
				fix = append(fix, e)
			default:
				s.res.Unchanged++
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, e := range fetch {
		if _, ok := local[e.Path]; ok && local[e.Path].mode.IsRegular() {
			s.res.Updated = append(s.res.Updated, e.Path)
		} else {
			s.res.Added = append(s.res.Added, e.Path)
		}
		s.res.Bytes += e.Size
	}
	for _, e := range fix {
		s.res.Attrs = append(s.res.Attrs, e.Path)
	}
	s.res.Deleted = append(s.res.Deleted, extra...)
	s.res.Deleted = append(s.res.Deleted, withReplaced...)
	s.res.Deleted = append(s.res.Deleted, blocked...)
	for _, l := range [][]string{s.res.Added, s.res.Updated, s.res.Attrs, s.res.Deleted} {
		slices.Sort(l)
	}
	if s.opts.DryRun {
		return nil
	}

	aside, err := s.moveAside(blocked)
	if err != nil {
		return err
	}
	placed, err := s.download(ctx, fetch, replaced, blocked, stderr)
	if err != nil {
		s.putBack(aside)
		// What is in place stays, made durable as on success.
		dirs := map[string]bool{}
		for _, p := range placed {
			dirs[path.Dir(p)] = true
		}
		syncPaths(s.root, slices.Sorted(maps.Keys(dirs)), s.opts.Concurrency) //nolint:errcheck // the download's error is the one to report
		return err
	}
	s.past = true
	for _, a := range aside {
		if err := s.root.Remove(a.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("DEST %s: remove: %w", filepath.Join(s.dest, a.tmp), unwrapPathError(err))
		}
	}
	var fixed []string
	for _, e := range fix {
		if err := s.setAttrs(e); err != nil {
			return err
		}
		fixed = append(fixed, e.Path)
	}
	for _, p := range extra {
		if err := s.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("DEST %s: remove: %w", filepath.Join(s.dest, p), unwrapPathError(err))
		}
	}
	removed := s.removeEmptyDirs(local, dirs)

	// Make the changes durable: the files whose mode or time was set, then
	// each directory where a name was created, renamed or removed.
	changed := map[string]bool{}
	for _, e := range fetch {
		// The file's directory, and the parent of each directory created
		// for it.
		d := path.Dir(e.Path)
		changed[d] = true
		for d != "." && !local[d].mode.IsDir() {
			d = path.Dir(d)
			changed[d] = true
		}
	}
	for _, p := range slices.Concat(extra, blocked, removed) {
		changed[path.Dir(p)] = true
	}
	for _, d := range removed {
		delete(changed, d)
	}
	if err := syncPaths(s.root, fixed, s.opts.Concurrency); err != nil {
		return err
	}
	return syncPaths(s.root, slices.Sorted(maps.Keys(changed)), s.opts.Concurrency)
}

// checkTree refuses entries that no directory tree can hold: a path that
// is a file and also the directory of another file.
func checkTree(entries []generation.Entry) error {
	if d, p := generation.Clash(entries); d != "" {
		return fmt.Errorf("the snapshot has a file %q and also files below it, such as %q; a directory cannot hold both, so nothing was synced", d, p)
	}
	return nil
}

func dirExists(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// scan lists DEST without following links.
func (s *syncer) scan() (map[string]localFile, error) {
	local := map[string]localFile{}
	err := fs.WalkDir(s.root.FS(), ".", func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("DEST %s: %w", filepath.Join(s.dest, p), unwrapPathError(err))
		}
		if p == "." {
			return nil
		}
		fi, err := de.Info()
		if err != nil {
			return fmt.Errorf("DEST %s: %w", filepath.Join(s.dest, p), unwrapPathError(err))
		}
		local[p] = localFile{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
		return nil
	})
	return local, err
}

// sameContent reports whether the file at e.Path in DEST has e's sha256.
func (s *syncer) sameContent(ctx context.Context, e generation.Entry) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	f, err := s.root.Open(e.Path)
	if err != nil {
		return false, fmt.Errorf("DEST %s: %w", filepath.Join(s.dest, e.Path), unwrapPathError(err))
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, fmt.Errorf("DEST %s: read: %w", filepath.Join(s.dest, e.Path), unwrapPathError(err))
	}
	return hex.EncodeToString(h.Sum(nil)) == e.SHA256, nil
}

func (s *syncer) attrsDiffer(e generation.Entry, lf localFile) bool {
	if perm, ok := e.Perm(); ok && !s.opts.Attrs.NoPerms && lf.mode.Perm() != perm {
		return true
	}
	return !e.MTime.IsZero() && !s.opts.Attrs.NoTimes && lf.mtime != e.MTime.UnixNano()
}

func (s *syncer) setAttrs(e generation.Entry) error {
	if perm, ok := e.Perm(); ok && !s.opts.Attrs.NoPerms {
		if err := s.root.Chmod(e.Path, perm); err != nil {
			return fmt.Errorf("DEST %s: set the mode: %w", filepath.Join(s.dest, e.Path), unwrapPathError(err))
		}
	}
	return setTime(s.root, e.Path, e, s.opts.Attrs)
}

// download fetches the entries to temporary names beside their paths,
// verified, syncs them, then renames each over its path: at once, so that
// a sync that fails or is interrupted keeps every file it downloaded, or,
// for a file at a path in replaced or below one in blocked (moved aside),
// once every download was verified. The paths in replaced are removed
// before those renames. It returns the paths renamed into place.
func (s *syncer) download(ctx context.Context, fetch []generation.Entry, replaced, blocked []string, stderr io.Writer) ([]string, error) {
	if len(fetch) == 0 {
		return nil, nil
	}
	s.fetching = len(fetch)
	var total int64
	for _, e := range fetch {
		total += e.Size
		if err := s.checkDirs(e.Path); err != nil {
			return nil, err
		}
	}
	var mu sync.Mutex
	var placed []string
	tmps := make([]string, len(fetch))
	defer func() {
		for _, t := range tmps {
			if t != "" {
				s.root.Remove(t) //nolint:errcheck // best effort; the next sync removes leftovers
			}
		}
	}()
	bar := newProgress(stderr, s.opts.globalOptions, total, len(fetch), "downloading", true)
	defer bar.Finish()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.opts.Concurrency)
	// getFile synced each new file: it is durable before it is renamed in.
	rename := func(i int) error {
		e := fetch[i]
		if err := s.root.Rename(tmps[i], e.Path); err != nil {
			return fmt.Errorf("DEST %s: %w", filepath.Join(s.dest, e.Path), unwrapLinkError(err))
		}
		mu.Lock()
		defer mu.Unlock()
		tmps[i] = ""
		placed = append(placed, e.Path)
		s.placed++
		return nil
	}
	var later []int
	heavy := newHeavyGate()
	for i, e := range fetch {
		tmp, err := tempName(e.Path)
		if err != nil {
			return placed, err
		}
		tmps[i] = tmp
		wait := slices.Contains(replaced, e.Path) || below(e.Path, blocked)
		if wait {
			later = append(later, i)
		}
		g.Go(func() error {
			leave, err := heavy.enter(gctx, heavyDownload(e))
			if err != nil {
				return err
			}
			err = getFile(gctx, s.root, s.snap, e, tmp, s.opts.Attrs)
			leave()
			if err != nil {
				return err
			}
			bar.Add(e.Size)
			if wait {
				return nil
			}
			return rename(i)
		})
	}
	if err := g.Wait(); err != nil {
		return placed, err
	}
	for _, p := range replaced {
		if err := s.root.RemoveAll(p); err != nil {
			return placed, fmt.Errorf("DEST %s: remove: %w", filepath.Join(s.dest, p), unwrapPathError(err))
		}
	}
	for _, i := range later {
		if err := rename(i); err != nil {
			return placed, err
		}
	}
	return placed, nil
}

// filteredBelow returns a path below the directory dir in DEST that the
// filters leave out, or "" if there is none.
func (s *syncer) filteredBelow(local map[string]localFile, dir string) string {
	var kept []string
	for p, lf := range local {
		if strings.HasPrefix(p, dir+"/") && !lf.mode.IsDir() && !s.opts.Filters.Match(p) {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		return ""
	}
	return slices.Min(kept)
}

// asideFile is a path of DEST renamed to tmp, out of the way.
type asideFile struct{ path, tmp string }

// moveAside renames each path to a hidden name beside it.
func (s *syncer) moveAside(paths []string) ([]asideFile, error) {
	var aside []asideFile
	for _, p := range paths {
		tmp, err := tempName(p)
		if err != nil {
			s.putBack(aside)
			return nil, err
		}
		if err := s.root.Rename(p, tmp); err != nil {
			s.putBack(aside)
			return nil, fmt.Errorf("DEST %s: move out of the way: %w", filepath.Join(s.dest, p), unwrapLinkError(err))
		}
		aside = append(aside, asideFile{p, tmp})
	}
	return aside, nil
}

// putBack renames the files moved aside back to their paths, after
// removing the empty directories a failed download left there.
func (s *syncer) putBack(aside []asideFile) {
	for _, a := range aside {
		s.removeEmptyTree(a.path)
		s.root.Rename(a.tmp, a.path) //nolint:errcheck // best effort; the error already reported says what failed
	}
}

// below reports whether p lies below one of the directories dirs.
func below(p string, dirs []string) bool {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if slices.Contains(dirs, d) {
			return true
		}
	}
	return false
}

// removeEmptyTree removes the directory p of DEST and the directories
// below it, if they hold no files; it never removes a file.
func (s *syncer) removeEmptyTree(p string) {
	fi, err := s.root.Lstat(p)
	if err != nil || !fi.IsDir() {
		return
	}
	if des, err := fs.ReadDir(s.root.FS(), p); err == nil {
		for _, de := range des {
			if de.IsDir() {
				s.removeEmptyTree(path.Join(p, de.Name()))
			}
		}
	}
	s.root.Remove(p) //nolint:errcheck // a directory that is not empty stays
}

// checkDirs refuses to write p if one of its parent directories in DEST
// is a symbolic link (which os.Root would follow while it stays in DEST).
func (s *syncer) checkDirs(p string) error {
	var parts []string
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		parts = append(parts, d)
	}
	for _, d := range slices.Backward(parts) {
		fi, err := s.root.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // created by getFile, as a directory
		case err != nil:
			return fmt.Errorf("DEST %s: %w", filepath.Join(s.dest, d), unwrapPathError(err))
		case !fi.IsDir():
			return fmt.Errorf("DEST %s is not a directory (a symbolic link is not followed), but the snapshot has files below it", filepath.Join(s.dest, d))
		}
	}
	return nil
}

// tempName returns a fresh hidden name beside p.
func tempName(p string) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return path.Join(path.Dir(p), "."+path.Base(p)+".publish-sync-"+hex.EncodeToString(b[:])), nil
}

// removeEmptyDirs removes the directories of DEST, deepest first, that the
// snapshot does not need (needed) and that are empty by now. A path that is
// no longer a directory (the snapshot's file replaced it) stays.
func (s *syncer) removeEmptyDirs(local map[string]localFile, needed map[string]bool) []string {
	var ds []string
	for p, lf := range local {
		if lf.mode.IsDir() && !needed[p] {
			ds = append(ds, p)
		}
	}
	slices.SortFunc(ds, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	var removed []string
	for _, d := range ds {
		if fi, err := s.root.Lstat(d); err != nil || !fi.IsDir() {
			continue
		}
		if s.root.Remove(d) == nil { // a directory that is not empty stays
			removed = append(removed, d)
		}
	}
	return removed
}
