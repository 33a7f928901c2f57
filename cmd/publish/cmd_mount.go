package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/mount"
)

type mountOptions struct {
	*globalOptions
	URL, Dir   string
	Ref        string
	Follow     bool
	Refresh    time.Duration
	CacheSize  string
	CacheDir   string
	AllowOther bool
}

func newMountCommand(g *globalOptions) *cobra.Command {
	opts := mountOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "mount URL MOUNTPOINT",
		Short: "Mount one snapshot as a read-only file system (FUSE)",
		Long: `Mount shows one snapshot of the dataset at URL as a read-only file system at
the directory MOUNTPOINT, until interrupted (SIGINT or SIGTERM), which
unmounts it and ends with status 0; so does an unmount from outside
(umount MOUNTPOINT).

--ref names the snapshot: current (the default), @SEQ (a retained seq),
tag:NAME or gen:ID, resolved once, as get resolves it. The generation shown
is pinned while mounted (the pin renewed every 100s), so gc keeps it.
Directory listings and attributes come from the manifest; files have their
recorded permission bits and modification times.

Files are verified whole: the first open of a file reads its object with
one GET, checking its size and sha256 while it streams, into a cache of
unlinked temporary files (--cache-dir); the open returns only once every
byte matched, and reads are served from that copy. A file whose stored
bytes do not match its manifest cannot be opened (EIO), and a line on
stderr says which; no byte of it is served. The manifest has no checksum
per range, so the first open of a large file waits for all of it. The
cache keeps --cache-size of files not open, least recently used first
out; a file that is open keeps its copy until it is closed.

With --follow, the pointer is read every --refresh (with --ref tag:NAME,
the tag), and a new commit (or the tag moved) replaces the whole tree at
once: every path looked up from MOUNTPOINT
after the switch is in the new generation, while files and directories
already open stay in theirs (which stays pinned until they are closed).

A mount point still in use when the mount ends (a process has a file or
its working directory in it) is detached lazily: it leaves the mount
table at once, and those processes get errors.

Only the user who mounts can read the files, unless --allow-other: then
every user can, as the files' recorded permission bits allow (the kernel
checks them; the files are owned by the user who mounts). A user other
than root needs user_allow_other in /etc/fuse.conf for it.

Mounting needs /dev/fuse and the right to mount: root mounts directly;
another user needs fusermount3 (Debian's package fuse3). Without them,
mount fails with status 7.` + exitStatus(exitOK, exitError, exitUsage, exitNoFUSE),
		Example: `  mkdir -p /mnt/daily && publish mount s3://bucket/daily /mnt/daily
  publish mount --ref @42 s3://bucket/daily /mnt/daily-42
  publish mount --follow --refresh 10s s3://bucket/daily /mnt/daily
  publish mount --follow --ref tag:stable s3://bucket/daily /mnt/stable
  sha256sum /mnt/daily/report.csv; diff -r /mnt/daily ./daily`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL, opts.Dir = args[0], args[1]
			return runMount(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&opts.Ref, "ref", "current", "the snapshot to mount: `current|@SEQ|tag:NAME|gen:ID`")
	cmd.Flags().BoolVar(&opts.Follow, "follow", false, "show each new commit as it lands (--ref current), or each move of the tag (--ref tag:NAME)")
	cmd.Flags().DurationVar(&opts.Refresh, "refresh", 5*time.Second, "with --follow, read the pointer this often")
	cmd.Flags().StringVar(&opts.CacheSize, "cache-size", "256MiB", "the verified copies of files not open to keep, at most (`SIZE`: bytes, or with KiB, MiB, GiB)")
	cmd.Flags().StringVar(&opts.CacheDir, "cache-dir", "", "where the copies are kept, as unlinked files (default $TMPDIR or /tmp)")
	cmd.Flags().BoolVar(&opts.AllowOther, "allow-other", false, "let other users read the files, as their permission bits allow")
	return cmd
}

// parseSize reads a byte count: digits, optionally followed by KiB, MiB or
// GiB (or K, M, G, the same binary units).
func parseSize(s string) (int64, error) {
	digits, shift := strings.TrimSpace(s), uint(0)
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"GiB", 30}, {"G", 30}, {"MiB", 20}, {"M", 20}, {"KiB", 10}, {"K", 10}} {
		if d, ok := strings.CutSuffix(digits, u.suffix); ok {
			digits, shift = strings.TrimSpace(d), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("%q is not a size: a positive number of bytes, or of KiB, MiB or GiB", s)
	}
	return n << shift, nil
}

func runMount(ctx context.Context, opts mountOptions, stdout io.Writer) error {
	ref, err := commit.ParseRef(opts.Ref)
	if err != nil {
		return &usageError{err}
	}
	if opts.Follow && ref.Kind != commit.RefCurrent && ref.Kind != commit.RefTag {
		return usagef("--follow shows the current snapshot or a tag's; --ref %s names one that does not move", opts.Ref)
	}
	if opts.Refresh <= 0 {
		return usagef("--refresh must be positive")
	}
	cacheBytes, err := parseSize(opts.CacheSize)
	if err != nil {
		return usagef("--cache-size: %v", err)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return err
	}
	d, err := opts.openDataset(ctx, opts.URL)
	if err != nil {
		return err
	}
	m, err := mount.Mount(ctx, d, dir, mount.Options{
		Ref: ref, Follow: opts.Follow, Refresh: opts.Refresh,
		CacheBytes: cacheBytes, CacheDir: opts.CacheDir,
		Owner: "publish mount " + dir, FsName: redact(opts.URL), Logger: opts.log(),
		AllowOther: opts.AllowOther,
	})
	if err != nil {
		return describe(opts.URL, err)
	}
	// Later signals do not end the process before the mount is gone.
	defer onInterruptAgain(ctx, func() {})()
	snap := m.Snapshot()
	fmt.Fprintf(opts.out(stdout), "mounted seq %d (generation %s) at %s\n", snap.Seq(), snap.Generation(), dir)
	gone := make(chan struct{})
	go func() {
		m.Wait()
		close(gone)
	}()
	select {
	case <-ctx.Done():
	case <-gone:
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := m.Unmount(uctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
