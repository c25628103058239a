package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelq/keel/cmd/keel/internal/config"
	"github.com/keelq/keel/server"
)

// newBrakesCmd is keel brakes: every type's stored automatic brake.
func newBrakesCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "brakes",
		Short: "List the task types' automatic brakes: state, failure ratio, cooldown and probe",
		Long: `brakes lists every task type whose automatic brake ever opened. An open
brake's tasks are not claimed until its cooldown ends; then a trickle of
probe tasks runs (half_open), due retries first, until fresh tasks succeed
again (closed) or the probes fail in a row with no success (open again).
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
		Short: "Close a task type's automatic brake by hand, or set its thresholds at runtime",
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
	var window int
	var threshold float64
	var cooldown string
	var off bool
	setCmd := &cobra.Command{
		Use:   "set <type> [--window N] [--threshold R] [--cooldown D] [--off]",
		Short: "Replace the type's runtime brake thresholds (none given: clear them, so the declared ones or the defaults apply)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := f.client()
			if err != nil {
				return err
			}
			body := server.BrakeSettings{Window: window, Threshold: threshold}
			if off {
				if cmd.Flags().Changed("window") {
					return fmt.Errorf("--off and --window are exclusive")
				}
				body.Window = -1
			}
			if cooldown != "" {
				d, err := config.ParseDuration(cooldown)
				if err != nil {
					return fmt.Errorf("--cooldown: %w", err)
				}
				sd := server.Duration(d)
				body.Cooldown = &sd
			}
			var b server.Brake
			raw, err := api.call(cmd.Context(), http.MethodPut, "/v1/types/"+url.PathEscape(args[0])+"/brake", nil, body, &b)
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "brake of type %s: %s, window %s, threshold %s, cooldown %s\n", b.Type, b.State,
				orDefault(b.Settings.Window), orDefaultF(b.Settings.Threshold), optDuration(b.Settings.Cooldown))
			return nil
		},
	}
	setCmd.Flags().IntVar(&window, "window", 0, "how many of the type's latest attempts are judged, 1..10000")
	setCmd.Flags().Float64Var(&threshold, "threshold", 0, "failed share that opens the brake, (0, 1]")
	setCmd.Flags().StringVar(&cooldown, "cooldown", "", "how long the brake stays open before a probe, e.g. 1m")
	setCmd.Flags().BoolVar(&off, "off", false, "turn the type's brake off")
	cmd.AddCommand(closeCmd, setCmd)
	return cmd
}

func orDefault(n int) string {
	switch n {
	case 0:
		return "-"
	case -1:
		return "off"
	}
	return fmt.Sprint(n)
}

func orDefaultF(f float64) string {
	if f == 0 {
		return "-"
	}
	return fmt.Sprint(f)
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
		if b.State == "half_open" {
			probe = "trickle" // due retries first, on every node with a handler
		}
		// The ratio and attempts are what opened the brake: a closed one
		// shows none (it showed the last trip's 100%).
		ratio, attempts := "-", "-"
		if b.State != "closed" {
			ratio, attempts = fmt.Sprintf("%.0f%%", 100*b.Ratio), strconv.Itoa(b.Attempts)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.Type, b.State, ratio, attempts, until, probe, b.Reason)
	}
	return tw.Flush()
}
