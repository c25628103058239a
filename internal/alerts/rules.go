package alerts

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/estimator"
)

// The alert rules' names (keel.RuleDeadPerHour and the others).
const (
	RuleDeadPerHour     = "dead_per_hour"
	RuleOldestReadyAge  = "oldest_ready_age"
	RuleFailureRatio    = "failure_ratio"
	RuleNoLiveWorker    = "no_live_worker"
	RuleNodeLost        = "node_lost"
	RuleBrakeOpen       = "brake_open"
	RuleSequenceBlocked = "sequence_blocked"
	RuleNotifierFailing = "notifier_failing"
)

// RuleNames is every rule that can fire, in the order keel lists them. A
// test checks that every condition the evaluator builds names one of
// these.
var RuleNames = []string{RuleDeadPerHour, RuleOldestReadyAge, RuleFailureRatio, RuleNoLiveWorker, RuleNodeLost, RuleBrakeOpen, RuleSequenceBlocked,
	RuleNotifierFailing}

// Rules are the thresholds the rules fire above (keel.AlertRules, which
// documents each field and converts to this type).
type Rules struct {
	DeadPerHour        int // -1: off
	OldestReadyAge     time.Duration
	FailureRatio       float64
	FailureMinAttempts int
	FailureWindow      time.Duration
	NoLiveWorker       bool
	NodeLost           bool
}

// condition is one rule's verdict on one subject.
type condition struct {
	rule, subject string
	message, hint string
	values        map[string]any
}

func (c condition) key() string { return c.rule + "\n" + c.subject }

// evaluate returns the conditions that hold in snap under rules. It reads
// only the snapshot (live counters, the last hour's history, settings,
// nodes, open brakes): no table scans.
func evaluate(rules Rules, snap *estimator.Snapshot, liveWindow time.Duration) []condition {
	var out []condition
	if rules.DeadPerHour >= 0 {
		out = append(out, deadConditions(rules.DeadPerHour, snap)...)
	}
	for _, q := range snap.QueueNames() {
		if q == Queue {
			continue
		}
		views, _, oldest := snap.Views(func(r driver.CountRow) bool { return r.Queue == q })
		ready := views[estimator.ViewReady]
		if rules.OldestReadyAge > 0 && ready > 0 && oldest > rules.OldestReadyAge {
			out = append(out, condition{rule: RuleOldestReadyAge, subject: "queue:" + q,
				message: fmt.Sprintf("the oldest ready task in queue %s has waited at least %v (the rule fires above %v); %d tasks are ready.",
					q, oldest.Round(time.Second), rules.OldestReadyAge, ready),
				hint:   fmt.Sprintf("keel stats; keel nodes; keel queue list (is queue %s paused, or are its workers busy or gone?)", q),
				values: map[string]any{"oldest_ready_seconds": int64(oldest.Seconds()), "ready": ready, "threshold_seconds": int64(rules.OldestReadyAge.Seconds())}})
		}
		if rules.NoLiveWorker && ready > 0 && !snap.Served(q, liveWindow) {
			out = append(out, condition{rule: RuleNoLiveWorker, subject: "queue:" + q,
				message: fmt.Sprintf("queue %s has %d ready tasks and no live worker process works it.", q, ready),
				hint:    fmt.Sprintf("keel nodes; start a worker for queue %s (keel serve with a type of that queue, or a Go client with Queues[%q])", q, q),
				values:  map[string]any{"ready": ready}})
		}
	}
	if rules.FailureRatio > 0 {
		out = append(out, failureConditions(rules, snap)...)
	}
	out = append(out, notifierConditions(snap)...)
	if rules.NodeLost {
		for _, n := range snap.Nodes {
			silent := snap.At.Sub(n.HeartbeatAt)
			if silent <= liveWindow {
				continue
			}
			out = append(out, condition{rule: RuleNodeLost, subject: "node:" + n.Name,
				message: fmt.Sprintf("node %s (host %s, pid %d) has sent no heartbeat for %v; the leader rescues its running tasks as their leases expire.",
					n.Name, n.Host, n.PID, silent.Round(time.Second)),
				hint:   fmt.Sprintf("keel nodes; check the process %d on host %s", n.PID, n.Host),
				values: map[string]any{"silent_seconds": int64(silent.Seconds()), "host": n.Host, "pid": n.PID}})
		}
	}
	out = append(out, sequenceConditions(snap)...)
	return append(out, brakeConditions(snap)...)
}

// deadConditions: dead letters of the last hour above threshold, per type
// and for all types together; keel's own types count on their own only,
// and alert deliveries not at all (notifier_failing watches them). The
// drill's type counts the dead letters present now, so that the drill's
// cleanup resolves its alert at once.
func deadConditions(threshold int, snap *estimator.Snapshot) []condition {
	perType := map[string]int64{}
	since := driver.DueMinute(snap.At.Add(-time.Hour))
	for _, m := range snap.Minutes {
		if m.Minute >= since && m.Type != DrillType && !strings.HasPrefix(m.Type, NotifyTypePrefix) {
			perType[m.Type] += m.Dead
		}
	}
	for _, r := range snap.Counts {
		if r.Type == DrillType && r.Kind == string(driver.StateDead) {
			perType[DrillType] += r.N
		}
	}
	var out []condition
	var total int64
	var top []string
	for _, t := range slices.Sorted(maps.Keys(perType)) {
		n := perType[t]
		if !keelType(t) {
			total += n
			if n > 0 {
				top = append(top, fmt.Sprintf("%s %d", t, n))
			}
		}
		if n > int64(threshold) {
			window := "in the last hour"
			if t == DrillType {
				window = "by the alert drill"
			}
			out = append(out, condition{rule: RuleDeadPerHour, subject: "type:" + t,
				message: fmt.Sprintf("%d tasks of type %s were dead-lettered %s (the rule fires above %d).", n, t, window, threshold),
				hint:    fmt.Sprintf("keel dlq list --type %s --after 1h", t),
				values:  map[string]any{"dead": n, "threshold": threshold}})
		}
	}
	if total > int64(threshold) {
		out = append(out, condition{rule: RuleDeadPerHour, subject: "all",
			message: fmt.Sprintf("%d tasks were dead-lettered in the last hour (the rule fires above %d): %s.", total, threshold, strings.Join(top, ", ")),
			hint:    "keel dlq list --after 1h",
			values:  map[string]any{"dead": total, "threshold": threshold}})
	}
	return out
}

// failureConditions: types whose failed share of the attempts that ended
// in the window is above the ratio.
func failureConditions(rules Rules, snap *estimator.Snapshot) []condition {
	type tally struct{ ended, failed int64 }
	byType := map[string]*tally{}
	since := driver.DueMinute(snap.At.Add(-rules.FailureWindow))
	for _, m := range snap.Minutes {
		if m.Minute < since || keelType(m.Type) {
			continue
		}
		t := byType[m.Type]
		if t == nil {
			t = &tally{}
			byType[m.Type] = t
		}
		t.ended += m.Ended
		t.failed += m.Failed
	}
	var out []condition
	for _, name := range slices.Sorted(maps.Keys(byType)) {
		t := byType[name]
		if t.ended < int64(rules.FailureMinAttempts) {
			continue
		}
		ratio := float64(t.failed) / float64(t.ended)
		if ratio <= rules.FailureRatio {
			continue
		}
		out = append(out, condition{rule: RuleFailureRatio, subject: "type:" + name,
			message: fmt.Sprintf("%d of the %d attempts of type %s that ended in the last %v failed (%.0f%%; the rule fires above %.0f%% of at least %d).",
				t.failed, t.ended, name, rules.FailureWindow, 100*ratio, 100*rules.FailureRatio, rules.FailureMinAttempts),
			hint:   fmt.Sprintf("keel list --type %s --state pending; keel inspect <id> shows each attempt's error", name),
			values: map[string]any{"failed": t.failed, "attempts": t.ended, "ratio": ratio, "threshold": rules.FailureRatio}})
	}
	return out
}

// notifierConditions: notifiers whose alert deliveries (tasks of type
// keel.notify.<name>) dead-lettered in the last hour, or keep failing: at
// least FailingAfter failed attempts in the last hour while one waits to
// retry.
func notifierConditions(snap *estimator.Snapshot) []condition {
	type tally struct{ dead, failed, retrying int64 }
	byName := map[string]*tally{}
	get := func(taskType string) *tally {
		name, ok := strings.CutPrefix(taskType, NotifyTypePrefix)
		if !ok {
			return nil
		}
		t := byName[name]
		if t == nil {
			t = &tally{}
			byName[name] = t
		}
		return t
	}
	since := driver.DueMinute(snap.At.Add(-time.Hour))
	for _, m := range snap.Minutes {
		if m.Minute < since {
			continue
		}
		if t := get(m.Type); t != nil {
			t.dead += m.Dead
			t.failed += m.Failed
		}
	}
	for _, r := range snap.Counts {
		if r.Kind != driver.KindRetrying {
			continue
		}
		if t := get(r.Type); t != nil {
			t.retrying += r.N
		}
	}
	var out []condition
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		t := byName[name]
		if t.dead == 0 && (t.retrying == 0 || t.failed < FailingAfter) {
			continue
		}
		msg := fmt.Sprintf("alert deliveries to notifier %s keep failing: %d failed attempts in the last hour, %d deliveries waiting to retry.",
			name, t.failed, t.retrying)
		if t.dead > 0 {
			msg = fmt.Sprintf("%d alert deliveries to notifier %s were given up in the last hour (dead-lettered after every attempt failed); %d wait to retry.",
				t.dead, name, t.retrying)
		}
		out = append(out, condition{rule: RuleNotifierFailing, subject: "notifier:" + name, message: msg,
			hint:   fmt.Sprintf("keel alerts (each delivery's last error); keel dlq list --queue keel --type %s", NotifyType(name)),
			values: map[string]any{"dead": t.dead, "failed": t.failed, "retrying": t.retrying}})
	}
	return out
}

// brakeConditions: one brake_open condition per type whose brake is open
// or half open, by type.
func brakeConditions(snap *estimator.Snapshot) []condition {
	var out []condition
	for _, t := range slices.Sorted(maps.Keys(snap.Braked)) {
		b := snap.Braked[t]
		out = append(out, condition{rule: RuleBrakeOpen, subject: "type:" + b.Type,
			message: fmt.Sprintf("the brake of type %s is %s: %s. Its tasks wait, pending, but for a trickle of probes (due retries first) while half open.",
				b.Type, strings.ReplaceAll(string(b.State), "_", " "), b.Reason),
			hint:   fmt.Sprintf("keel brakes; keel list --type %s --state pending; when the cause is fixed: keel brake close %s", b.Type, b.Type),
			values: map[string]any{"ratio": b.Ratio, "attempts": b.Attempts, "state": string(b.State)}})
	}
	return out
}

// sequenceConditions: one sequence_blocked condition per sequence key held
// by a dead member.
func sequenceConditions(snap *estimator.Snapshot) []condition {
	var out []condition
	for _, b := range snap.Blocked {
		out = append(out, condition{rule: RuleSequenceBlocked, subject: "sequence:" + b.Key,
			message: fmt.Sprintf("sequence %s is held by its dead member, task %d: the %d members after it wait until it is retried, deleted or archived.",
				b.Key, b.DeadID, b.Waiting),
			hint:   fmt.Sprintf("keel inspect %d; keel retry %d once the cause is fixed; keel sequences", b.DeadID, b.DeadID),
			values: map[string]any{"dead_task": b.DeadID, "waiting": b.Waiting}})
	}
	return out
}

// resolution says why an open alert no longer holds.
func resolution(a *driver.AlertRow, rules Rules, snap *estimator.Snapshot) string {
	off := map[string]bool{
		RuleDeadPerHour: rules.DeadPerHour < 0, RuleOldestReadyAge: rules.OldestReadyAge <= 0,
		RuleFailureRatio: rules.FailureRatio <= 0, RuleNoLiveWorker: !rules.NoLiveWorker, RuleNodeLost: !rules.NodeLost,
	}
	if off[a.Rule] {
		return fmt.Sprintf("the rule %s was turned off.", a.Rule)
	}
	kind, name, _ := strings.Cut(a.Subject, ":")
	switch a.Rule {
	case RuleDeadPerHour:
		if a.Subject == "type:"+DrillType {
			return "the drill removed its dead letters."
		}
		what := "all types together"
		if kind == "type" {
			what = "type " + name
		}
		return fmt.Sprintf("dead letters of %s in the last hour are back to %d or fewer.", what, rules.DeadPerHour)
	case RuleOldestReadyAge:
		return fmt.Sprintf("no ready task in queue %s has waited longer than %v.", name, rules.OldestReadyAge)
	case RuleFailureRatio:
		return fmt.Sprintf("type %s's failure ratio is back to %.0f%% or below (or fewer than %d attempts ended in %v).",
			name, 100*rules.FailureRatio, rules.FailureMinAttempts, rules.FailureWindow)
	case RuleNoLiveWorker:
		return fmt.Sprintf("queue %s has a live worker again, or no ready task.", name)
	case RuleBrakeOpen:
		return fmt.Sprintf("the brake of type %s closed: its tasks are claimed again.", name)
	case RuleSequenceBlocked:
		return fmt.Sprintf("sequence %s is no longer held by a dead member.", name)
	case RuleNotifierFailing:
		return fmt.Sprintf("no delivery to notifier %s was given up in the last hour, and none waits to retry after failing.", name)
	case RuleNodeLost:
		if kind == "node" && slices.ContainsFunc(snap.Nodes, func(n driver.NodeRow) bool { return n.Name == name }) {
			return fmt.Sprintf("node %s sends heartbeats again.", name)
		}
		return fmt.Sprintf("node %s left the node registry (stopped, or pruned after its silence).", name)
	}
	return "its condition no longer holds."
}
