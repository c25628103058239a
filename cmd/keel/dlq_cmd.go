package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/keelq/keel"
	"github.com/keelq/keel/server"
)

// bulkPage is how many dead letters one bulk call changes.
const bulkPage = 1000

// dlqFilter is the selection flags of the dlq commands.
type dlqFilter struct {
	typ, queue, before, after string
}

func (d *dlqFilter) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&d.typ, "type", "", "only this task type")
	fs.StringVar(&d.queue, "queue", "", "only this queue")
	fs.StringVar(&d.before, "before", "", "only tasks dead-lettered before: an RFC 3339 time or a duration before now (2h, 7d)")
	fs.StringVar(&d.after, "after", "", "only tasks dead-lettered at or after: an RFC 3339 time or a duration before now")
}

// times parses --after and --before; zero when not given.
func (d *dlqFilter) times() (after, before time.Time, err error) {
	if d.after != "" {
		if after, err = parseWhen("--after", d.after); err != nil {
			return
		}
	}
	if d.before != "" {
		if before, err = parseWhen("--before", d.before); err != nil {
			return
		}
	}
	if !after.IsZero() && !before.IsZero() && !after.Before(before) {
		err = fmt.Errorf("--after (%s) must be before --before (%s)", stamp(after), stamp(before))
	}
	return
}

// describe says which dead letters d selects, as the words that follow
// "dead tasks": " of type email in queue mail, dead-lettered before
// 2026-01-02 15:04:05 (1h ago)"; empty without a filter. after and before
// are d.times().
func (d *dlqFilter) describe(after, before time.Time) string {
	var s string
	if d.typ != "" {
		s += " of type " + d.typ
	}
	if d.queue != "" {
		s += " in queue " + d.queue
	}
	var when string
	switch {
	case !after.IsZero() && !before.IsZero():
		when = "dead-lettered between " + moment(after) + " and " + moment(before)
	case !after.IsZero():
		when = "dead-lettered since " + moment(after)
	case !before.IsZero():
		when = "dead-lettered before " + moment(before)
	}
	if when != "" && s != "" {
		s += ","
	}
	if when != "" {
		s += " " + when
	}
	return s
}

// moment shows a time the operator gave: "2026-01-02 15:04:05 (1h ago)".
func moment(t time.Time) string { return stamp(t) + " (" + ago(t) + ")" }

func newDLQCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List, requeue or purge dead letters",
		Long: `dlq works on dead letters: tasks whose retries ran out or that failed
permanently. They stay in the task table, where requeue finds them, for
[retention] dead (default 30d, at least 7d); then the elected leader (a
process that runs workers: keel serve with HTTP-target types, or a Go
client after Start) moves them to the archive, where GET /v1/tasks/{id},
keel status and keel inspect still find them but requeue and purge do not. Archived tasks are
deleted only when [retention] archive is set. purge keeps dead letters
younger than 7 days (seed 000 §3.2: keep them at least a week) unless
--force is given.

  keel dlq list --type email.send
  keel dlq requeue --queue mail --after 2h
  keel dlq purge --before 14d --yes`,
	}
	addAPIFlags(cmd, &f)
	cmd.AddCommand(newDLQListCmd(&f), newDLQBulkCmd(&f, "requeue"), newDLQBulkCmd(&f, "purge"))
	return cmd
}

func newDLQListCmd(f *apiFlags) *cobra.Command {
	var (
		d     dlqFilter
		limit int
		all   bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, newest first, with their last error",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			after, before, err := d.times()
			if err != nil {
				return err
			}
			if !all && (limit < 1 || limit > 1000) {
				return fmt.Errorf("--limit must be in 1..1000 (or use --all), got %d", limit)
			}
			api, err := f.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if d.typ != "" {
				q.Set("type", d.typ)
			}
			if d.queue != "" {
				q.Set("queue", d.queue)
			}
			if !after.IsZero() {
				q.Set("finished_after", after.UTC().Format(time.RFC3339Nano))
			}
			if !before.IsZero() {
				q.Set("finished_before", before.UTC().Format(time.RFC3339Nano))
			}
			tasks, more, err := pages(cmd, api, "/v1/dead", q, limit, all)
			if err != nil {
				return err
			}
			return printDead(cmd.OutOrStdout(), f.json, tasks, more)
		},
	}
	d.register(cmd)
	cmd.Flags().IntVar(&limit, "limit", 50, "how many to show, at most 1000")
	cmd.Flags().BoolVar(&all, "all", false, "show every matching dead letter")
	return cmd
}

func printDead(out io.Writer, asJSON bool, tasks []server.Task, more bool) error {
	if asJSON {
		if tasks == nil {
			tasks = []server.Task{}
		}
		return printJSON(out, server.TaskList{Tasks: tasks})
	}
	if len(tasks) == 0 {
		fmt.Fprintln(out, "no dead tasks")
		return nil
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "ID\tTYPE\tQUEUE\tATTEMPTS\tDEAD SINCE\tLAST ERROR")
	for _, t := range tasks {
		last := "-"
		if n := len(t.Errors); n > 0 {
			last = oneLine(t.Errors[n-1].Error, 80)
		}
		dead := "-"
		if t.FinishedAt != nil {
			dead = stamp(*t.FinishedAt)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%s\t%s\n", t.ID, t.Type, t.Queue, t.Attempt, t.MaxAttempts, dead, last)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more {
		fmt.Fprintln(out, "(more dead tasks match: raise --limit or use --all)")
	}
	return nil
}

// newDLQBulkCmd makes dlq requeue and dlq purge.
func newDLQBulkCmd(f *apiFlags, action string) *cobra.Command {
	var (
		d          dlqFilter
		yes, force bool
		ids        []int64
	)
	short := "Requeue matching dead letters: pending again, runnable now, attempts reset"
	if action == "purge" {
		short = "Delete matching dead letters older than 7 days for good (--force: younger too; needs --yes, without it says how many match)"
	}
	cmd := &cobra.Command{
		Use:   action,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			after, before, err := d.times()
			if err != nil {
				return err
			}
			if len(ids) > bulkPage {
				return fmt.Errorf("--id: at most %d ids per call, got %d", bulkPage, len(ids))
			}
			for _, id := range ids {
				if id < 1 {
					return fmt.Errorf("--id: task ids are positive, got %d", id)
				}
			}
			api, err := f.client()
			if err != nil {
				return err
			}
			st, _, err := api.stats(cmd.Context())
			if err != nil {
				return err
			}
			// Only tasks dead before this command started, by the server's
			// clock: a requeued task that dies again is not taken twice.
			cutoff := st.At
			if !before.IsZero() && before.Before(cutoff) {
				cutoff = before
			}
			if action == "purge" && !force {
				// Dead letters are kept at least a week (seed 000 §3.2).
				if week := st.At.Add(-minDeadAge); week.Before(cutoff) {
					cutoff = week
					if !f.json {
						fmt.Fprintf(cmd.ErrOrStderr(), "keeping dead letters younger than 7 days: purging only those that died before %s (--force to include younger ones)\n", stamp(cutoff))
					}
				}
				if !after.IsZero() && !after.Before(cutoff) {
					return fmt.Errorf("every dead letter after %s is younger than 7 days: nothing to purge without --force", stamp(after))
				}
			}
			req := server.BulkRequest{Type: d.typ, Queue: d.queue, FinishedBefore: &cutoff, Limit: bulkPage}
			if !after.IsZero() {
				req.FinishedAfter = &after
			}
			if len(ids) > 0 {
				req.IDs = ids
				if action == "purge" && !yes {
					fmt.Fprintf(cmd.OutOrStdout(), "purge would delete those of the %d given tasks that are dead%s for good: run it again with --yes\n",
						len(ids), map[bool]string{true: "", false: " and older than 7 days"}[force])
					return nil
				}
			}
			if action == "purge" && !yes {
				return confirmPurge(cmd, api, f.json, &d, req, st, after, before, !force)
			}
			n, err := bulkAll(cmd, api, action, req, deadAtMost(st, d.queue))
			if err != nil {
				return fmt.Errorf("%w (%d tasks done before the error)", err, n)
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), server.BulkResponse{Count: n})
			}
			verb := map[string]string{"requeue": "requeued", "purge": "purged"}[action]
			fmt.Fprintf(cmd.OutOrStdout(), "%s %d dead tasks\n", verb, n)
			return nil
		},
	}
	d.register(cmd)
	if action == "purge" {
		cmd.Flags().BoolVar(&yes, "yes", false, "really delete")
		cmd.Flags().BoolVar(&force, "force", false, "also delete dead letters younger than 7 days")
	}
	cmd.Flags().Int64SliceVar(&ids, "id", nil, "only these tasks (repeat the flag or separate ids by commas; at most 1000); the other filters still apply")
	return cmd
}

// minDeadAge is how long dlq purge keeps a dead letter without --force.
const minDeadAge = keel.MinRetainDead

// maxConfirmCount bounds how many dead letters confirmPurge lists to count
// them, when no count the API keeps answers exactly.
const maxConfirmCount = 10 * bulkPage

// confirmPurge answers dlq purge without --yes: it deletes nothing and
// says how many dead letters the filter matches (an error, so the command
// fails), or that nothing matches (no error: there is nothing to confirm).
// It counts exactly what the purge would delete: with the 7-day floor in
// force (weekFloor, no --force) only dead letters older than a week.
func confirmPurge(cmd *cobra.Command, api *apiClient, asJSON bool, d *dlqFilter, req server.BulkRequest, st server.Stats, after, before time.Time, weekFloor bool) error {
	n, more, err := countDead(cmd.Context(), api, req, st, after.IsZero() && before.IsZero() && !weekFloor)
	if err != nil {
		return fmt.Errorf("count the dead tasks to purge: %w", err)
	}
	what := d.describe(after, before)
	if weekFloor {
		if what == "" {
			what = " older than 7 days"
		} else {
			what += ", older than 7 days"
		}
	}
	if n == 0 {
		if asJSON {
			return printJSON(cmd.OutOrStdout(), server.BulkResponse{Count: 0})
		}
		fmt.Fprintf(cmd.OutOrStdout(), "nothing to purge: no dead tasks%s\n", what)
		return nil
	}
	var tasks string
	switch {
	case more:
		tasks = fmt.Sprintf("more than %d dead tasks%s", n, what)
	case what == "":
		tasks = fmt.Sprintf("all %d dead tasks", n)
		if n == 1 {
			tasks = "the 1 dead task"
		}
	case n == 1:
		tasks = "1 dead task" + what
	default:
		tasks = fmt.Sprintf("%d dead tasks%s", n, what)
	}
	return fmt.Errorf("purge would delete %s for good: run it again with --yes", tasks)
}

// countDead counts the dead letters req selects. Without a time filter
// (untimed) the counts of /v1/stats (all, or one queue) and /v1/types (one
// type) are exact; otherwise it lists the dead letters a page at a time, at
// most maxConfirmCount (more is set when there are more).
func countDead(ctx context.Context, api *apiClient, req server.BulkRequest, st server.Stats, untimed bool) (n int64, more bool, err error) {
	switch {
	case untimed && req.Type == "":
		return deadAtMost(st, req.Queue), false, nil
	case untimed && req.Queue == "":
		l, _, err := api.types(ctx)
		if err != nil {
			return 0, false, err
		}
		for _, t := range l.Types {
			if t.Name == req.Type {
				return t.Counts["dead"], false, nil
			}
		}
		return 0, false, nil
	}
	q := url.Values{"limit": {fmt.Sprint(bulkPage)}}
	if req.Type != "" {
		q.Set("type", req.Type)
	}
	if req.Queue != "" {
		q.Set("queue", req.Queue)
	}
	if req.FinishedAfter != nil {
		q.Set("finished_after", req.FinishedAfter.UTC().Format(time.RFC3339Nano))
	}
	q.Set("finished_before", req.FinishedBefore.UTC().Format(time.RFC3339Nano))
	for {
		l, err := api.list(ctx, "/v1/dead", q)
		if err != nil {
			return 0, false, err
		}
		n += int64(len(l.Tasks))
		if l.NextCursor == "" {
			return n, false, nil
		}
		if n >= maxConfirmCount {
			return n, true, nil
		}
		q.Set("cursor", l.NextCursor)
	}
}

// deadAtMost is how many dead letters /v1/stats counts, in queue when it
// is set (keel's own queue included): an upper bound for a bulk call
// filtered by type or time.
func deadAtMost(st server.Stats, queue string) int64 {
	switch queue {
	case "":
		return st.Counts["dead"] + st.Keel.Queue.Counts["dead"]
	case st.Keel.Queue.Name:
		return st.Keel.Queue.Counts["dead"]
	}
	for _, q := range st.Queues {
		if q.Name == queue {
			return q.Counts["dead"]
		}
	}
	return 0
}

// bulkAll repeats a bulk call, bulkPage tasks at a time, until nothing is
// left, with a progress bar on a terminal. total (from /v1/stats) is the
// bar's length, an upper bound when filtering by type or time.
func bulkAll(cmd *cobra.Command, api *apiClient, action string, req server.BulkRequest, total int64) (int64, error) {
	var bar *progressbar.ProgressBar
	if errOut := cmd.ErrOrStderr(); isTerminal(errOut) && total > 0 {
		bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(errOut),
			progressbar.OptionSetDescription(action),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	var done int64
	for {
		n, err := api.bulk(cmd.Context(), action, req)
		if err != nil {
			return done, err
		}
		done += n
		if bar != nil {
			if done > bar.GetMax64() {
				bar.ChangeMax64(done)
			}
			bar.Set64(done) //nolint:errcheck // only drawing
		}
		if n == 0 {
			break
		}
	}
	if bar != nil {
		bar.ChangeMax64(max(done, 1))
		bar.Finish() //nolint:errcheck // only drawing
	}
	return done, nil
}
