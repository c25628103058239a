package metrics

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// TestGauges checks how Stats become the cluster-wide gauges: every view
// of a queue whose Views are counted, one read per StatsInterval, and a
// failed read leaving the gauges out (logged once) without failing the
// scrape. The scripted run checks them against real databases.
func TestGauges(t *testing.T) {
	var logs bytes.Buffer
	m, err := New(Options{StatsInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reads, fail := 0, false
	m.stats = func(context.Context) (*keel.Stats, error) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		if fail {
			return nil, errors.New("database away")
		}
		return &keel.Stats{Queues: []keel.QueueStats{
			{Name: "mail", Views: map[keel.View]int64{keel.ViewReady: 7, keel.ViewDead: 2}, OldestReadyAge: 90 * time.Second},
			{Name: "uncounted"},
		}, Firing: map[string]int{keel.RuleDeadPerHour: 2, keel.RuleBrakeOpen: 1}, SequencesBlocked: 3,
			Keel: keel.KeelStats{QueueStats: keel.QueueStats{Name: keel.ReservedQueue, Views: map[keel.View]int64{keel.ViewRetrying: 1, keel.ViewDead: 4}}}}, nil
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	want := `
# HELP keel_alerts_firing Alerts firing now, by rule, cluster-wide (GET /v1/alerts lists them), read from the database at scrape time.
# TYPE keel_alerts_firing gauge
keel_alerts_firing{rule="brake_open"} 1
keel_alerts_firing{rule="dead_per_hour"} 2
keel_alerts_firing{rule="failure_ratio"} 0
keel_alerts_firing{rule="no_live_worker"} 0
keel_alerts_firing{rule="node_lost"} 0
keel_alerts_firing{rule="notifier_failing"} 0
keel_alerts_firing{rule="oldest_ready_age"} 0
keel_alerts_firing{rule="sequence_blocked"} 0
# HELP keel_internal_tasks keel's own tasks (queue keel) by state, cluster-wide, read from the database at scrape time; keel_tasks leaves them out.
# TYPE keel_internal_tasks gauge
keel_internal_tasks{state="dead"} 4
keel_internal_tasks{state="ready"} 0
keel_internal_tasks{state="retrying"} 1
keel_internal_tasks{state="running"} 0
keel_internal_tasks{state="scheduled"} 0
# HELP keel_oldest_ready_age_seconds How long the oldest ready task of the queue has waited, cluster-wide, read from the database at scrape time (0: none ready).
# TYPE keel_oldest_ready_age_seconds gauge
keel_oldest_ready_age_seconds{queue="mail"} 90
# HELP keel_sequences_blocked Sequence keys held by a dead member (GET /v1/sequences lists them; at most 1000), read from the database at scrape time.
# TYPE keel_sequences_blocked gauge
keel_sequences_blocked 3
# HELP keel_tasks Tasks by queue and state, cluster-wide (every process on the database), read from the database at scrape time.
# TYPE keel_tasks gauge
keel_tasks{queue="mail",state="dead"} 2
keel_tasks{queue="mail",state="ready"} 7
keel_tasks{queue="mail",state="retrying"} 0
keel_tasks{queue="mail",state="running"} 0
keel_tasks{queue="mail",state="scheduled"} 0
`
	for range 2 {
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "keel_tasks", "keel_oldest_ready_age_seconds", "keel_alerts_firing", "keel_internal_tasks", "keel_sequences_blocked"); err != nil {
			t.Fatal(err)
		}
	}
	if reads != 1 {
		t.Fatalf("%d Stats reads for two scrapes within StatsInterval, want 1", reads)
	}

	m.opts.StatsInterval = time.Nanosecond
	fail = true
	for range 3 {
		if n, err := testutil.GatherAndCount(reg, "keel_tasks", "keel_oldest_ready_age_seconds"); err != nil || n != 0 {
			t.Fatalf("scrape with a failing Stats: %d gauges, %v", n, err)
		}
	}
	if n := strings.Count(logs.String(), "reading the task gauges failed"); n != 1 {
		t.Fatalf("failed reads logged %d times, want once a minute:\n%s", n, logs.String())
	}
	if _, err := New(Options{StatsInterval: -time.Second}); err == nil || !strings.Contains(err.Error(), "StatsInterval") {
		t.Fatalf("negative StatsInterval: %v", err)
	}
	if err := m.Watch(nil); err == nil {
		t.Fatal("Watch(nil) accepted")
	}
}

// TestPoolMetrics: the pool's figures become the keel_db_ metrics, read at
// each scrape.
func TestPoolMetrics(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	if n, err := testutil.GatherAndCount(reg, "keel_db_connections"); err != nil || n != 0 {
		t.Fatalf("no client watched: %d pool metrics, %v", n, err)
	}
	m.pool = func() driver.PoolStats {
		return driver.PoolStats{InUse: 3, Idle: 1, Max: 10, WaitCount: 7, WaitDuration: 1500 * time.Millisecond}
	}
	want := `
# HELP keel_db_connections Connections of this process's pool to the database, in use or idle.
# TYPE keel_db_connections gauge
keel_db_connections{state="idle"} 1
keel_db_connections{state="in_use"} 3
# HELP keel_db_connections_max The limit of this process's connection pool.
# TYPE keel_db_connections_max gauge
keel_db_connections_max 10
# HELP keel_db_wait_seconds_total Time callers in this process waited for a connection of its pool.
# TYPE keel_db_wait_seconds_total counter
keel_db_wait_seconds_total 1.5
# HELP keel_db_waits_total Times a caller in this process waited for a connection of its pool.
# TYPE keel_db_waits_total counter
keel_db_waits_total 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "keel_db_connections", "keel_db_connections_max",
		"keel_db_wait_seconds_total", "keel_db_waits_total"); err != nil {
		t.Fatal(err)
	}
}
