package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelq/keel/server"
)

// newBrakesCmd is keel brakes: every type's stored automatic brake.
func newBrakesCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "brakes",
		Short: "List the task types' automatic brakes: state, failure ratio, cooldown and probe",
		Long: `brakes lists every task type whose automatic brake ever opened. An open
brake's tasks are not claimed until its cooldown ends; then one probe task
runs (half_open): its success closes the brake, its failure reopens it.
Close a brake by hand with: keel brake close <type>.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := f.client()
			if err != nil {
				return err
			}
			var l server.BrakeList
			raw, err := api.call(cmd.Context(), http.MethodGet, "/v1/brakes", nil, nil, &l)
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			return printBrakes(cmd.OutOrStdout(), l.Brakes)
		},
	}
	addAPIFlags(cmd, &f)
	return cmd
}

// newBrakeCmd is keel brake close <type>.
func newBrakeCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "brake",
		Short: "Close a task type's automatic brake by hand",
	}
	addAPIFlags(cmd, &f)
	closeCmd := &cobra.Command{
		Use:   "close <type>",
		Short: "Close the type's open or half-open brake: its tasks are claimed again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := f.client()
			if err != nil {
				return err
			}
			var b server.Brake
			raw, err := api.call(cmd.Context(), http.MethodPost, "/v1/types/"+url.PathEscape(args[0])+"/brake/close", nil, nil, &b)
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "brake of type %s closed: its tasks are claimed again\n", b.Type)
			return nil
		},
	}
	cmd.AddCommand(closeCmd)
	return cmd
}

func printBrakes(out io.Writer, brakes []server.Brake) error {
	if len(brakes) == 0 {
		fmt.Fprintln(out, "no brake ever opened: every type's tasks are claimed")
		return nil
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "TYPE\tSTATE\tRATIO\tATTEMPTS\tUNTIL\tPROBE\tREASON")
	for _, b := range brakes {
		until, probe := "-", "-"
		if b.State == "open" && b.Until != nil {
			until = b.Until.Local().Format(time.TimeOnly)
		}
		if b.ProbeTaskID != 0 {
			probe = fmt.Sprintf("task %d on %s", b.ProbeTaskID, b.ProbeNode)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f%%\t%d\t%s\t%s\t%s\n", b.Type, b.State, 100*b.Ratio, b.Attempts, until, probe, b.Reason)
	}
	return tw.Flush()
}
