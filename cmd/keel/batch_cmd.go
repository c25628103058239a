package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelq/keel/server"
)

// newBatchCmd is keel batch: create batches, add to and seal open ones,
// follow their progress and page through their members.
func newBatchCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "batch",
		Short: "Create batches of tasks with callbacks; add to, seal, show, list them and their members",
		Long: `batch works with batches: groups of tasks enqueued together, whose
on_success and on_finish callbacks are enqueued once when every member has
finished. A batch file holds the body of POST /v1/batches:

  {"tasks": [{"type": "email", "payload": {"to": "a@example.com"}}, ...],
   "on_success": {"type": "report"}, "on_finish": {"type": "report"},
   "open": false}

  keel batch create --file batch.json     (- reads standard input)
  keel batch add 12 --file more.json      (the file holds {"tasks": [...]})
  keel batch add 12 --file more.json --seal
  keel batch seal 12                      (no more members; it finishes once they have)
  keel batch show 12                      (counts by state, progress, ETA, callbacks)
  keel batch list --unfinished
  keel batch members 12 --after 340 --limit 50`,
		Args: cobra.NoArgs,
	}
	addAPIFlags(cmd, &f)
	cmd.AddCommand(newBatchCreateCmd(&f), newBatchAddCmd(&f), newBatchSealCmd(&f), newBatchShowCmd(&f),
		newBatchListCmd(&f), newBatchMembersCmd(&f))
	return cmd
}

// newBatchCreateCmd is keel batch create.
func newBatchCreateCmd(f *apiFlags) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "create --file F",
		Short: "Create a batch from a JSON file holding the body of POST /v1/batches (- for standard input)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			body, err := readBatchFile(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			return batchWrite(cmd, f, http.MethodPost, "/v1/batches", body, "created")
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "the JSON file holding the batch (- for standard input)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// newBatchAddCmd is keel batch add.
func newBatchAddCmd(f *apiFlags) *cobra.Command {
	var file string
	var seal bool
	cmd := &cobra.Command{
		Use:   "add <id> --file F [--seal]",
		Short: "Add the tasks of a JSON file ({\"tasks\": [...]}) to an open batch, and seal it with --seal",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseBatchID(args[0])
			if err != nil {
				return err
			}
			body, err := readBatchFile(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			if seal {
				if body, err = withSeal(body); err != nil {
					return err
				}
			}
			return batchWrite(cmd, f, http.MethodPost, batchPath(id)+"/tasks", body, "added to")
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "the JSON file holding {\"tasks\": [...]} (- for standard input)")
	cmd.Flags().BoolVar(&seal, "seal", false, "seal the batch after these tasks")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// newBatchSealCmd is keel batch seal.
func newBatchSealCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "seal <id>",
		Short: "Seal a batch: it takes no more tasks and finishes once its members have",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return batchRead(cmd, f, http.MethodPost, args[0], "/seal")
		},
	}
}

// newBatchShowCmd is keel batch show.
func newBatchShowCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show <id>",
		Short: "Show a batch: its state, members by state, progress, ETA and callbacks",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return batchRead(cmd, f, http.MethodGet, args[0], "")
		},
	}
}

// newBatchListCmd is keel batch list.
func newBatchListCmd(f *apiFlags) *cobra.Command {
	var unfinished bool
	var before int64
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--unfinished]",
		Short: "List batches, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := f.client()
			if err != nil {
				return err
			}
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			if unfinished {
				q.Set("unfinished", "true")
			}
			if before > 0 {
				q.Set("before_id", strconv.FormatInt(before, 10))
			}
			var l server.BatchList
			raw, err := api.call(cmd.Context(), http.MethodGet, "/v1/batches", q, nil, &l)
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			return printBatches(cmd.OutOrStdout(), l.Batches)
		},
	}
	cmd.Flags().BoolVar(&unfinished, "unfinished", false, "only the batches not finished yet")
	cmd.Flags().Int64Var(&before, "before", 0, "only batches with a lower id (the last id of the previous page)")
	cmd.Flags().IntVar(&limit, "limit", 100, "batches to list, 1..1000")
	return cmd
}

// newBatchMembersCmd is keel batch members.
func newBatchMembersCmd(f *apiFlags) *cobra.Command {
	var after int64
	var limit int
	cmd := &cobra.Command{
		Use:   "members <id> [--after N] [--limit N]",
		Short: "List a batch's members by id, with their states",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseBatchID(args[0])
			if err != nil {
				return err
			}
			api, err := f.client()
			if err != nil {
				return err
			}
			q := url.Values{"limit": {strconv.Itoa(limit)}}
			if after > 0 {
				q.Set("after_id", strconv.FormatInt(after, 10))
			}
			var l server.BatchMembers
			raw, err := api.call(cmd.Context(), http.MethodGet, batchPath(id)+"/tasks", q, nil, &l)
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			if err := printTasks(cmd.OutOrStdout(), false, l.Tasks, false); err != nil {
				return err
			}
			if len(l.Tasks) == limit {
				fmt.Fprintf(cmd.OutOrStdout(), "(more members may follow: --after %d)\n", l.Tasks[len(l.Tasks)-1].ID)
			}
			return nil
		},
	}
	cmd.Flags().Int64Var(&after, "after", 0, "only members with a higher id (the last id of the previous page)")
	cmd.Flags().IntVar(&limit, "limit", 100, "members to list, 1..1000")
	return cmd
}

// batchWrite posts body to path and prints the batch and the tasks the
// API stored; verb says what happened ("created", "added to").
func batchWrite(cmd *cobra.Command, f *apiFlags, method, path string, body json.RawMessage, verb string) error {
	api, err := f.client()
	if err != nil {
		return err
	}
	var bt server.BatchTasks
	raw, err := api.call(cmd.Context(), method, path, nil, body, &bt)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.json {
		return printRaw(out, raw)
	}
	fmt.Fprintf(out, "batch %d %s: %d tasks (%s, %d members)\n", bt.Batch.ID, verb, len(bt.Tasks), bt.Batch.State, bt.Batch.Total)
	return printTasks(out, false, bt.Tasks, false)
}

// batchRead calls method on batch arg (with suffix after its path) and
// prints the batch it answers.
func batchRead(cmd *cobra.Command, f *apiFlags, method, arg, suffix string) error {
	id, err := parseBatchID(arg)
	if err != nil {
		return err
	}
	api, err := f.client()
	if err != nil {
		return err
	}
	var b server.BatchRecord
	raw, err := api.call(cmd.Context(), method, batchPath(id)+suffix, nil, nil, &b)
	if err != nil {
		return err
	}
	if f.json {
		return printRaw(cmd.OutOrStdout(), raw)
	}
	return printBatch(cmd.OutOrStdout(), b)
}

// printBatch writes one batch as name: value lines.
func printBatch(out io.Writer, b server.BatchRecord) error {
	tw := newTable(out)
	fmt.Fprintf(tw, "batch:\t%d\n", b.ID)
	fmt.Fprintf(tw, "state:\t%s\n", b.State)
	fmt.Fprintf(tw, "progress:\t%.0f%% (%d of %d finished)\n", b.Progress*100, b.Succeeded+b.Dead+b.Cancelled, b.Total)
	fmt.Fprintf(tw, "members:\tpending %d  running %d  succeeded %d  dead %d  cancelled %d\n", b.Pending, b.Running, b.Succeeded, b.Dead, b.Cancelled)
	fmt.Fprintf(tw, "created:\t%s\n", stamp(b.CreatedAt))
	fmt.Fprintf(tw, "sealed:\t%s\n", optStamp(b.SealedAt))
	fmt.Fprintf(tw, "finished:\t%s\n", optStamp(b.FinishedAt))
	if b.ETA != nil {
		fmt.Fprintf(tw, "eta:\t%s (%s)\n", stamp(*b.ETA), ago(*b.ETA))
	}
	fmt.Fprintf(tw, "on_success:\t%s\n", taskRef(b.OnSuccessID))
	fmt.Fprintf(tw, "on_finish:\t%s\n", taskRef(b.OnFinishID))
	return tw.Flush()
}

// printBatches writes batches as a table. The API counts the members of
// a listed batch only once it finished: an unfinished one shows "-" (keel
// batch show counts them).
func printBatches(out io.Writer, bs []server.BatchRecord) error {
	if len(bs) == 0 {
		fmt.Fprintln(out, "no batches")
		return nil
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "ID\tSTATE\tTOTAL\tSUCCEEDED\tDEAD\tCANCELLED\tCREATED\tFINISHED")
	for _, b := range bs {
		counts := "-\t-\t-"
		if b.State == "finished" {
			counts = fmt.Sprintf("%d\t%d\t%d", b.Succeeded, b.Dead, b.Cancelled)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", b.ID, b.State, b.Total, counts, stamp(b.CreatedAt), optStamp(b.FinishedAt))
	}
	return tw.Flush()
}

// optStamp is stamp for a time that may be absent.
func optStamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return stamp(*t)
}

// taskRef names a callback task, "-" before it is enqueued.
func taskRef(id int64) string {
	if id == 0 {
		return "-"
	}
	return "task " + strconv.FormatInt(id, 10)
}

// readBatchFile reads a JSON body from the file name, or from in when
// name is "-".
func readBatchFile(name string, in io.Reader) (json.RawMessage, error) {
	return readJSONFile("--file", name, in)
}

// withSeal sets "seal": true in an add's body.
func withSeal(body json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, fmt.Errorf("--file must hold a JSON object such as {\"tasks\": [...]}")
	}
	m["seal"] = json.RawMessage("true")
	return json.Marshal(m)
}

// parseBatchID parses a batch id argument.
func parseBatchID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("batch id must be a positive integer, got %q", s)
	}
	return id, nil
}

// batchPath is the API path of batch id.
func batchPath(id int64) string { return "/v1/batches/" + strconv.FormatInt(id, 10) }
