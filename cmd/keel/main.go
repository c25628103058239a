// Command keel is keel's command-line tool: keel serve (the HTTP API and
// the workers of HTTP-target task types), the operator commands that talk
// to it (enqueue, status, list, inspect, cancel, retry, dlq, queue, type,
// stats), config check, migrate, demo and bench.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

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
	root.AddCommand(newDLQCmd(), newQueueCmd(), newTypeCmd(), newStatsCmd(), newNodesCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print keel's version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "keel", version)
		},
	}
}
