package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelq/keel/server"
)

func newAlertsCmd() *cobra.Command {
	var f apiFlags
	var firing bool
	var rule string
	var limit int
	cmd := &cobra.Command{
		Use:   "alerts",
		Short: "List alerts: what fired, when it resolved, and whether each notifier got it",
		Long: `alerts lists the alerts the leader opened (newest first): the rule, what
it is about, the numbers that tripped it, what to run next, when it
resolved, and each notifier's delivery. "keel alerts rules" shows or
changes the rules at runtime; "keel drill" checks that alerts reach
every notifier.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := f.client()
			if err != nil {
				return err
			}
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			if firing {
				q.Set("state", "firing")
			}
			if rule != "" {
				q.Set("rule", rule)
			}
			var l server.AlertList
			raw, err := api.call(cmd.Context(), http.MethodGet, "/v1/alerts", q, nil, &l)
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			return printAlerts(cmd.OutOrStdout(), l.Alerts)
		},
	}
	addAPIFlags(cmd, &f)
	cmd.Flags().BoolVar(&firing, "firing", false, "only alerts that still fire")
	cmd.Flags().StringVar(&rule, "rule", "", "only alerts of this rule (dead_per_hour, oldest_ready_age, failure_ratio, no_live_worker, node_lost, brake_open, notifier_failing)")
	cmd.Flags().IntVar(&limit, "limit", 20, "at most this many alerts (1..1000)")
	cmd.AddCommand(newAlertRulesCmd())
	return cmd
}

func printAlerts(out io.Writer, as []server.AlertRecord) error {
	if len(as) == 0 {
		fmt.Fprintln(out, "no alerts")
		return nil
	}
	for i, a := range as {
		if i > 0 {
			fmt.Fprintln(out)
		}
		state := "FIRING since " + stamp(a.FiredAt)
		if a.ResolvedAt != nil {
			state = fmt.Sprintf("resolved %s (fired %s)", stamp(*a.ResolvedAt), stamp(a.FiredAt))
		}
		fmt.Fprintf(out, "#%d %s %s: %s\n", a.ID, a.Rule, a.Subject, state)
		switch {
		case a.CurrentMessage == "" || a.CurrentMessage == a.Message:
			fmt.Fprintf(out, "  %s\n", a.Message)
		case a.ResolvedAt == nil: // the numbers changed while it fires
			fmt.Fprintf(out, "  at firing: %s\n", a.Message)
			fmt.Fprintf(out, "  now (%s): %s\n", stamp(a.CurrentAt), a.CurrentMessage)
		default:
			fmt.Fprintf(out, "  at firing: %s\n", a.Message)
			fmt.Fprintf(out, "  last while firing (%s): %s\n", stamp(a.CurrentAt), a.CurrentMessage)
		}
		if a.Hint != "" {
			fmt.Fprintf(out, "  next: %s\n", a.Hint)
		}
		if a.ResolvedMessage != "" {
			fmt.Fprintf(out, "  resolved: %s\n", a.ResolvedMessage)
		}
		for _, d := range a.Deliveries {
			status := fmt.Sprintf("not delivered after %d attempts: %s", d.Attempts, d.LastError)
			if d.DeliveredAt != nil {
				status = fmt.Sprintf("delivered %s (attempt %d)", stamp(*d.DeliveredAt), d.Attempts)
			}
			fmt.Fprintf(out, "  %s -> %s: %s\n", d.Event, d.Notifier, status)
		}
	}
	return nil
}

func newAlertRulesCmd() *cobra.Command {
	var f apiFlags
	var reset bool
	cmd := &cobra.Command{
		Use:   "rules [name=value ...]",
		Short: "Show the alert rules in force, or change them at runtime in every process",
		Long: `rules prints the alert rules in force and where they come from (the
configuration, or a runtime change). With name=value arguments it changes
those rules at once in every process, until --reset:

  keel alerts rules dead_per_hour=10 oldest_ready_age=30m
  keel alerts rules failure_ratio=0        # 0 turns the failure rule off
  keel alerts rules dead_per_hour=-1       # -1 turns the dead-letter rule off
  keel alerts rules --reset                # back to the configuration

Names: dead_per_hour, oldest_ready_age, failure_ratio, failure_min_attempts,
failure_window, no_live_worker, node_lost.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			api, err := f.client()
			if err != nil {
				return err
			}
			var rules server.AlertRules
			var raw []byte
			switch {
			case reset && len(args) > 0:
				return errors.New("give either --reset or name=value changes, not both")
			case reset:
				raw, err = api.call(cmd.Context(), http.MethodDelete, "/v1/alerts/rules", nil, nil, &rules)
			case len(args) > 0:
				patch, perr := rulesPatch(args)
				if perr != nil {
					return perr
				}
				raw, err = api.call(cmd.Context(), http.MethodPatch, "/v1/alerts/rules", nil, patch, &rules)
			default:
				raw, err = api.call(cmd.Context(), http.MethodGet, "/v1/alerts/rules", nil, nil, &rules)
			}
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			return printRules(cmd.OutOrStdout(), rules)
		},
	}
	addAPIFlags(cmd, &f)
	cmd.Flags().BoolVar(&reset, "reset", false, "drop the runtime rules: the configured ones apply again")
	return cmd
}

// rulesPatch parses name=value arguments; a bad one writes nothing.
func rulesPatch(args []string) (map[string]any, error) {
	patch := map[string]any{}
	for _, a := range args {
		name, value, ok := strings.Cut(a, "=")
		if !ok || value == "" {
			return nil, fmt.Errorf("%q: give rules as name=value, such as dead_per_hour=5", a)
		}
		if _, dup := patch[name]; dup {
			return nil, fmt.Errorf("%s given twice", name)
		}
		switch name {
		case "dead_per_hour", "failure_min_attempts":
			n, err := strconv.Atoi(value)
			if err != nil {
				return nil, fmt.Errorf("%s must be an integer, got %q", name, value)
			}
			patch[name] = n
		case "failure_ratio":
			x, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return nil, fmt.Errorf("%s must be a number such as 0.5, got %q", name, value)
			}
			patch[name] = x
		case "oldest_ready_age", "failure_window":
			if _, err := time.ParseDuration(value); err != nil {
				return nil, fmt.Errorf("%s must be a duration such as 10m, got %q", name, value)
			}
			patch[name] = value
		case "no_live_worker", "node_lost":
			b, err := strconv.ParseBool(value)
			if err != nil {
				return nil, fmt.Errorf("%s must be true or false, got %q", name, value)
			}
			patch[name] = b
		default:
			return nil, fmt.Errorf("unknown rule %q: use dead_per_hour, oldest_ready_age, failure_ratio, failure_min_attempts, failure_window, no_live_worker or node_lost", name)
		}
	}
	return patch, nil
}

func printRules(out io.Writer, r server.AlertRules) error {
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	tw := newTable(out)
	fmt.Fprintf(tw, "RULE\tSETTING\n")
	dead := "off"
	if r.DeadPerHour >= 0 {
		dead = fmt.Sprintf("more than %d dead letters in an hour, per type and overall", r.DeadPerHour)
	}
	fmt.Fprintf(tw, "dead_per_hour\t%s\n", dead)
	age := "off"
	if r.OldestReadyAge > 0 {
		age = "a queue's oldest ready task waits longer than " + time.Duration(r.OldestReadyAge).String()
	}
	fmt.Fprintf(tw, "oldest_ready_age\t%s\n", age)
	ratio := "off"
	if r.FailureRatio > 0 {
		ratio = fmt.Sprintf("over %.0f%% of at least %d attempts of a type in %v fail", 100*r.FailureRatio, r.FailureMinAttempts, time.Duration(r.FailureWindow))
	}
	fmt.Fprintf(tw, "failure_ratio\t%s\n", ratio)
	fmt.Fprintf(tw, "no_live_worker\t%s\n", onOff(r.NoLiveWorker))
	fmt.Fprintf(tw, "node_lost\t%s\n", onOff(r.NodeLost))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nsource: %s\n", r.Source)
	return nil
}

func newDrillCmd() *cobra.Command {
	var f apiFlags
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "drill",
		Short: "Check that alerts reach every notifier: dead-letter a few tasks on purpose and wait for the alert",
		Long: `drill runs the quarterly alert exercise (seed 003 §4.2) through the server:
it enqueues one task more than the dead_per_hour rule allows, of the
reserved type keel.drill, which keel dead-letters at once; it waits until
the alert reached every notifier the server has (its log and each
[[alerts.webhooks]]), prints each one's delay, and removes its tasks (the
alert then resolves). The drill's tasks count only against keel.drill,
never against your types.

Exit status 0 only when every notifier received the alert.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout < time.Second || timeout > 10*time.Minute {
				return fmt.Errorf("--timeout must be in 1s..10m, got %v", timeout)
			}
			api, err := f.client()
			if err != nil {
				return err
			}
			api.http.Timeout = timeout + time.Minute
			var res server.DrillResult
			raw, err := api.call(cmd.Context(), http.MethodPost, "/v1/drill", nil,
				server.DrillRequest{Timeout: new(server.Duration(timeout))}, &res)
			if err != nil {
				return err
			}
			if f.json {
				if err := printRaw(cmd.OutOrStdout(), raw); err != nil {
					return err
				}
			} else {
				printDrill(cmd.OutOrStdout(), res, timeout)
			}
			if !res.Passed {
				var missing []string
				for _, n := range res.Notifiers {
					if !n.Delivered {
						missing = append(missing, n.Name)
					}
				}
				return fmt.Errorf("drill failed: not delivered to %s within %v", strings.Join(missing, ", "), timeout)
			}
			return nil
		},
	}
	addAPIFlags(cmd, &f)
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for every notifier (1s..10m)")
	return cmd
}

func printDrill(out io.Writer, r server.DrillResult, timeout time.Duration) {
	fmt.Fprintf(out, "drill started %s: %d tasks of type keel.drill dead-lettered on purpose\n", stamp(r.Started), r.Tasks)
	if r.AlertID == 0 {
		fmt.Fprintf(out, "no alert fired within %v: is a keel process with workers (the leader) running? see keel nodes\n", timeout)
	} else {
		fmt.Fprintf(out, "alert #%d fired %v after the start\n", r.AlertID, time.Duration(*r.FiredAfter).Round(time.Millisecond))
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "NOTIFIER\tRESULT\tDELAY\tATTEMPTS\tLAST ERROR")
	for _, n := range r.Notifiers {
		result, delay := "FAIL", "-"
		if n.Delivered {
			result, delay = "pass", time.Duration(*n.Delay).Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", n.Name, result, delay, n.Attempts, orDash(n.LastError))
	}
	tw.Flush()
	verdict := "PASS: every notifier received the alert"
	if !r.Passed {
		verdict = "FAIL"
	}
	if !r.Cleaned {
		verdict += " (the drill's tasks could not all be removed; run it again to clean up)"
	}
	fmt.Fprintln(out, verdict)
}
