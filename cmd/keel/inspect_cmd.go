package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelq/keel/server"
)

func newInspectCmd() *cobra.Command {
	return newTaskCmd("inspect <id> | --key K", "Show a task's whole timeline: arrival, every attempt with node, duration and error, finished steps, result",
		(*apiClient).task, printTimeline)
}

// printTimeline writes everything known about t, its history in order.
func printTimeline(out io.Writer, t server.Task) {
	tw := newTable(out)
	fmt.Fprintf(tw, "task\t%d\n", t.ID)
	fmt.Fprintf(tw, "type\t%s\n", t.Type)
	fmt.Fprintf(tw, "queue\t%s (priority %d)\n", t.Queue, t.Priority)
	if t.Archived {
		fmt.Fprintf(tw, "state\t%s (archived)\n", t.State)
	} else {
		fmt.Fprintf(tw, "state\t%s\n", t.State)
	}
	fmt.Fprintf(tw, "attempts\t%d of %d (timeout %s each)\n", t.Attempt, t.MaxAttempts, short(time.Duration(t.Timeout)))
	fmt.Fprintf(tw, "payload\t%s\n", oneLine(string(t.Payload), 400))
	if len(t.Meta) > 0 && string(t.Meta) != "null" {
		fmt.Fprintf(tw, "meta\t%s\n", oneLine(string(t.Meta), 400))
	}
	switch {
	case t.IdempotencyKey != "":
		fmt.Fprintf(tw, "key\t%s\n", oneLine(t.IdempotencyKey, 400))
	case t.UniqueDigest != "":
		fmt.Fprintf(tw, "key\tfrom unique_by: %s\n", t.UniqueDigest)
	}
	tw.Flush() //nolint:errcheck // reported by the writes below

	fmt.Fprintln(out)
	fmt.Fprintln(out, "timeline")
	line := func(at time.Time, format string, args ...any) {
		fmt.Fprintf(out, "  %s  %s\n", stampMilli(at), fmt.Sprintf(format, args...))
	}
	line(t.CreatedAt, "arrived")
	if len(t.Errors) > 0 && t.Errors[0].Attempt > 1 {
		fmt.Fprintf(out, "  %s  (attempts before %d are no longer kept)\n", strings.Repeat(" ", 27), t.Errors[0].Attempt)
	}
	for _, e := range t.Errors {
		line(e.Start, "attempt %d on %s: %s after %s", e.Attempt, orDash(e.Node), outcomeText(e.Outcome), short(e.End.Sub(e.Start)))
		for _, l := range strings.Split(strings.TrimRight(e.Error, "\n"), "\n") {
			fmt.Fprintf(out, "  %s    %s\n", strings.Repeat(" ", 27), l)
		}
		if e.Stack != "" {
			for _, l := range strings.Split(strings.TrimRight(e.Stack, "\n"), "\n") {
				fmt.Fprintf(out, "  %s      %s\n", strings.Repeat(" ", 27), l)
			}
		}
	}
	switch t.State {
	case "succeeded":
		if t.AttemptedAt != nil && t.FinishedAt != nil {
			line(*t.AttemptedAt, "attempt %d on %s: succeeded after %s", t.Attempt, orDash(t.Node), short(t.FinishedAt.Sub(*t.AttemptedAt)))
		} else if t.FinishedAt != nil {
			line(*t.FinishedAt, "succeeded")
		}
	case "running":
		if t.AttemptedAt != nil {
			line(*t.AttemptedAt, "attempt %d on %s: running for %s", t.Attempt, orDash(t.Node), short(now().Sub(*t.AttemptedAt)))
		}
	case "pending":
		if t.Attempt > 0 {
			line(t.RunAt, "attempt %d of %d due (retry)", t.Attempt+1, t.MaxAttempts)
		} else {
			line(t.RunAt, "due")
		}
		switch {
		case t.ETA != nil && t.ETA.After(t.RunAt):
			line(*t.ETA, "estimated start (tasks ahead in the queue)")
		case t.ETAStatus == "paused":
			line(now(), "waiting: the queue or type is paused")
		case t.ETAStatus == "braked" && t.BrakeState == "half_open":
			line(now(), "waiting: the type's automatic brake is half open, its probe tasks run now (keel brakes)")
		case t.ETAStatus == "braked" && t.NextProbeAt != nil:
			line(*t.NextProbeAt, "next probe due: the type's automatic brake is open until then (keel brakes)")
		case t.ETAStatus == "braked":
			line(now(), "waiting: the type's automatic brake is open (keel brakes)")
		case t.ETAStatus == "no_worker":
			line(now(), "waiting: no live worker works queue %s", t.Queue)
		}
		if t.ETAFinish != nil && t.ETA != nil && t.ETAFinish.After(*t.ETA) {
			line(*t.ETAFinish, "estimated finish (the type's mean run time)")
		}
	case "dead":
		if t.FinishedAt != nil && t.Archived {
			line(*t.FinishedAt, "dead-lettered")
		} else if t.FinishedAt != nil {
			line(*t.FinishedAt, "dead-lettered: requeue with keel retry %d", t.ID)
		}
	case "cancelled":
		if t.FinishedAt != nil {
			line(*t.FinishedAt, "cancelled")
		}
	}
	if t.Archived && t.ArchivedAt != nil {
		line(*t.ArchivedAt, "archived after its retention ([retention]): found by id, no longer listed, requeued or cancelled")
	}
	if len(t.Steps) > 0 {
		fmt.Fprintln(out)
		fmt.Fprintln(out, "steps (finished, skipped by a later attempt)")
		for _, s := range t.Steps {
			line(s.At, "%s (attempt %d): %s", s.Name, s.Attempt, oneLine(string(s.Result), 400))
		}
	}
	if len(t.Result) > 0 && string(t.Result) != "null" {
		fmt.Fprintln(out)
		fmt.Fprintf(out, "result  %s\n", oneLine(string(t.Result), 2000))
	}
}

// outcomeText says how a failed attempt ended (driver.Outcome values).
func outcomeText(outcome string) string {
	switch outcome {
	case "", "error":
		return "failed"
	case "timeout":
		return "timed out"
	case "panic":
		return "panicked"
	case "permanent":
		return "failed permanently"
	case "lease_expired":
		return "lost its worker (lease expired)"
	}
	return outcome
}
