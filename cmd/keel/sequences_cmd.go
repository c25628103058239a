package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/keelq/keel/server"
)

// newSequencesCmd is keel sequences: the sequences a dead member holds.
func newSequencesCmd() *cobra.Command {
	var f apiFlags
	var after string
	var limit int
	cmd := &cobra.Command{
		Use:   "sequences",
		Short: "List the sequences a dead member holds, with the members waiting behind it",
		Long: `sequences lists the sequence keys whose first member is dead. Tasks
enqueued with the same sequence key run one at a time, in enqueue order; a
dead member holds the members after it until it is retried (keel retry
<id>), deleted or archived, unless they were enqueued with
--sequence-on-dead skip.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			api, err := f.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if after != "" {
				q.Set("after", after)
			}
			if limit != 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			var l server.BlockedSequenceList
			raw, err := api.call(cmd.Context(), http.MethodGet, "/v1/sequences/blocked", q, nil, &l)
			if err != nil {
				return err
			}
			if f.json {
				return printRaw(cmd.OutOrStdout(), raw)
			}
			return printBlockedSequences(cmd.OutOrStdout(), l)
		},
	}
	addAPIFlags(cmd, &f)
	cmd.Flags().StringVar(&after, "after", "", "list the keys after this one (the next page)")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many keys, 1-1000 (default 100)")
	return cmd
}

func printBlockedSequences(out io.Writer, l server.BlockedSequenceList) error {
	if len(l.Sequences) == 0 {
		fmt.Fprintln(out, "no sequence is held by a dead member")
		return nil
	}
	tw := newTable(out)
	fmt.Fprintln(tw, "SEQUENCE\tDEAD TASK\tDEAD SINCE\tWAITING")
	for _, b := range l.Sequences {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\n", b.Key, b.DeadTask, ago(b.DeadSince), b.Waiting)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out, "retry a dead task once its cause is fixed (keel retry <id>): the rest of its sequence then runs")
	if l.NextAfter != "" {
		fmt.Fprintf(out, "more: keel sequences --after %q\n", l.NextAfter)
	}
	return nil
}
