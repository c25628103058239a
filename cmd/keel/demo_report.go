package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/keelq/keel"
)

// demoReport is what a demo run ended with, read back from the database.
type demoReport struct {
	Elapsed time.Duration
	Tasks   []*keel.TaskInfo
	ByState map[keel.State]int
	Types   []demoTypeStats
	// Outcomes counts failed attempts in the tasks' error histories by
	// outcome (error, panic, timeout, permanent, lease_expired).
	Outcomes map[string]int
	// Retried counts failed attempts that were followed by another attempt.
	Retried int
	Dead    []demoDeadLetter
	// PlannedDead lists the seq numbers the plan made to fail for good.
	PlannedDead []int

	Submitted, Deduped, Conflicts int
	Dupes                         []string
	Checks                        []demoCheck
	// Anomalies are oddities found reading the tasks back.
	Anomalies []string
	// Problems are the failed checks and the anomalies.
	Problems []string
}

type demoCheck struct {
	OK   bool
	Text string
}

type demoTypeStats struct {
	Type                               string
	Tasks, Succeeded, Dead, Unfinished int
	Runs, FailedRuns                   int64
	Snoozes, RetryAfters               int64
	AvgWait, AvgDone                   time.Duration
}

type demoDeadLetter struct {
	ID                 int64
	Type               string
	Seq                int
	Attempt, Max       int
	Outcome, LastError string
}

func (r *demoReport) unfinished() int {
	return r.ByState[keel.StatePending] + r.ByState[keel.StateRunning]
}

// report reads every task back and checks the run's promises.
func (d *demoRun) report(ctx context.Context, elapsed time.Duration) (*demoReport, error) {
	var tasks []*keel.TaskInfo
	p := keel.Filter{Limit: 1000}
	for {
		page, err := d.client.List(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("list tasks: %w", err)
		}
		tasks = append(tasks, page...)
		if len(page) < p.Limit {
			break
		}
		p.BeforeID = page[len(page)-1].ID
	}
	slices.SortFunc(tasks, func(a, b *keel.TaskInfo) int { return int(a.ID - b.ID) })

	r := &demoReport{
		Elapsed: elapsed, Tasks: tasks, ByState: map[keel.State]int{}, Outcomes: map[string]int{},
		Submitted: d.submitted, Deduped: d.deduped, Conflicts: d.conflicts, Dupes: d.dupes,
	}
	stats := map[string]*demoTypeStats{}
	var waits, dones = map[string]time.Duration{}, map[string]time.Duration{}
	for _, typ := range demoTypes {
		stats[typ] = &demoTypeStats{Type: typ, Runs: d.runs[typ].Load(), Snoozes: d.snoozes[typ].Load(), RetryAfters: d.retryAfters[typ].Load()}
	}
	seen := map[int]*keel.TaskInfo{}
	for _, t := range tasks {
		r.ByState[t.State]++
		st := stats[t.Type]
		if st == nil {
			r.Anomalies = append(r.Anomalies, fmt.Sprintf("task #%d has unexpected type %q", t.ID, t.Type))
			continue
		}
		st.Tasks++
		st.FailedRuns += int64(len(t.Errors))
		for _, e := range t.Errors {
			r.Outcomes[string(e.Outcome)]++
		}
		r.Retried += len(t.Errors)
		switch t.State {
		case keel.StateSucceeded:
			st.Succeeded++
		case keel.StateDead:
			st.Dead++
			r.Retried-- // the last failure was not retried
		default:
			st.Unfinished++
		}
		if !t.StartedAt.IsZero() {
			waits[t.Type] += t.StartedAt.Sub(t.CreatedAt)
		}
		if !t.FinishedAt.IsZero() {
			dones[t.Type] += t.FinishedAt.Sub(t.CreatedAt)
		}
		var args struct {
			Seq *int `json:"seq"`
		}
		if err := json.Unmarshal(t.Payload, &args); err != nil || args.Seq == nil || *args.Seq < 0 || *args.Seq >= len(d.plan) {
			r.Anomalies = append(r.Anomalies, fmt.Sprintf("task #%d has a payload not from the plan: %s", t.ID, t.Payload))
			continue
		}
		seq := *args.Seq
		if prev := seen[seq]; prev != nil {
			r.Anomalies = append(r.Anomalies, fmt.Sprintf("seq %d stored twice: tasks #%d and #%d", seq, prev.ID, t.ID))
		}
		seen[seq] = t
		if t.State == keel.StateDead {
			dl := demoDeadLetter{ID: t.ID, Type: t.Type, Seq: seq, Attempt: t.Attempt, Max: t.MaxAttempts}
			if n := len(t.Errors); n > 0 {
				dl.Outcome, dl.LastError = string(t.Errors[n-1].Outcome), t.Errors[n-1].Error
			}
			r.Dead = append(r.Dead, dl)
		}
	}
	for _, typ := range demoTypes {
		st := stats[typ]
		if st.Tasks > 0 {
			st.AvgWait = waits[typ] / time.Duration(st.Tasks)
		}
		if n := st.Succeeded + st.Dead; n > 0 {
			st.AvgDone = dones[typ] / time.Duration(n)
		}
		r.Types = append(r.Types, *st)
	}
	d.check(r, seen)
	for _, c := range r.Checks {
		if !c.OK {
			r.Problems = append(r.Problems, c.Text)
		}
	}
	r.Problems = append(r.Problems, r.Anomalies...)
	return r, nil
}

// check compares the database with the plan.
func (d *demoRun) check(r *demoReport, seen map[int]*keel.TaskInfo) {
	ok := func(cond bool, pass, fail string) {
		if cond {
			r.Checks = append(r.Checks, demoCheck{true, pass})
		} else {
			r.Checks = append(r.Checks, demoCheck{false, fail})
		}
	}
	finished := r.ByState[keel.StateSucceeded] + r.ByState[keel.StateDead]
	ok(finished == len(r.Tasks),
		"every task is succeeded or dead: nothing stuck",
		fmt.Sprintf("%d of %d tasks are not succeeded or dead (pending %d, running %d, cancelled %d)", len(r.Tasks)-finished,
			len(r.Tasks), r.ByState[keel.StatePending], r.ByState[keel.StateRunning], r.ByState[keel.StateCancelled]))

	var missing []int
	for _, p := range d.plan {
		if seen[p.seq] == nil {
			missing = append(missing, p.seq)
		}
	}
	ok(len(missing) == 0 && len(r.Tasks) == len(d.plan),
		fmt.Sprintf("%d tasks stored for %d planned: nothing lost, no duplicate stored", len(r.Tasks), len(d.plan)),
		fmt.Sprintf("%d tasks stored for %d planned; missing seq %v", len(r.Tasks), len(d.plan), missing))

	var wrongDead []string
	for _, p := range d.plan {
		t := seen[p.seq]
		if p.deadReason != "" {
			r.PlannedDead = append(r.PlannedDead, p.seq)
		}
		if t == nil || (t.State != keel.StateSucceeded && t.State != keel.StateDead) {
			continue // reported as missing or unfinished above
		}
		last := driverOutcome(t)
		switch {
		case p.deadReason == "" && t.State == keel.StateDead:
			wrongDead = append(wrongDead, fmt.Sprintf("seq %d (task #%d) is dead: %s", p.seq, t.ID, last))
		case p.deadReason == deadPermanent && (t.State != keel.StateDead || last != "permanent" || t.Attempt != 1):
			wrongDead = append(wrongDead, fmt.Sprintf("seq %d (task #%d) should be dead after 1 attempt with a permanent error: %s, attempt %d, %s", p.seq, t.ID, t.State, t.Attempt, last))
		case p.deadReason == deadPoison && (t.State != keel.StateDead || last != "panic" || t.Attempt != t.MaxAttempts):
			wrongDead = append(wrongDead, fmt.Sprintf("seq %d (task #%d) should be dead after %d panics: %s, attempt %d, %s", p.seq, t.ID, t.MaxAttempts, t.State, t.Attempt, last))
		}
	}
	deadText := fmt.Sprintf("dead letters are exactly the %d planned ones", len(r.PlannedDead))
	if finished < len(r.Tasks) {
		deadText = fmt.Sprintf("the %d finished tasks are dead exactly when planned", finished)
	}
	ok(len(wrongDead) == 0, deadText,
		"unexpected dead letters: "+strings.Join(wrongDead, "; "))

	var twice []string
	for _, p := range d.plan {
		t := seen[p.seq]
		n := p.applied.Load()
		if t == nil || (t.State == keel.StateSucceeded && n == 1) || (t.State != keel.StateSucceeded && n == 0) {
			continue
		}
		twice = append(twice, fmt.Sprintf("task #%d (%s) applied %d times", t.ID, t.State, n))
	}
	ok(len(twice) == 0,
		"every succeeded task was applied exactly once, no dead one at all",
		"applied counts wrong: "+strings.Join(twice, "; "))

	keyed, keys := 0, 0
	for _, p := range d.plan {
		if p.idemKey != "" || p.uniqueBy != "" {
			keyed++
		}
		if p.idemKey != "" {
			keys = 1
		}
	}
	ok(r.Deduped == keyed && r.Conflicts == keys,
		fmt.Sprintf("%d resubmissions deduplicated, %d key reuse with another payload rejected", r.Deduped, r.Conflicts),
		fmt.Sprintf("idempotency: %d of %d resubmissions deduplicated, %d of %d conflicts rejected", r.Deduped, keyed, r.Conflicts, keys))
}

func driverOutcome(t *keel.TaskInfo) string {
	if n := len(t.Errors); n > 0 {
		return string(t.Errors[n-1].Outcome)
	}
	return "no error recorded"
}

func (r *demoReport) print(out io.Writer) {
	done := r.ByState[keel.StateSucceeded] + r.ByState[keel.StateDead]
	verb := "finished"
	if r.unfinished() > 0 {
		verb = "stopped" // at the deadline or on interrupt
	}
	fmt.Fprintf(out, "\n%s after %v: %d of %d tasks finished, %.0f tasks/s\n\n", verb, r.Elapsed.Round(time.Millisecond),
		done, len(r.Tasks), float64(done)/r.Elapsed.Seconds())

	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "STATE\tTASKS")
	for _, s := range []keel.State{keel.StatePending, keel.StateRunning, keel.StateSucceeded, keel.StateDead, keel.StateCancelled} {
		if r.ByState[s] > 0 || s == keel.StateSucceeded || s == keel.StateDead {
			fmt.Fprintf(w, "%s\t%d\n", s, r.ByState[s])
		}
	}
	w.Flush()
	fmt.Fprintln(out)

	fmt.Fprintln(w, "TYPE\tTASKS\tSUCCEEDED\tDEAD\tRUNS\tFAILED RUNS\tRETRY-AFTER\tSNOOZES\tAVG WAIT\tAVG TO FINISH")
	for _, s := range r.Types {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t%v\n", s.Type, s.Tasks, s.Succeeded, s.Dead, s.Runs,
			s.FailedRuns, s.RetryAfters, s.Snoozes, s.AvgWait.Round(time.Millisecond), s.AvgDone.Round(time.Millisecond))
	}
	w.Flush()

	outcomes := make([]string, 0, len(r.Outcomes))
	for _, o := range []string{"error", "panic", "timeout", "permanent", "lease_expired"} {
		if r.Outcomes[o] > 0 {
			outcomes = append(outcomes, fmt.Sprintf("%s %d", o, r.Outcomes[o]))
		}
	}
	fmt.Fprintf(out, "\nfailed attempts by outcome: %s; retries seen: %d\n", strings.Join(outcomes, ", "), r.Retried)

	fmt.Fprintf(out, "\nidempotency: %d submissions, %d tasks stored, %d duplicates deduplicated, %d conflicting key reuse rejected\n",
		r.Submitted, len(r.Tasks), r.Deduped, r.Conflicts)
	for _, s := range r.Dupes {
		fmt.Fprintf(out, "  %s\n", s)
	}

	fmt.Fprintf(out, "\ndead letters (%d), kept for inspection and requeue:\n", len(r.Dead))
	if len(r.Dead) > 0 {
		fmt.Fprintln(w, "  ID\tTYPE\tSEQ\tATTEMPTS\tOUTCOME\tLAST ERROR")
		for _, dl := range r.Dead {
			fmt.Fprintf(w, "  #%d\t%s\t%d\t%d/%d\t%s\t%s\n", dl.ID, dl.Type, dl.Seq, dl.Attempt, dl.Max, dl.Outcome, truncateLine(dl.LastError, 72))
		}
		w.Flush()
	}

	fmt.Fprintln(out, "\nchecks:")
	for _, c := range r.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(out, "  %s  %s\n", mark, c.Text)
	}
	for _, a := range r.Anomalies {
		fmt.Fprintf(out, "  FAIL  %s\n", a)
	}
}

// truncateLine keeps the first line of s, at most n runes.
func truncateLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
