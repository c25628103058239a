package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/keelq/keel/server"
)

// newWorkflowCmd is keel workflow: create workflows, show their graphs,
// list them.
func newWorkflowCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "Create workflows (tasks that run once the tasks they need succeeded); show, list them",
		Long: `workflow works with workflows: named tasks, each running once every task it
needs has succeeded. A workflow file holds the body of POST /v1/workflows:

  {"name": "weekly reports", "on_failure": "cancel",
   "tasks": [{"name": "sales", "type": "report.build", "payload": {"report": "sales"}},
             {"name": "stock", "type": "report.build", "payload": {"report": "stock"}},
             {"name": "mail", "type": "report.mail", "needs": ["sales", "stock"]}]}

  keel workflow create weekly.json     (- reads standard input)
  keel workflow show 12                (each task's state and what it needs)
  keel workflow list`,
		Args: cobra.NoArgs,
	}
	addAPIFlags(cmd, &f)
	cmd.AddCommand(newWorkflowCreateCmd(&f), newWorkflowShowCmd(&f), newWorkflowListCmd(&f))
	return cmd
}

// newWorkflowCreateCmd is keel workflow create.
func newWorkflowCreateCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "create FILE",
		Short: "Create a workflow from a JSON file holding the body of POST /v1/workflows (- for standard input)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := readJSONFile("FILE", args[0], cmd.InOrStdin())
			if err != nil {
				return err
			}
			api, err := f.client()
			if err != nil {
				return err
			}
			var w server.WorkflowRecord
			raw, err := api.call(cmd.Context(), http.MethodPost, "/v1/workflows", nil, body, &w)
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "workflow %d created: %d tasks\n", w.ID, len(w.Tasks))
			return printWorkflow(cmd.OutOrStdout(), w)
		},
	}
}

// newWorkflowShowCmd is keel workflow show.
func newWorkflowShowCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a workflow: its state, and each task's state and what it needs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id < 1 {
				return fmt.Errorf("workflow id must be a positive integer, got %q", args[0])
			}
			api, err := f.client()
			if err != nil {
				return err
			}
			var w server.WorkflowRecord
			raw, err := api.call(cmd.Context(), http.MethodGet, "/v1/workflows/"+strconv.FormatInt(id, 10), nil, nil, &w)
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			return printWorkflow(cmd.OutOrStdout(), w)
		},
	}
}

// newWorkflowListCmd is keel workflow list.
func newWorkflowListCmd(f *apiFlags) *cobra.Command {
	var before int64
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List workflows, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := f.client()
			if err != nil {
				return err
			}
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			if before > 0 {
				q.Set("before_id", strconv.FormatInt(before, 10))
			}
			var l server.WorkflowList
			raw, err := api.call(cmd.Context(), http.MethodGet, "/v1/workflows", q, nil, &l)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if f.json {
				return printRaw(out, raw)
			}
			if len(l.Workflows) == 0 {
				fmt.Fprintln(out, "no workflows")
				return nil
			}
			tw := newTable(out)
			fmt.Fprintln(tw, "ID\tNAME\tON FAILURE\tCREATED")
			for _, w := range l.Workflows {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", w.ID, w.Name, w.OnFailure, stamp(w.CreatedAt))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().Int64Var(&before, "before", 0, "only workflows with a lower id (the last id of the previous page)")
	cmd.Flags().IntVar(&limit, "limit", 100, "workflows to list, 1..1000")
	return cmd
}

// printWorkflow writes a workflow and its tasks.
func printWorkflow(out io.Writer, w server.WorkflowRecord) error {
	tw := newTable(out)
	fmt.Fprintf(tw, "workflow:\t%d %s\n", w.ID, w.Name)
	fmt.Fprintf(tw, "state:\t%s\n", w.State)
	fmt.Fprintf(tw, "on failure:\t%s\n", w.OnFailure)
	fmt.Fprintf(tw, "created:\t%s\n", stamp(w.CreatedAt))
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = newTable(out)
	fmt.Fprintln(tw, "NAME\tTASK\tTYPE\tSTATE\tNEEDS")
	for _, n := range w.Tasks {
		state := n.State
		switch {
		case state == "":
			state = "(no longer stored)"
		case n.Held:
			state = "waiting"
		}
		needs := strings.Join(n.Needs, ", ")
		if needs == "" {
			needs = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", n.Name, n.TaskID, n.Type, state, needs)
	}
	return tw.Flush()
}
