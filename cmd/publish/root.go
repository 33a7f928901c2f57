package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// newRootCommand builds the command tree. stdout and stderr receive all
// output; stdin feeds commands that read it.
func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:   "publish",
		Short: "Atomic publication, snapshots and leases on object stores",
		Long: `publish stages a directory under a fresh generation id and commits it with
one conditional write to a small pointer object. Readers resolve through the
pointer, so each reader sees exactly one generation. The same primitives give
read-modify-write of shared files (update) and leases with fencing tokens
(lease, run).

A URL names a dataset: file:///abs/dir or a plain path (a local directory,
safe across processes on one host), s3://bucket/prefix (Amazon S3 or an
S3-compatible server; see --endpoint and --path-style), minio://bucket/prefix
(the same through minio-go), gs://bucket/prefix (Google Cloud Storage;
--endpoint names an emulator), az://container/prefix (Azure Blob Storage;
--endpoint names the blob service URL) and mem://name (in-process, for
tests). NAME:PATH names PATH under a remote of the config file (--config;
publish/config under $XDG_CONFIG_HOME or ~/.config), one INI section per
remote, as rclone's: a url and, by flag name, endpoint, region, profile,
path-style and the timeouts, which a flag given on the command line or in
the environment overrides:

  [prod]
  url = s3://bucket/datasets
  region = eu-west-1

makes prod:daily s3://bucket/datasets/daily. Arguments after -- are never
resolved. Other strings such as s3:bucket are refused rather than taken
for local directories; a local path with a colon is written ./s3:bucket.
Credentials come from the standard AWS chain
(environment, shared config, instance roles), for gs:// from Application
Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's login, the
metadata server), for az:// from AZURE_STORAGE_CONNECTION_STRING or
azidentity's default chain, and never appear in any output. The timeouts
apply to every remote store.

Every global flag can also be set in the environment as PUBLISH_<FLAG>,
upper case with dashes as underscores, as rclone does: PUBLISH_ENDPOINT,
PUBLISH_PATH_STYLE=true, PUBLISH_TIMEOUT=1m, PUBLISH_VERBOSE=2. A flag on
the command line wins over its variable.

The first write to a dataset, a lease or a shared object (put on a dataset
without commits, the first acquisition of a lease name, update creating an
object) checks that the store enforces conditional writes (see 'publish
probe'), and refuses to run on a store that ignores them.` + exitStatus(exitOK, exitError, exitUsage, exitLost, exitHeld, exitUnknown, exitFenced, exitNoFUSE, exitInterrupted),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			err := g.fromEnv()
			g.initLogger(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return g.resolveRemotes(cmd, args)
		},
	}
	root.Version = versionLine()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	g.AddFlags(root)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return &usageError{err} })
	root.AddCommand(
		newPutCommand(g),
		newRmCommand(g),
		newGetCommand(g),
		newSyncCommand(g),
		newCatCommand(g),
		newLsCommand(g),
		newShowCommand(g),
		newLogCommand(g),
		newDiffCommand(g),
		newStatusCommand(g),
		newRollbackCommand(g),
		newVerifyCommand(g),
		newGCCommand(g),
		newPinCommand(g),
		newTagCommand(g),
		newUnpinCommand(g),
		newProbeCommand(g),
		newBenchCommand(g),
		newUpdateCommand(g),
		newLeaseCommand(g),
		newRunCommand(g),
		newFencesCommand(g),
		newVersionCommand(),
		newServeCommand(g),
		newJobCommand(g),
		newMountCommand(g),
		newFiltersTopic(),
		newGenDocsCommand(),
	)
	markRunErrors(root)
	registerCompletions(g, root)
	return root
}

// markRunErrors wraps every command's RunE so that its errors can be told
// apart from the command-line errors cobra raises itself (exit status 2).
func markRunErrors(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := run(cmd, args); err != nil {
				return &runError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markRunErrors(sub)
	}
}

var exitDescriptions = map[int]string{
	exitOK:          "success",
	exitError:       "error (a message on stderr says what and where)",
	exitUsage:       "bad command line: unknown flag, wrong arguments, bad URL",
	exitLost:        "lost the race: another writer committed first; nothing of ours is live",
	exitHeld:        "the lease is held by someone else (for gc: or commits kept landing too fast to collect); try again later",
	exitUnknown:     "outcome unknown: the commit may or may not have landed; nothing was deleted (check with 'publish show')",
	exitFenced:      "fenced or stale: our lease has a higher fencing token in the dataset (or the dataset takes fenced writers only), the collector's horizon passed our generation, or the lease was lost",
	exitNoFUSE:      "FUSE is not available (mount): no /dev/fuse, or no right to mount (not root, and no fusermount3)",
	exitDiffers:     "SRC and the dataset differ (status); nothing failed",
	exitInterrupted: "interrupted (SIGINT, SIGTERM, SIGHUP or SIGQUIT)",
}

// exitStatus renders the EXIT STATUS section of a command's help for the
// statuses the command can return, followed by notes.
func exitStatus(codes ...int) string {
	var b strings.Builder
	b.WriteString("\n\nEXIT STATUS\n")
	for _, c := range codes {
		fmt.Fprintf(&b, "  %-4d %s\n", c, exitDescriptions[c])
	}
	return strings.TrimRight(b.String(), "\n")
}
