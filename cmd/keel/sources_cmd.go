package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelq/keel/server"
)

func newSourcesCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "sources",
		Short: "List the broker sources (RabbitMQ, NATS) with their state, counters and ack latency per node",
		Long: `sources lists every broker source's latest report, one line per source and
node: its state (running, paused, backlog, waiting, connecting, stopped), the
messages it accepted as new tasks, found duplicate, rejected (see keel rejected
list) and nacked for redelivery since it started, and the time from a message's
arrival to its ack (median and 99th percentile).

  keel sources
  keel sources --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := f.client()
			if err != nil {
				return err
			}
			var l server.SourceList
			raw, err := api.call(cmd.Context(), http.MethodGet, "/v1/sources", nil, nil, &l)
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			return printSources(cmd.OutOrStdout(), l.Sources)
		},
	}
	addAPIFlags(cmd, &f)
	return cmd
}

func printSources(out io.Writer, ss []server.SourceRecord) error {
	if len(ss) == 0 {
		fmt.Fprintln(out, "no sources have reported")
		return nil
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "SOURCE\tNODE\tKIND\tTYPE\tSTATE\tACCEPTED\tDUPLICATE\tREJECTED\tNACKED\tACK P50\tACK P99\tUPDATED\tLAST ERROR")
	for _, s := range ss {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", s.Name, s.Node, s.Kind, s.Type, s.State,
			s.Accepted, s.Duplicate, s.Rejected, s.Nacked, ackSpan(s.AckP50), ackSpan(s.AckP99), ago(s.UpdatedAt), orDash(oneLine(s.LastError, 80)))
	}
	return tw.Flush()
}

// printSourceStats is keel stats' sources section.
func printSourceStats(out io.Writer, ss []server.SourceRecord) error {
	if len(ss) == 0 {
		return nil
	}
	fmt.Fprintln(out, "\nsources:")
	tw := newTable(out)
	fmt.Fprintln(tw, "SOURCE\tNODE\tSTATE\tACCEPTED\tDUPLICATE\tREJECTED\tNACKED\tACK P99")
	for _, s := range ss {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", s.Name, s.Node, s.State, s.Accepted, s.Duplicate, s.Rejected, s.Nacked, ackSpan(s.AckP99))
	}
	return tw.Flush()
}

// ackSpan shows an ack latency; "-" before the first ack.
func ackSpan(d server.Duration) string {
	if d <= 0 {
		return "-"
	}
	return short(time.Duration(d))
}

func newRejectedCmd() *cobra.Command {
	var f apiFlags
	cmd := &cobra.Command{
		Use:   "rejected",
		Short: "List, show, resubmit or delete the messages broker sources could not turn into tasks",
		Long: `rejected works on the messages a broker source kept because they could not
become a task (not JSON, no natural key, too large): they wait, never dropped,
until resubmitted or deleted.

  keel rejected list --source orders --open
  keel rejected show 42                          (reason, headers, body)
  keel rejected resubmit 42                      (once the cause is fixed)
  keel rejected resubmit 42 --payload fixed.json --key order-17
  keel rejected delete 42`,
		Args: cobra.NoArgs,
	}
	addAPIFlags(cmd, &f)
	cmd.AddCommand(newRejectedListCmd(&f), newRejectedShowCmd(&f), newRejectedResubmitCmd(&f), newRejectedDeleteCmd(&f))
	return cmd
}

func newRejectedListCmd(f *apiFlags) *cobra.Command {
	var (
		source    string
		open, all bool
		limit     int
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List rejected messages, newest first, with the reason and the start of the body",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !all && (limit < 1 || limit > 1000) {
				return fmt.Errorf("--limit must be in 1..1000 (or use --all), got %d", limit)
			}
			api, err := f.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if source != "" {
				q.Set("source", source)
			}
			if open {
				q.Set("open", "true")
			}
			var msgs []server.RejectedRecord
			more := false
			for {
				page := 1000
				if !all {
					page = limit - len(msgs)
				}
				q.Set("limit", strconv.Itoa(page))
				var l server.RejectedList
				if _, err := api.call(cmd.Context(), http.MethodGet, "/v1/rejected", q, nil, &l); err != nil {
					return err
				}
				msgs = append(msgs, l.Rejected...)
				if l.NextCursor == "" {
					break
				}
				if !all && len(msgs) >= limit {
					more = true
					break
				}
				q.Set("cursor", l.NextCursor)
			}
			if f.json {
				if msgs == nil {
					msgs = []server.RejectedRecord{}
				}
				return printJSON(cmd.OutOrStdout(), server.RejectedList{Rejected: msgs})
			}
			return printRejected(cmd.OutOrStdout(), msgs, more)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&source, "source", "", "only this source's messages")
	fs.BoolVar(&open, "open", false, "only the messages not resubmitted yet")
	fs.IntVar(&limit, "limit", 50, "how many messages to show, at most 1000")
	fs.BoolVar(&all, "all", false, "show every matching message, paging through the API")
	return cmd
}

func printRejected(out io.Writer, msgs []server.RejectedRecord, more bool) error {
	if len(msgs) == 0 {
		fmt.Fprintln(out, "no rejected messages")
		return nil
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "ID\tSOURCE\tTYPE\tRECEIVED\tSIZE\tSTATUS\tREASON\tBODY")
	for _, m := range msgs {
		status := "open"
		if m.TaskID != 0 {
			status = "task " + strconv.FormatInt(m.TaskID, 10)
		}
		body := "(binary)"
		if m.BodyEncoding != "base64" {
			body = oneLine(strconv.Quote(m.Body), 40)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", m.ID, m.Source, m.Type, stamp(m.ReceivedAt), m.Size, status,
			oneLine(m.Reason, 60), body)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if more {
		fmt.Fprintln(out, "(more messages match: raise --limit or use --all)")
	}
	return nil
}

// callRejected sends method to the rejected message whose id is arg and
// decodes the message the API answers with.
func callRejected(ctx context.Context, f *apiFlags, method, arg string) (server.RejectedRecord, []byte, error) {
	var m server.RejectedRecord
	id, err := parseRejectedID(arg)
	if err != nil {
		return m, nil, err
	}
	api, err := f.client()
	if err != nil {
		return m, nil, err
	}
	raw, err := api.call(ctx, method, rejectedPath(id), nil, nil, &m)
	return m, raw, err
}

func newRejectedShowCmd(f *apiFlags) *cobra.Command {
	var body bool
	cmd := &cobra.Command{
		Use:   "show <id>",
		Short: "Print a rejected message: why it was rejected, its headers and its body",
		Long: `show prints a rejected message: why it was rejected, its headers and its body
(as text, or base64 when it is not UTF-8). --body writes only the stored body,
byte for byte, for a file or another program.

  keel rejected show 42
  keel rejected show 42 --body > message.bin`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if body && f.json {
				return errors.New("--body and --json both choose the output: use one")
			}
			m, raw, err := callRejected(cmd.Context(), f, http.MethodGet, args[0])
			if err != nil {
				return err
			}
			switch {
			case f.json:
				return printRaw(cmd.OutOrStdout(), raw)
			case body:
				return writeRejectedBody(cmd.OutOrStdout(), cmd.ErrOrStderr(), m)
			}
			return printRejectedMessage(cmd.OutOrStdout(), m)
		},
	}
	cmd.Flags().BoolVar(&body, "body", false, "write only the stored body, byte for byte (binary bodies decoded from base64)")
	return cmd
}

// writeRejectedBody writes m's stored body as it arrived, and says on
// stderr when only its first part was stored.
func writeRejectedBody(out, errOut io.Writer, m server.RejectedRecord) error {
	b := []byte(m.Body)
	if m.BodyEncoding == "base64" {
		var err error
		if b, err = base64.StdEncoding.DecodeString(m.Body); err != nil {
			return fmt.Errorf("decode the body of rejected message %d: %w", m.ID, err)
		}
	}
	if m.Truncated {
		fmt.Fprintf(errOut, "keel: only the first %d of the message's %d bytes were stored\n", len(b), m.Size)
	}
	_, err := out.Write(b)
	return err
}

func printRejectedMessage(out io.Writer, m server.RejectedRecord) error {
	fmt.Fprintf(out, "rejected message %d from source %s\n", m.ID, m.Source)
	fmt.Fprintf(out, "  received   %s (%s)\n", stamp(m.ReceivedAt), ago(m.ReceivedAt))
	fmt.Fprintf(out, "  reason     %s\n", m.Reason)
	queue := m.Queue
	if queue == "" {
		queue = "the type's default"
	}
	fmt.Fprintf(out, "  becomes    type %s, queue %s, natural key %s\n", m.Type, queue, m.Key)
	if m.TaskID != 0 {
		fmt.Fprintf(out, "  status     resubmitted %s as task %d\n", stamp(*m.ResubmittedAt), m.TaskID)
	} else {
		fmt.Fprintf(out, "  status     open: keel rejected resubmit %d, or keel rejected delete %d\n", m.ID, m.ID)
	}
	fmt.Fprintln(out, "headers:")
	if len(m.Headers) == 0 {
		fmt.Fprintln(out, "  (none)")
	}
	names := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		fmt.Fprintf(out, "  %s: %s\n", k, strings.Join(m.Headers[k], ", "))
	}
	cut := ""
	if m.Truncated {
		cut = ", only the first part stored"
	}
	if m.BodyEncoding == "base64" {
		fmt.Fprintf(out, "body (%d bytes, not UTF-8 text: base64%s):\n%s\n", m.Size, cut, m.Body)
		return nil
	}
	fmt.Fprintf(out, "body (%d bytes%s):\n%s\n", m.Size, cut, strings.TrimRight(m.Body, "\n"))
	return nil
}

func newRejectedResubmitCmd(f *apiFlags) *cobra.Command {
	var payloadFile, key string
	cmd := &cobra.Command{
		Use:   "resubmit <id>",
		Short: "Turn a rejected message into a task, as stored or with a corrected payload or key",
		Long: `resubmit turns a rejected message into a task of its source's type and queue.
Without flags the stored body is the payload and the natural key is read from it
(or from the stored headers) with the source's key spec: use it once the cause
is gone, such as a raised size limit. --payload replaces the body with the JSON
in a file (- reads standard input), --key sets the natural key.

  keel rejected resubmit 42
  keel rejected resubmit 42 --payload fixed.json
  echo '{"order_id":17}' | keel rejected resubmit 42 --payload - --key 17`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseRejectedID(args[0])
			if err != nil {
				return err
			}
			var body *server.ResubmitRequest
			if payloadFile != "" || key != "" {
				body = &server.ResubmitRequest{Key: key}
			}
			if payloadFile != "" {
				if body.Payload, err = readPayloadFile(payloadFile, cmd.InOrStdin()); err != nil {
					return err
				}
			}
			api, err := f.client()
			if err != nil {
				return err
			}
			var reqBody any
			if body != nil {
				reqBody = body
			}
			var t server.Task
			raw, err := api.call(cmd.Context(), http.MethodPost, rejectedPath(id)+"/resubmit", nil, reqBody, &t)
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			if t.Duplicate {
				fmt.Fprintf(cmd.OutOrStdout(), "rejected message %d: already task %d (type %s, queue %s, %s)\n", id, t.ID, t.Type, t.Queue, t.State)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rejected message %d: enqueued task %d (type %s, queue %s)\n", id, t.ID, t.Type, t.Queue)
			return nil
		},
	}
	cmd.Flags().StringVar(&payloadFile, "payload", "", "a file holding the JSON payload that replaces the stored body (- for standard input)")
	cmd.Flags().StringVar(&key, "key", "", "the natural key (default: read with the source's key spec)")
	return cmd
}

// readPayloadFile reads a JSON payload from the file name, or from in
// when name is "-".
func readPayloadFile(name string, in io.Reader) (json.RawMessage, error) {
	return readJSONFile("--payload", name, in)
}

// readJSONFile reads a JSON document given with flag from the file name,
// or from in when name is "-".
func readJSONFile(flag, name string, in io.Reader) (json.RawMessage, error) {
	var raw []byte
	var err error
	if name == "-" {
		raw, err = io.ReadAll(in)
	} else {
		raw, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("%s: %s is not valid JSON: %s", flag, payloadName(name), oneLine(string(raw), 80))
	}
	return raw, nil
}

func payloadName(name string) string {
	if name == "-" {
		return "standard input"
	}
	return name
}

func newRejectedDeleteCmd(f *apiFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete <id>",
		Short: "Delete a rejected message for good",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, raw, err := callRejected(cmd.Context(), f, http.MethodDelete, args[0])
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rejected message %d from source %s: deleted\n", m.ID, m.Source)
			return nil
		},
	}
}

func rejectedPath(id int64) string { return "/v1/rejected/" + strconv.FormatInt(id, 10) }

func parseRejectedID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("rejected message id must be a positive integer, got %q", s)
	}
	return id, nil
}
