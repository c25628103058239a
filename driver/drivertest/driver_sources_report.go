package drivertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// Broker sources' reports (driver.SourceStore): one row per source and
// node, every field replaced by the next report, listed in byte order.

func testSourcesReport(t *testing.T, e *env) {
	s := e.sourceStore()
	r := driver.SourceReport{
		Source: "orders", Node: "n1", Kind: "rabbitmq", Type: "dt.order", State: "connecting",
		LastError: "dial tcp: connection refused «x»", Accepted: 1, Duplicate: 2, Rejected: 3, Nacked: 4,
		AckP50: 1500 * time.Microsecond, AckP99: 2 * time.Second, StartedAt: start, Now: start.Add(time.Second),
	}
	if err := s.ReportSource(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	r2 := r
	r2.Kind, r2.Type, r2.State, r2.LastError = "nats", "dt.other", "running", ""
	r2.Accepted, r2.Duplicate, r2.Rejected, r2.Nacked = 1000, 20, 30, 0
	r2.AckP50, r2.AckP99 = 3*time.Millisecond+4*time.Microsecond, 0
	r2.StartedAt, r2.Now = start.Add(time.Minute), start.Add(2*time.Minute+5*time.Microsecond)
	if err := s.ReportSource(e.ctx, r2); err != nil {
		t.Fatal(err)
	}
	rows, err := s.ListSources(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("%d rows after two reports of one source and node, want 1", len(rows))
	}
	got := rows[0]
	if got.SourceReport.Source != r2.Source || got.Node != r2.Node || got.Kind != r2.Kind || got.Type != r2.Type ||
		got.State != r2.State || got.LastError != r2.LastError || got.Accepted != r2.Accepted ||
		got.Duplicate != r2.Duplicate || got.Rejected != r2.Rejected || got.Nacked != r2.Nacked ||
		got.AckP50 != r2.AckP50 || got.AckP99 != r2.AckP99 || !got.StartedAt.Equal(r2.StartedAt) ||
		!got.UpdatedAt.Equal(r2.Now) {
		t.Fatalf("stored report %+v\nwant the second report %+v, updated at its now", got, r2)
	}
	if got.UpdatedAt.Location() != time.UTC || got.StartedAt.Location() != time.UTC {
		t.Fatalf("times %v, %v: want UTC", got.StartedAt, got.UpdatedAt)
	}
}

func testSourcesListOrder(t *testing.T, e *env) {
	s := e.sourceStore()
	// Byte order, not a locale's: upper case first, a trailing space is
	// its own name.
	keys := [][2]string{{"orders", "n2"}, {"b", "n1"}, {"orders", "n1"}, {"Zeta", "n1"}, {"orders ", "n1"}, {"orders", "N3"}}
	for i, k := range keys {
		err := s.ReportSource(e.ctx, driver.SourceReport{Source: k[0], Node: k[1], Kind: "nats", Type: "t", State: "running",
			Accepted: int64(i), StartedAt: start, Now: start})
		if err != nil {
			t.Fatal(err)
		}
	}
	rows, err := s.ListSources(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%q/%q=%d", r.SourceReport.Source, r.Node, r.Accepted))
	}
	want := []string{`"Zeta"/"n1"=3`, `"b"/"n1"=1`, `"orders"/"N3"=5`, `"orders"/"n1"=2`, `"orders"/"n2"=0`, `"orders "/"n1"=4`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("sources\n got %v\nwant %v", got, want)
	}
	bad := []func(r *driver.SourceReport){
		func(r *driver.SourceReport) { r.Node = "" },
		func(r *driver.SourceReport) { r.State = strings.Repeat("s", 17) },
		func(r *driver.SourceReport) { r.Nacked = -1 },
		func(r *driver.SourceReport) { r.AckP99 = -time.Second },
		func(r *driver.SourceReport) { r.LastError = "bad \xff" },
		func(r *driver.SourceReport) { r.LastError = strings.Repeat("e", driver.MaxSourceError+1) },
		func(r *driver.SourceReport) { r.Now = time.Time{} },
	}
	for i, mod := range bad {
		r := driver.SourceReport{Source: "b", Node: "n1", Kind: "nats", Type: "t", State: "stopped", Accepted: 99, StartedAt: start, Now: start}
		mod(&r)
		if err := s.ReportSource(e.ctx, r); err == nil {
			t.Fatalf("bad report %d: no error", i)
		}
	}
	if rows, err := s.ListSources(e.ctx); err != nil || len(rows) != len(keys) || rows[1].Accepted != 1 || rows[1].State != "running" {
		t.Fatalf("after bad reports: %+v, %v; want them unchanged", rows, err)
	}
}

// testSourcesReportPruned: PruneNodes drops the reports of a source whose
// process died (not refreshed within OlderThan, on a node without a
// heartbeat within it either) and keeps the rest: a fresh report, and an
// old one of a node still alive (a source stopped on a running node).
func testSourcesReportPruned(t *testing.T, e *env) {
	s := e.sourceStore()
	t0 := e.clock.Now().UTC().Truncate(time.Microsecond)
	e.registerNode(driver.NodeParams{Name: "alive", Host: "h", PID: 1, StartedAt: t0, Now: t0.Add(10 * time.Second)})
	e.registerNode(driver.NodeParams{Name: "dying", Host: "h", PID: 2, StartedAt: t0, Now: t0})
	reports := map[string]time.Time{
		"gone":  t0,                      // no node, old: pruned
		"dying": t0.Add(time.Second),     // its node stale too: pruned with it
		"alive": t0,                      // old, but its node is alive: kept
		"edge":  t0.Add(5 * time.Second), // exactly at the cutoff: kept
		"fresh": t0.Add(11 * time.Second),
	}
	for node, at := range reports {
		if err := s.ReportSource(e.ctx, driver.SourceReport{Source: "orders", Node: node, Kind: "nats", Type: "t",
			State: "stopped", StartedAt: t0, Now: at}); err != nil {
			t.Fatal(err)
		}
	}
	// The cutoff is t0+5s: strictly older reports and heartbeats are stale.
	n, err := e.drv.PruneNodes(e.ctx, driver.PruneNodesParams{Now: t0.Add(12 * time.Second), OlderThan: 7 * time.Second})
	if err != nil {
		t.Fatalf("prune nodes: %v", err)
	}
	if n != 1 {
		t.Fatalf("pruned %d nodes, want 1 (dying)", n)
	}
	rows, err := s.ListSources(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Node)
	}
	if want := []string{"alive", "edge", "fresh"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("reports left on nodes %v, want %v", got, want)
	}
}
