package alerts

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/estimator"
)

// TestEvaluateRules: each rule fires exactly for the subject past its
// threshold, from the counters alone, and keel's own queue and types never
// count against users' ones.
func TestEvaluateRules(t *testing.T) {
	now := time.Unix(29_000_000*60+30, 0) // 30s into a minute
	minute := driver.DueMinute(now)
	snap := &estimator.Snapshot{At: now, Workers: map[string]int{},
		Counts: []driver.CountRow{
			// default: 5 ready since 15 minutes ago, worked by a live node.
			{Queue: "default", Type: "email", Kind: "pending", Due: minute - 15, N: 5},
			// reports: ready, no node works it.
			{Queue: "reports", Type: "pdf", Kind: "pending", Due: minute - 1, N: 2},
			// scheduled only: nothing is ready, so no rule cares.
			{Queue: "later", Type: "x", Kind: "pending", Due: minute + 30, N: 9},
			// keel's own queue is never "not served" nor "old".
			{Queue: Queue, Type: NotifyType("log"), Kind: "pending", Due: minute - 20, N: 1},
			// the drill's dead letters are counted from the table.
			{Queue: Queue, Type: DrillType, Kind: "dead", N: 4},
		},
		Minutes: []driver.MinuteRow{
			// email: 4 dead this hour (above 3); sms: 2 (not alone, but
			// 6 together); an old minute outside the hour does not count.
			{Minute: minute - 70, Queue: "default", Type: "email", Dead: 50},
			{Minute: minute - 30, Queue: "default", Type: "email", Dead: 3, Ended: 3, Failed: 3},
			{Minute: minute - 2, Queue: "default", Type: "email", Dead: 1, Ended: 30, Failed: 16},
			{Minute: minute - 1, Queue: "default", Type: "sms", Dead: 2, Ended: 19, Failed: 19},
			// keel's own deliveries failing do not trip failure_ratio.
			{Minute: minute, Queue: Queue, Type: NotifyType("hook"), Ended: 40, Failed: 40},
		},
		Nodes: []driver.NodeRow{
			{Name: "alive", Host: "h1", PID: 1, Queues: []string{"default"}, HeartbeatAt: now.Add(-5 * time.Second)},
			{Name: "gone", Host: "h2", PID: 2, Queues: []string{"default"}, HeartbeatAt: now.Add(-2 * time.Minute)},
		},
	}
	got := map[string]condition{}
	for _, c := range evaluate(defaults(), snap, 30*time.Second) {
		if _, dup := got[c.key()]; dup {
			t.Fatalf("condition %q twice", c.key())
		}
		got[c.key()] = c
	}
	want := []string{
		"dead_per_hour\ntype:email", "dead_per_hour\ntype:keel.drill", "dead_per_hour\nall",
		"oldest_ready_age\nqueue:default", "no_live_worker\nqueue:reports",
		"failure_ratio\ntype:email", "node_lost\nnode:gone",
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range got {
			if !yield(k) {
				return
			}
		}
	})
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("conditions\n got %q\nwant %q", keys, want)
	}
	all := got["dead_per_hour\nall"]
	if all.values["dead"] != int64(6) || !strings.Contains(all.message, "email 4, sms 2") {
		t.Errorf("all types: %v %q (the drill's 4 must not count)", all.values, all.message)
	}
	if c := got["dead_per_hour\ntype:email"]; c.hint != "keel dlq list --type email --after 1h" || c.values["dead"] != int64(4) {
		t.Errorf("email: %+v", c)
	}
	if c := got["failure_ratio\ntype:email"]; c.values["failed"] != int64(16) || c.values["attempts"] != int64(30) {
		t.Errorf("failure ratio counts the last 5 minutes only: %+v", c.values)
	}
	if c := got["oldest_ready_age\nqueue:default"]; !strings.Contains(c.message, "at least 14m") {
		t.Errorf("oldest ready: %q", c.message)
	}

	// Rules turned off or raised fire nothing.
	off := Rules{DeadPerHour: -1}
	if cs := evaluate(off, snap, 30*time.Second); len(cs) != 0 {
		t.Fatalf("every rule off: %v", cs)
	}
	raised := defaults()
	raised.DeadPerHour, raised.FailureMinAttempts = 10, 31
	for _, c := range evaluate(raised, snap, 30*time.Second) {
		if c.rule == RuleDeadPerHour || c.rule == RuleFailureRatio {
			t.Errorf("raised thresholds: %s %s fired", c.rule, c.subject)
		}
	}
}

// TestNotifierFailing: notifier_failing fires for a notifier whose
// delivery was given up in the last hour, or that failed three times with
// a delivery waiting to retry; not for one that recovered, nor for an old
// failure. Dead deliveries trip no dead_per_hour.
func TestNotifierFailing(t *testing.T) {
	now := time.Unix(29_000_000*60+30, 0)
	minute := driver.DueMinute(now)
	snap := &estimator.Snapshot{At: now, Workers: map[string]int{},
		Counts: []driver.CountRow{
			{Queue: Queue, Type: NotifyType("hook"), Kind: "dead", N: 5},
			{Queue: Queue, Type: NotifyType("pager"), Kind: driver.KindRetrying, Due: minute + 1, N: 1},
			{Queue: Queue, Type: NotifyType("slow"), Kind: driver.KindRetrying, Due: minute + 1, N: 1},
			{Queue: Queue, Type: NotifyType("old"), Kind: "dead", N: 2},
		},
		Minutes: []driver.MinuteRow{
			{Minute: minute - 5, Queue: Queue, Type: NotifyType("hook"), Ended: 250, Failed: 250, Dead: 5},
			{Minute: minute - 2, Queue: Queue, Type: NotifyType("pager"), Ended: 3, Failed: 3},
			{Minute: minute - 2, Queue: Queue, Type: NotifyType("slow"), Ended: 2, Failed: 2},
			{Minute: minute - 2, Queue: Queue, Type: NotifyType("chat"), Ended: 6, Failed: 5, Succeeded: 1},
			{Minute: minute - 70, Queue: Queue, Type: NotifyType("old"), Ended: 100, Failed: 100, Dead: 2},
		},
	}
	got := map[string]condition{}
	for _, c := range evaluate(defaults(), snap, 30*time.Second) {
		got[c.key()] = c
	}
	want := []string{"notifier_failing\nnotifier:hook", "notifier_failing\nnotifier:pager"}
	keys := slices.Sorted(maps.Keys(got))
	if !slices.Equal(keys, want) {
		t.Fatalf("conditions\n got %q\nwant %q", keys, want)
	}
	if c := got["notifier_failing\nnotifier:hook"]; c.values["dead"] != int64(5) || !strings.Contains(c.message, "given up") ||
		!strings.Contains(c.hint, "keel.notify.hook") {
		t.Errorf("hook: %+v", c)
	}
	if c := got["notifier_failing\nnotifier:pager"]; c.values["failed"] != int64(3) || c.values["retrying"] != int64(1) {
		t.Errorf("pager: %+v", c)
	}
	if !slices.Contains(RuleNames, RuleNotifierFailing) {
		t.Errorf("RuleNames %v lacks %s", RuleNames, RuleNotifierFailing)
	}
	if msg := resolution(&driver.AlertRow{Rule: RuleNotifierFailing, Subject: "notifier:hook"}, defaults(), snap); !strings.Contains(msg, "notifier hook") {
		t.Errorf("resolution %q", msg)
	}
}

// defaults are keel.DefaultAlertRules.
func defaults() Rules {
	return Rules{
		DeadPerHour: 3, OldestReadyAge: 10 * time.Minute,
		FailureRatio: 0.5, FailureMinAttempts: 20, FailureWindow: 5 * time.Minute,
		NoLiveWorker: true, NodeLost: true,
	}
}

// TestBrakeOpen: brake_open fires for each type whose brake is open or
// half open in the snapshot, whatever the other rules say.
func TestBrakeOpen(t *testing.T) {
	now := time.Unix(29_000_000*60, 0)
	snap := &estimator.Snapshot{At: now, Braked: map[string]driver.BrakeRow{
		"sms":   {Type: "sms", State: driver.BrakeHalfOpen, Ratio: 0.9, Attempts: 20, Reason: "probing"},
		"email": {Type: "email", State: driver.BrakeOpen, Ratio: 1, Attempts: 20, Reason: "20 of 20 failed"},
	}}
	cs := evaluate(Rules{DeadPerHour: -1}, snap, 30*time.Second)
	if len(cs) != 2 || cs[0].key() != "brake_open\ntype:email" || cs[1].key() != "brake_open\ntype:sms" {
		t.Fatalf("conditions %+v", cs)
	}
	if c := cs[1]; !strings.Contains(c.message, "is half open: probing") || c.values["state"] != "half_open" ||
		!strings.Contains(c.hint, "keel brake close sms") {
		t.Errorf("sms: %+v", c)
	}
	if msg := resolution(&driver.AlertRow{Rule: RuleBrakeOpen, Subject: "type:email"}, defaults(), snap); !strings.Contains(msg, "brake of type email closed") {
		t.Errorf("resolution %q", msg)
	}
}
