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

func newSchedulesCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "List periodic tasks' schedules with their next runs; pause, resume or trigger one",
		Long: `schedules lists the stored schedules (from keel.toml [[schedules]] or a Go
client's Config.Schedules): spec, time zone, next run and last tick in the
schedule's zone, and whether it is paused. The elected leader enqueues each
tick once.

  keel schedules
  keel schedules pause nightly-report     (no tick runs until resumed)
  keel schedules resume nightly-report    (the paused period is not run)
  keel schedules trigger nightly-report   (one task now; the ticks do not move)
  keel schedules delete nightly-report    (it comes back if still configured)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := f.client()
			if err != nil {
				return err
			}
			var l server.ScheduleList
			raw, err := api.call(cmd.Context(), http.MethodGet, "/v1/schedules", nil, nil, &l)
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			return printSchedules(cmd.OutOrStdout(), l.Schedules)
		},
	}
	addAPIFlags(cmd, &f)
	for _, a := range []struct{ action, method, short string }{
		{"pause", http.MethodPost, "Pause a schedule: no tick of it is enqueued until resumed"},
		{"resume", http.MethodPost, "Resume a paused schedule (the ticks of the paused period do not run)"},
		{"trigger", http.MethodPost, "Enqueue one task of the schedule now (its ticks do not move)"},
		{"delete", http.MethodDelete, "Delete a stored schedule (its tasks stay; a configured one comes back at start)"},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   a.action + " <name>",
			Short: a.short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return scheduleAction(cmd, &f, a.action, a.method, args[0])
			},
		})
	}
	return cmd
}

func scheduleAction(cmd *cobra.Command, f *apiFlags, action, method, name string) error {
	api, err := f.client()
	if err != nil {
		return err
	}
	path := "/v1/schedules/" + url.PathEscape(name)
	if action != "delete" {
		path += "/" + action
	}
	out := cmd.OutOrStdout()
	if action == "trigger" {
		var task server.Task
		raw, err := api.call(cmd.Context(), method, path, nil, nil, &task)
		if err != nil {
			return err
		}
		if f.json {
			return printRaw(out, raw)
		}
		fmt.Fprintf(out, "schedule %s: enqueued task %d (type %s, queue %s)\n", name, task.ID, task.Type, task.Queue)
		return nil
	}
	var s server.ScheduleRecord
	raw, err := api.call(cmd.Context(), method, path, nil, nil, &s)
	if err != nil {
		return err
	}
	if f.json {
		return printRaw(out, raw)
	}
	switch action {
	case "delete":
		fmt.Fprintf(out, "schedule %s: deleted\n", s.Name)
	case "pause":
		fmt.Fprintf(out, "schedule %s: paused\n", s.Name)
	default:
		fmt.Fprintf(out, "schedule %s: running, next run %s\n", s.Name, zoned(s.NextRun))
	}
	return nil
}

func printSchedules(out io.Writer, ss []server.ScheduleRecord) error {
	if len(ss) == 0 {
		fmt.Fprintln(out, "no schedules")
		return nil
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "NAME\tSPEC\tZONE\tTYPE\tQUEUE\tNEXT RUN\tLAST TICK\tMISSED\tPAUSED")
	for _, s := range ss {
		next := zoned(s.NextRun)
		switch {
		case s.Paused:
			next = "paused"
		case s.Error != "":
			next = "error: " + s.Error
		case s.Due:
			next = "due now"
		}
		last := s.LastTick
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Spec, s.TimeZone, s.Type, s.Queue,
			next, zoned(&last), s.Missed, yesNo(s.Paused))
	}
	return tw.Flush()
}

// zoned formats a time in the zone it carries (the schedule's).
func zoned(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Format("2006-01-02 15:04:05 -07:00")
}
