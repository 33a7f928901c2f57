package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
)

type getOptions struct {
	*globalOptions
	URL, Dest   string
	Ref         refFlags
	Force       bool
	Concurrency int
	Attrs       attrFlags
	Filters     filters
	// Into is --into: download only this subtree, as DEST's content.
	Into string
}

// attrFlags are --no-perms and --no-times, shared by get and sync.
type attrFlags struct {
	NoPerms, NoTimes bool
}

func (a *attrFlags) AddFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&a.NoPerms, "no-perms", false, "do not restore the files' recorded permission bits (files get 0644, less the umask)")
	cmd.Flags().BoolVar(&a.NoTimes, "no-times", false, "do not restore the files' recorded modification times (files keep the time they were written)")
}

func (o *getOptions) AddFlags(cmd *cobra.Command) {
	o.Ref.AddFlags(cmd)
	cmd.Flags().BoolVar(&o.Force, "force", false, "replace DEST even if it is not empty (its old content is removed)")
	cmd.Flags().IntVar(&o.Concurrency, "concurrency", 0, "parallel downloads (default: --transfers, or 256 on a remote store and 16 on a local one)")
	o.Attrs.AddFlags(cmd)
	o.Filters.AddFlags(cmd, "snapshot's")
	cmd.Flags().StringVar(&o.Into, "into", "", "download only the partition `PREFIX/`: its files, without the prefix, become DEST's content")
}

func newGetCommand(g *globalOptions) *cobra.Command {
	opts := getOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "get URL DEST",
		Short: "Download one snapshot into a directory, atomically",
		Long: `Get downloads the current snapshot of the dataset at URL (or the retained one
that --seq or --gen names) into the directory DEST.

The files go to a temporary directory beside DEST (.DEST.publish-get-*),
each verified against the size and sha256 in the manifest, and synced. Only
when every file is good is the directory renamed to DEST, so DEST holds
either a complete, verified snapshot or what it held before. When get
returns, the download is durable: each file was fsynced once written,
then each directory below DEST, then the rename's directory; nothing
else on the file system is waited for. Nothing is ever
written outside DEST and its temporary sibling: every path is validated, the
files are created through a handle that cannot leave the temporary directory,
and a DEST that is a symbolic link is refused.

DEST must be an empty directory, or not exist; its missing parent
directories are created. With --force a non-empty DEST is replaced,
atomically where the kernel supports it (renameat2 RENAME_EXCHANGE), and
its old content removed. To update a directory in place, downloading only
what changed, use 'publish sync'.

Each file gets the permission bits recorded for it (exactly, whatever the
umask; never setuid, setgid or sticky bits) and its recorded modification
time, unless --no-perms or --no-times. Files of a snapshot published
before modes were recorded get 0644, less the umask. Empty directories are
not part of a snapshot.

With filters, only the files they select are downloaded.

With --into PREFIX/, only the files under PREFIX/ are downloaded, and DEST
holds them without the prefix: the partition as 'publish put --into' took it
from SRC. Filters then apply to the paths below PREFIX/. A PREFIX/ with no
files in the snapshot is an error.

` + filterHelp + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish get s3://bucket/daily ./daily
  publish get --seq 41 s3://bucket/daily ./daily-41
  publish get --into region=eu/ s3://bucket/sales ./sales-eu
  publish get --force file:///srv/datasets/app /srv/app/current`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL, opts.Dest = args[0], args[1]
			return runGet(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	opts.AddFlags(cmd)
	return cmd
}

type getResult struct {
	Seq        uint64 `json:"seq"`
	Generation string `json:"generation"`
	Files      int    `json:"files"`
	Bytes      int64  `json:"bytes"`
	Dest       string `json:"dest"`
	// Summary is the final line's numbers.
	Summary *summary `json:"summary"`
}

func runGet(ctx context.Context, opts getOptions, stdout, stderr io.Writer) error {
	start := time.Now()
	ref, err := opts.Ref.ref()
	if err != nil {
		return err
	}
	if opts.Concurrency < 0 {
		return usagef("--concurrency must be at least 1, or 0 for the default")
	}
	opts.Concurrency = opts.workers(opts.URL, opts.Concurrency)
	if opts.Into != "" {
		if err := checkInto(opts.Into); err != nil {
			return err
		}
	}
	dest, err := filepath.Abs(opts.Dest)
	if err != nil {
		return fmt.Errorf("DEST %s: %w", opts.Dest, err)
	}
	replace, err := checkDest(dest, opts.Force)
	if err != nil {
		return err
	}
	d, err := opts.openDataset(ctx, opts.URL, opts.manifestCache(), commit.WithConcurrency(opts.Concurrency))
	if err != nil {
		return err
	}
	snap, err := openSnapshot(ctx, d, opts.URL, ref)
	if err != nil {
		return err
	}

	parent := filepath.Dir(dest)
	if err := mkdirAll(parent); err != nil {
		return fmt.Errorf("DEST %s: create its parent directory: %w", dest, unwrapPathError(err))
	}
	all := snap.Files()
	if opts.Into != "" {
		if all = underPrefix(all, opts.Into); len(all) == 0 {
			return fmt.Errorf("dataset %s: seq %d holds no file under %s", redact(opts.URL), snap.Seq(), opts.Into)
		}
	}
	entries := selectEntries(all, &opts.Filters)
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dest)+".publish-get-*")
	if err != nil {
		return fmt.Errorf("DEST %s: create a temporary directory beside it: %w", dest, unwrapPathError(err))
	}
	renamed := false
	defer func() {
		if !renamed {
			os.RemoveAll(tmp)
		}
	}()
	if err := download(ctx, opts, snap, entries, tmp, stderr); err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "publish: interrupted; removed the partial download %s\n", tmp)
		}
		return describe(opts.URL, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	// Each file was synced as it was written; the directories are synced
	// once they all were, and before the rename into DEST.
	if err := syncTree(tmp, treeDirs(entries), opts.Concurrency); err != nil {
		return err
	}
	if err := moveInto(tmp, dest, replace); err != nil {
		return err
	}
	renamed = true
	if err := syncDir(parent); err != nil {
		return err
	}

	res := getResult{Seq: snap.Seq(), Generation: snap.Generation(), Files: len(entries), Dest: dest}
	for _, e := range entries {
		res.Bytes += e.Size
	}
	res.Summary = newSummary("get", "downloaded", "")
	res.Summary.Files, res.Summary.Transferred, res.Summary.TransferredBytes = res.Files, res.Files, res.Bytes
	res.Summary.finish(start)
	if opts.JSON {
		return writeJSON(stdout, res)
	}
	stdout = opts.out(stdout)
	defer res.Summary.write(stdout)
	fmt.Fprintf(stdout, "got seq %d generation %s: %s, %s into %s\n", res.Seq, res.Generation, plural(res.Files, "file"), humanBytes(res.Bytes), dest)
	return nil
}

// checkDest decides whether DEST can be written, and whether an existing
// DEST is to be replaced.
func checkDest(dest string, force bool) (replace bool, err error) {
	fi, err := os.Lstat(dest)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("DEST %s: %w", dest, unwrapPathError(err))
	case fi.Mode()&fs.ModeSymlink != 0:
		return false, fmt.Errorf("DEST %s is a symbolic link; refusing to follow it (name the target directory instead)", dest)
	case !fi.IsDir():
		if !force {
			return false, fmt.Errorf("DEST %s exists and is not a directory (use --force to replace it)", dest)
		}
		return true, nil
	}
	entries, err := os.ReadDir(dest)
	if err != nil {
		return false, fmt.Errorf("DEST %s: %w", dest, unwrapPathError(err))
	}
	if len(entries) > 0 {
		if !force {
			return false, fmt.Errorf("DEST %s is not empty (use --force to replace it)", dest)
		}
		return true, nil
	}
	return false, nil // an empty directory: rename(2) replaces it
}

// download writes every file of the snapshot below dir, verified and
// synced. Files are created through an os.Root, which refuses any path
// that would leave dir, also through symbolic links.
func download(ctx context.Context, opts getOptions, snap *commit.Snapshot, entries []generation.Entry, dir string, stderr io.Writer) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	var total int64
	for _, e := range entries {
		total += e.Size
		// The manifest was validated when it was read; check again here,
		// where paths turn into file names.
		if err := generation.CheckPath(e.Path); err != nil {
			return err
		}
	}
	bar := newProgress(stderr, opts.globalOptions, total, len(entries), "downloading", true)
	defer bar.Finish()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Concurrency)
	heavy := newHeavyGate()
	for _, e := range entries {
		g.Go(func() error {
			leave, err := heavy.enter(gctx, heavyDownload(e))
			if err != nil {
				return err
			}
			defer leave()
			if err := getFile(gctx, root, snap, e, e.Path, opts.Attrs); err != nil {
				return err
			}
			opts.fileAction(stderr, "downloaded", e.Path)
			bar.Add(e.Size)
			return nil
		})
	}
	return g.Wait()
}

// getFile downloads the entry e to name below root, verified, gives it the
// entry's mode and time as attrs allows, and syncs it. name is e.Path, or a
// temporary name beside it.
func getFile(ctx context.Context, root *os.Root, snap *commit.Snapshot, e generation.Entry, name string, attrs attrFlags) error {
	if d := path.Dir(e.Path); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create directory for %q: %w", e.Path, err)
		}
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create %q: %w", name, err)
	}
	defer f.Close()
	rc, err := snap.OpenEntry(ctx, e)
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := io.Copy(f, rc); err != nil {
		return fmt.Errorf("download %q (key %q): %w", e.Path, e.Key, err)
	}
	if perm, ok := e.Perm(); ok && !attrs.NoPerms {
		if err := f.Chmod(perm); err != nil {
			return fmt.Errorf("set the mode of %q: %w", e.Path, err)
		}
	}
	if err := setTime(root, name, e, attrs); err != nil {
		return err
	}
	if err := fsync(f); err != nil {
		return fmt.Errorf("sync %q: %w", e.Path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %q: %w", e.Path, err)
	}
	return nil
}

// setTime gives name the entry's recorded modification time, unless the
// entry has none or attrs says not to.
func setTime(root *os.Root, name string, e generation.Entry, attrs attrFlags) error {
	if e.MTime.IsZero() || attrs.NoTimes {
		return nil
	}
	if err := root.Chtimes(name, e.MTime, e.MTime); err != nil {
		return fmt.Errorf("set the modification time of %q: %w", e.Path, err)
	}
	return nil
}

// underPrefix returns the entries under prefix, with the prefix cut from
// their paths.
func underPrefix(all []generation.Entry, prefix string) []generation.Entry {
	var out []generation.Entry
	for _, e := range all {
		if rest, ok := strings.CutPrefix(e.Path, prefix); ok {
			e.Path = rest
			out = append(out, e)
		}
	}
	return out
}

// selectEntries returns the entries the filters select.
func selectEntries(all []generation.Entry, keep *filters) []generation.Entry {
	if !keep.Active() {
		return all
	}
	var out []generation.Entry
	for _, e := range all {
		if keep.Match(e.Path) {
			out = append(out, e)
		}
	}
	return out
}

// moveInto renames the complete download to dest. An existing dest is
// swapped out atomically (exchange) and then removed; where the system or
// file system cannot swap, dest is renamed aside first.
func moveInto(tmp, dest string, replace bool) error {
	if !replace {
		// rename(2) itself, not os.Rename, which refuses to replace even
		// an empty directory.
		if err := syscall.Rename(tmp, dest); err != nil {
			return fmt.Errorf("DEST %s: %w", dest, err)
		}
		return nil
	}
	err := exchange(tmp, dest)
	if err == nil {
		// tmp now holds the old content.
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("remove the old content of %s (now at %s): %w", dest, tmp, err)
		}
		return nil
	}
	if !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOSYS) && !errors.Is(err, syscall.EOPNOTSUPP) && !errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("DEST %s: replace: %w", dest, err)
	}
	old := tmp + ".old"
	if err := os.Rename(dest, old); err != nil {
		return fmt.Errorf("DEST %s: move aside: %w", dest, unwrapLinkError(err))
	}
	if err := os.Rename(tmp, dest); err != nil {
		os.Rename(old, dest) //nolint:errcheck // best effort to put it back
		return fmt.Errorf("DEST %s: %w", dest, unwrapLinkError(err))
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("remove the old content of %s (now at %s): %w", dest, old, err)
	}
	return nil
}

func unwrapLinkError(err error) error {
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
