package estimator_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/estimator"
)

var keelWork = estimator.Keel{Queue: "keel", NotifyPrefix: "keel.notify.",
	Task: func(q, typ string) bool { return q == "keel" || strings.HasPrefix(typ, "keel.") }}

// alertStore serves fixed alerts, or fails.
type alertStore struct {
	rows []driver.AlertRow
	err  error
}

func (a alertStore) ListAlerts(_ context.Context, f driver.AlertFilter) ([]driver.AlertRow, error) {
	if !f.Open || f.Limit != 1000 {
		return nil, errors.New("not the firing alerts")
	}
	return a.rows, a.err
}

// TestOverview: users' queues are summed, keel's own queue is kept apart
// with its hits, failures and alert deliveries; the firing alerts are
// counted by rule.
func TestOverview(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 30, 0, time.UTC)
	m := t0.Unix() / 60
	st := &store{
		counts: []driver.CountRow{
			{Queue: "a", Type: "x", Kind: string(driver.StatePending), Due: m, N: 5},
			{Queue: "b", Type: "x", Kind: string(driver.StatePending), Due: m, N: 2},
			{Queue: "b", Type: "y", Kind: string(driver.StateDead), N: 3},
			{Queue: "keel", Type: "keel.notify.slack", Kind: driver.KindRetrying, Due: m + 1, N: 4},
			{Queue: "keel", Type: "keel.notify.slack", Kind: string(driver.StateDead), N: 6},
			{Queue: "keel", Type: "keel.drill", Kind: string(driver.StateDead), N: 100}, // no delivery
		},
		minutes: []driver.MinuteRow{
			{Minute: m, Queue: "a", Type: "x", Dead: 1, Hits: 50, Failed: 50},
			{Minute: m - 1, Queue: "b", Type: "y", Dead: 2},
			{Minute: m, Queue: "keel", Type: "keel.notify.slack", Hits: 7, Failed: 2},
			{Minute: m - 61, Queue: "keel", Type: "keel.notify.slack", Hits: 1000, Failed: 1000}, // over an hour ago
		},
		nodes: []driver.NodeRow{node(t0, 2), node(t0, 1)},
	}
	clk := &clock{t0}
	alerts := alertStore{rows: []driver.AlertRow{{Rule: "dead_per_hour"}, {Rule: "dead_per_hour"}, {Rule: "oldest_ready_age"}}}
	o, err := estimator.ReadOverview(context.Background(), estimator.OverviewParams{
		Snapshots: &estimator.Reader{Store: st, Now: clk.Now}, Alerts: alerts, LiveWindow: 30 * time.Second, Keel: keelWork})
	if err != nil {
		t.Fatal(err)
	}
	if !o.At.Equal(t0) || o.Nodes != 2 || o.Dead != 3 || len(o.Queues) != 2 || o.Queues[0].Name != "a" || o.Queues[1].Name != "b" {
		t.Fatalf("overview %+v", o)
	}
	if want := map[string]int64{"pending": 7, "dead": 3}; !reflect.DeepEqual(o.Counts, want) {
		t.Errorf("counts %v, want %v", o.Counts, want)
	}
	k := o.Keel
	if k.Name != "keel" || k.Counts["dead"] != 106 || k.Hits != 7 || k.Failed != 2 || k.DeliveriesFailing != 4 || k.DeliveriesDead != 6 {
		t.Errorf("keel's figures %+v", k)
	}
	if want := map[string]int{"dead_per_hour": 2, "oldest_ready_age": 1}; !reflect.DeepEqual(o.Firing, want) {
		t.Errorf("firing %v, want %v", o.Firing, want)
	}

	// No alert fires: an empty count, not nil. A failed read is wrapped.
	if o, err := estimator.ReadOverview(context.Background(), estimator.OverviewParams{
		Snapshots: &estimator.Reader{Store: st, Now: clk.Now}, Alerts: alertStore{}, Keel: keelWork}); err != nil || o.Firing == nil || len(o.Firing) != 0 {
		t.Fatalf("no alerts: %+v, %v", o, err)
	}
	down := errors.New("down")
	_, err = estimator.ReadOverview(context.Background(), estimator.OverviewParams{
		Snapshots: &estimator.Reader{Store: st, Now: clk.Now}, Alerts: alertStore{err: down}, Keel: keelWork,
		Wrap: func(_ context.Context, err error) error { return errors.Join(errors.New("unreachable"), err) }})
	if !errors.Is(err, down) || !strings.HasPrefix(err.Error(), "keel: list firing alerts: unreachable") {
		t.Fatalf("failed read: %v", err)
	}
}
