package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelq/keel"
	"github.com/keelq/keel/cmd/keel/internal/config"
	"github.com/keelq/keel/server"
)

// The operator commands about single tasks: enqueue, status, list,
// inspect, cancel, retry.
func newTaskCmds() []*cobra.Command {
	return []*cobra.Command{newEnqueueCmd(), newStatusCmd(), newListCmd(), newInspectCmd(), newChangeCmd("cancel"), newChangeCmd("retry")}
}

func newEnqueueCmd() *cobra.Command {
	var (
		f                   apiFlags
		req                 server.EnqueueRequest
		priority, attempts  int
		delay, timeout, run string
	)
	cmd := &cobra.Command{
		Use:   "enqueue <type> [payload-json|-]",
		Short: "Add a task; the payload is JSON, from the argument or stdin (-)",
		Long: `enqueue stores one task of the given type and prints its id. The payload is
a JSON document given as the second argument, or read from stdin with "-";
without one it is {}.

  keel enqueue email.send '{"to":"a@example.com"}'
  keel enqueue report.build - < params.json --queue reports --delay 10m
  keel enqueue email.send '{"to":"a@example.com"}' --unique-by a@example.com
  keel enqueue report.mail '{}' --depends-on 12,13   (runs once 12 and 13 succeeded)`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Type = args[0]
			if len(args) == 2 {
				raw, err := readPayload(args[1], cmd.InOrStdin())
				if err != nil {
					return err
				}
				req.Payload = raw
			}
			fs := cmd.Flags()
			if fs.Changed("priority") {
				req.Priority = &priority
			}
			if fs.Changed("max-attempts") {
				req.MaxAttempts = &attempts
			}
			for _, d := range []struct {
				flag, value string
				dst         **server.Duration
			}{{"delay", delay, &req.Delay}, {"timeout", timeout, &req.Timeout}} {
				if d.value == "" {
					continue
				}
				v, err := config.ParseDuration(d.value)
				if err != nil {
					return fmt.Errorf("--%s: %w", d.flag, err)
				}
				sd := server.Duration(v)
				*d.dst = &sd
			}
			if run != "" {
				t, err := time.Parse(time.RFC3339, run)
				if err != nil {
					return fmt.Errorf("--run-at: want an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", run)
				}
				req.RunAt = &t
			}
			api, err := f.client()
			if err != nil {
				return err
			}
			t, raw, err := api.enqueue(cmd.Context(), req)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if f.json {
				return printRaw(out, raw)
			}
			if t.Duplicate {
				fmt.Fprintf(out, "task %d already exists (%s): nothing enqueued\n", t.ID, t.State)
				return nil
			}
			fmt.Fprintf(out, "enqueued task %d: %s on queue %s, %s, %s\n", t.ID, t.Type, t.Queue, t.State, when(t))
			return nil
		},
	}
	addAPIFlags(cmd, &f)
	fs := cmd.Flags()
	fs.StringVar(&req.Queue, "queue", "", "queue (default: the type's, else \"default\")")
	fs.IntVar(&priority, "priority", 0, "priority; larger runs first (default: the type's, else 0)")
	fs.StringVar(&delay, "delay", "", "start no sooner than this from now: 30s, 10m, 2h, 1d")
	fs.StringVar(&run, "run-at", "", "start no sooner than this RFC 3339 time")
	fs.IntVar(&attempts, "max-attempts", 0, "runs before the task is dead-lettered (default: the type's)")
	fs.StringVar(&timeout, "timeout", "", "bound of one attempt, e.g. 30s (default: the type's)")
	fs.StringVar(&req.UniqueBy, "unique-by", "", "natural key: the same key and payload return the existing task")
	fs.StringVar(&req.IdempotencyKey, "idempotency-key", "", "your own key: a replay returns the existing task")
	fs.StringVar(&req.Sequence, "sequence", "", "sequence key: tasks with the same key run one at a time, in enqueue order")
	fs.StringVar((*string)(&req.SequenceOnDead), "sequence-on-dead", "", "hold (default: a dead member holds the rest) or skip")
	fs.Int64SliceVar(&req.DependsOn, "depends-on", nil, "ids of tasks that must succeed first (repeat, or 1,2,3); held until then")
	cmd.MarkFlagsMutuallyExclusive("delay", "run-at")
	cmd.MarkFlagsMutuallyExclusive("unique-by", "idempotency-key")
	return cmd
}

// readPayload reads a JSON payload from arg, or from in when arg is "-".
func readPayload(arg string, in io.Reader) (json.RawMessage, error) {
	raw := []byte(arg)
	if arg == "-" {
		var err error
		if raw, err = io.ReadAll(in); err != nil {
			return nil, fmt.Errorf("reading the payload from stdin: %w", err)
		}
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("the payload is not valid JSON: %s (quote it for the shell: '{\"to\":\"a@example.com\"}')", oneLine(string(raw), 80))
	}
	return raw, nil
}

// when says when a task runs or ran, for one-line summaries: "runs in
// 5m (at ...)", "finished ... (3s ago)".
func when(t server.Task) string {
	switch t.State {
	case "pending":
		switch {
		case t.Held:
			return "held: waits for the task before it in sequence " + t.Sequence + " to finish"
		case t.RunAt.After(now()):
			return "runs " + ago(t.RunAt) + " (at " + stamp(t.RunAt) + ")"
		case t.ETAStatus == "paused":
			return "waits: its queue or type is paused"
		case t.ETAStatus == "braked" && t.BrakeState == "half_open":
			return "waits: its type's automatic brake is half open, probe tasks run now (keel brakes)"
		case t.ETAStatus == "braked" && t.NextProbeAt != nil:
			return "waits: its type's automatic brake is open, next probe " + ago(*t.NextProbeAt) + " (keel brakes)"
		case t.ETAStatus == "braked":
			return "waits: its type's automatic brake is open (keel brakes)"
		case t.ETAStatus == "no_worker":
			return "waits: no live worker works queue " + t.Queue
		case t.ETAStatus == "unknown":
			return "waits behind other tasks (no history yet to estimate from)"
		case t.ETA != nil && t.ETA.After(now()):
			return "starts " + ago(*t.ETA) + " (estimate: tasks ahead)"
		}
		return "runs now"
	case "running":
		if t.AttemptedAt != nil {
			return "started " + stamp(*t.AttemptedAt) + " on " + orDash(t.Node)
		}
		return ""
	}
	s := ""
	if t.FinishedAt != nil {
		s = "finished " + stamp(*t.FinishedAt) + " (" + ago(*t.FinishedAt) + ")"
	}
	if t.Archived {
		s = strings.TrimSpace(s + "  archived")
		if t.ArchivedAt != nil {
			s += " " + stamp(*t.ArchivedAt)
		}
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("task id must be a positive integer, got %q", s)
	}
	return id, nil
}

func newStatusCmd() *cobra.Command {
	return newTaskCmd("status <id> | --key K", "Print one line about a task: id, type, state, attempt, eta or finish",
		(*apiClient).task, func(out io.Writer, t server.Task) {
			fmt.Fprintln(out, strings.TrimSpace(fmt.Sprintf("%d  %s  %s  attempt %d/%d  %s", t.ID, t.Type, t.State, t.Attempt, t.MaxAttempts, when(t))))
		})
}

// newTaskCmd makes a command that takes a task id, or --key with an
// idempotency key, calls the API with call, and prints the task it answers
// (or the raw JSON with --json).
func newTaskCmd(use, short string, call func(*apiClient, context.Context, int64) (server.Task, []byte, error), print func(io.Writer, server.Task)) *cobra.Command {
	var (
		f   apiFlags
		key string
	)
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			keyed := cmd.Flags().Changed("key")
			switch {
			case keyed && len(args) == 1:
				return errors.New("give a task id or --key, not both")
			case !keyed && len(args) == 0:
				return errors.New("give a task id, or --key with the task's idempotency key")
			case keyed && key == "":
				return errors.New("--key: the idempotency key is empty")
			}
			api, err := f.client()
			if err != nil {
				return err
			}
			var id int64
			if keyed {
				if id, err = api.taskByKey(cmd.Context(), key); err != nil {
					return err
				}
			} else if id, err = parseID(args[0]); err != nil {
				return err
			}
			t, raw, err := call(api, cmd.Context(), id)
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			print(cmd.OutOrStdout(), t)
			return nil
		},
	}
	addAPIFlags(cmd, &f)
	cmd.Flags().StringVar(&key, "key", "", "find the task by its idempotency key instead of its id")
	return cmd
}

func newListCmd() *cobra.Command {
	var (
		f                        apiFlags
		state, typ, queue, since string
		exclTypes, exclQueues    string
		limit                    int
		all                      bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tasks, newest first",
		Long: `list shows tasks newest first, --limit of them (default 50) or --all.

  keel list --state dead --type email.send
  keel list --type 'email.*,report.build' --exclude-queue bulk
  keel list --exclude-type 'keel.*' --exclude-queue keel   # without keel's own tasks
  keel list --since 2h --all --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if state != "" && !keel.State(state).Valid() {
				return fmt.Errorf("--state must be one of %s; got %q", stateNames(), state)
			}
			q := url.Values{}
			for k, v := range map[string]string{"state": state, "type": typ, "queue": queue, "exclude_type": exclTypes, "exclude_queue": exclQueues} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if since != "" {
				t, err := parseWhen("--since", since)
				if err != nil {
					return err
				}
				q.Set("created_after", t.UTC().Format(time.RFC3339Nano))
			}
			if !all && (limit < 1 || limit > 1000) {
				return fmt.Errorf("--limit must be in 1..1000 (or use --all), got %d", limit)
			}
			api, err := f.client()
			if err != nil {
				return err
			}
			tasks, more, err := pages(cmd, api, "/v1/tasks", q, limit, all)
			if err != nil {
				return err
			}
			return printTasks(cmd.OutOrStdout(), f.json, tasks, more)
		},
	}
	addAPIFlags(cmd, &f)
	fs := cmd.Flags()
	fs.StringVar(&state, "state", "", "only this state: "+stateNames())
	fs.StringVar(&typ, "type", "", "only this task type, or any of a comma-separated list; name.* matches every type starting with name.")
	fs.StringVar(&queue, "queue", "", "only this queue")
	fs.StringVar(&exclTypes, "exclude-type", "", "leave out these task types (comma-separated, name.* as in --type; keel.* is keel's own)")
	fs.StringVar(&exclQueues, "exclude-queue", "", "leave out these queues (comma-separated; keel is keel's own)")
	fs.StringVar(&since, "since", "", "only tasks created since: an RFC 3339 time or a duration before now (2h, 7d)")
	fs.IntVar(&limit, "limit", 50, "how many tasks to show, at most 1000")
	fs.BoolVar(&all, "all", false, "show every matching task, paging through the API")
	return cmd
}

// states are a task's states, in the order of its life.
var states = []keel.State{keel.StatePending, keel.StateRunning, keel.StateSucceeded, keel.StateDead, keel.StateCancelled}

// stateNames lists states for help and errors: "pending, running, …".
func stateNames() string {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// pages reads tasks from path, newest first: limit of them, or every one
// with all. The API does the filtering. more is set when tasks were left
// out.
func pages(cmd *cobra.Command, api *apiClient, path string, q url.Values, limit int, all bool) (tasks []server.Task, more bool, err error) {
	for {
		page := 1000
		if !all {
			page = limit - len(tasks)
		}
		q.Set("limit", strconv.Itoa(page))
		l, err := api.list(cmd.Context(), path, q)
		if err != nil {
			return nil, false, err
		}
		for _, t := range l.Tasks {
			if !all && len(tasks) == limit {
				return tasks, true, nil
			}
			tasks = append(tasks, t)
		}
		if l.NextCursor == "" {
			return tasks, false, nil
		}
		if !all && len(tasks) == limit {
			return tasks, true, nil
		}
		q.Set("cursor", l.NextCursor)
	}
}

func printTasks(out io.Writer, asJSON bool, tasks []server.Task, more bool) error {
	if asJSON {
		if tasks == nil {
			tasks = []server.Task{}
		}
		return printJSON(out, server.TaskList{Tasks: tasks})
	}
	if len(tasks) == 0 {
		fmt.Fprintln(out, "no tasks")
		return nil
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "ID\tTYPE\tQUEUE\tSTATE\tATTEMPT\tCREATED\tWHEN")
	for _, t := range tasks {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", t.ID, t.Type, t.Queue, t.State, t.Attempt, t.MaxAttempts,
			stamp(t.CreatedAt), orDash(when(t)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more {
		fmt.Fprintln(out, "(more tasks match: raise --limit or use --all)")
	}
	return nil
}

// newChangeCmd makes cancel or retry.
func newChangeCmd(action string) *cobra.Command {
	short, done := "Cancel a pending or running task for good", "cancelled"
	if action == "retry" {
		short, done = "Send a dead or cancelled task back to pending, runnable now", "requeued"
	}
	change := func(a *apiClient, ctx context.Context, id int64) (server.Task, []byte, error) {
		return a.change(ctx, id, action)
	}
	return newTaskCmd(action+" <id>", short, change, func(out io.Writer, t server.Task) {
		fmt.Fprintln(out, strings.TrimSpace(fmt.Sprintf("task %d %s: %s %s", t.ID, done, t.State, when(t))))
	})
}
