// Command keel is keel's command-line tool: keel serve (the HTTP API and
// the workers of HTTP-target task types), the operator commands that talk
// to it (enqueue, status, list, inspect, cancel, retry, dlq, queue, type,
// stats, nodes, alerts, schedules, sources, rejected, batch), doctor, config
// check, migrate, demo, bench and chaos (crash scenarios against your own
// database).
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	// The IANA time zone database in the binary: schedules' time zones
	// resolve also on a host without one (a scratch container).
	_ "time/tzdata"

	"github.com/spf13/cobra"

	"github.com/keelq/keel/driver/sqlite"
)

// version, when set at build time with -ldflags "-X main.version=...",
// is what keel version prints; otherwise it reads the build information
// (see versionFrom).
var version string

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "keel:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "keel",
		Short:         "keel is a durable background task queue",
		Long:          "keel is a durable background task system: nothing lost, nothing applied twice, nothing stuck.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newBenchCmd(), newDemoCmd(), newMigrateCmd(), newVersionCmd(), newServeCmd(), newConfigCmd())
	root.AddCommand(newTaskCmds()...)
	root.AddCommand(newDLQCmd(), newQueueCmd(), newTypeCmd(), newStatsCmd(), newNodesCmd(), newDoctorCmd(), newAlertsCmd(), newDrillCmd(), newSchedulesCmd(), newBrakesCmd(), newBrakeCmd(), newSequencesCmd(),
		newSourcesCmd(), newRejectedCmd(), newBatchCmd(), newWorkflowCmd(), newChaosCmd(), newChaosWorkerCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print keel's version and the SQLite it was built with",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "keel", keelVersion())
			fmt.Fprintln(cmd.OutOrStdout(), "built with", sqlite.Version(cmd.Context()))
		},
	}
}

// keelVersion is this binary's version: see versionFrom.
func keelVersion() string {
	bi, _ := debug.ReadBuildInfo()
	return versionFrom(version, bi)
}

// versionFrom names a build: the -ldflags version when set; else the main
// module's version (a release for go install …@v1.2.3; go build in a
// checkout stamps a pseudo-version with the commit, +dirty when modified);
// else, for a build stamped only with VCS settings, "(devel)" with the
// commit, +modified when the tree had changes, and the commit time; else
// "(devel)" (go run, go test, -buildvcs=false).
func versionFrom(ldflag string, bi *debug.BuildInfo) string {
	if ldflag != "" {
		return ldflag
	}
	if bi == nil {
		return "(devel)"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	vcs := map[string]string{}
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	rev := vcs["vcs.revision"]
	if rev == "" {
		return "(devel)"
	}
	v := "(devel) " + rev[:min(len(rev), 12)]
	if vcs["vcs.modified"] == "true" {
		v += "+modified"
	}
	if at := vcs["vcs.time"]; at != "" {
		v += " " + at
	}
	return v
}
