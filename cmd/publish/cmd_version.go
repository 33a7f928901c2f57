package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of publish and the commit it was built from",
		Long: `Version prints one line: the module version of publish and the VCS commit
it was built from, with "(modified)" if the work tree had changes. A build
without VCS information says "commit unknown". 'publish --version' prints
the same line.` + exitStatus(exitOK),
		Example: `  publish version
  publish --version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return nil
		},
	}
}

// versionLine describes the running binary from its build information.
func versionLine() string {
	info, _ := debug.ReadBuildInfo()
	return formatVersion(info)
}

// formatVersion renders "publish VERSION commit REVISION", with
// " (modified)" for a build from a changed work tree.
func formatVersion(info *debug.BuildInfo) string {
	version, rev, modified := "(unknown)", "unknown", false
	if info != nil {
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	line := fmt.Sprintf("publish %s commit %s", version, rev)
	if modified {
		line += " (modified)"
	}
	return line
}
