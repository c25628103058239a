package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/keelq/keel"
	"github.com/keelq/keel/batch"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/internal/testdb"
	"github.com/keelq/keel/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openDriver opens a fresh database of kind db, closed when the test ends.
func openDriver(t *testing.T, db string) driver.Driver {
	t.Helper()
	ctx := context.Background()
	var d driver.Driver
	var err error
	switch db {
	case "sqlite":
		d, err = sqlite.Open(ctx, testdb.SQLiteFile(t), sqlite.Options{})
	case "postgres":
		d, err = postgres.Open(ctx, testdb.PostgresDSN(), postgres.Options{Schema: testdb.PostgresSchema(t, "keel_metrics")})
	case "mysql":
		_, dsn := testdb.MySQLDatabase(t, "keel_metrics")
		d, err = mysql.Open(ctx, dsn, mysql.Options{})
	default:
		t.Fatalf("unknown database %q", db)
	}
	if err != nil {
		t.Fatalf("open %s: %v", db, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// The scripted run: N tasks succeed, M fail once then succeed, K go dead
// (Permanent), H enqueues are duplicates, one task is cancelled and one
// is claimed by a worker that vanishes on its only attempt (rescued dead).
const (
	nOK, mFlaky, kDead, hDup = 5, 3, 2, 4
)

func TestScriptedRunCounts(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres", "mysql"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			scriptedRun(t, db)
		})
	}
}

func scriptedRun(t *testing.T, db string) {
	ctx := context.Background()
	drv := openDriver(t, db)
	h := keel.NewHandlers()
	keel.Handle(h, "t.ok", func(ctx context.Context, task *keel.Task[struct{}]) error { return nil })
	keel.Handle(h, "t.flaky", func(ctx context.Context, task *keel.Task[struct{}]) error {
		if task.Attempt == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}, keel.Backoff(time.Millisecond, time.Millisecond))
	keel.Handle(h, "t.dead", func(ctx context.Context, task *keel.Task[struct{}]) error {
		return keel.Permanent(errors.New("never"))
	})
	keel.Handle(h, "t.lost", func(ctx context.Context, task *keel.Task[struct{}]) error { return nil }, keel.MaxAttempts(1))
	c, err := keel.NewClient(keel.Config{
		Driver: drv, Handlers: h, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
		PollInterval: 20 * time.Millisecond, RescueInterval: 50 * time.Millisecond, BackoffJitter: -1,
		LeaseTTL: time.Second, HeartbeatInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := metrics.New(metrics.Options{StatsInterval: time.Millisecond}) // the gauges read anew after the run
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Watch(c); err != nil {
		t.Fatal(err)
	}
	if err := m.Watch(c); err == nil {
		t.Fatal("a second Watch was accepted")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	// Before any event, each of the client's types and queues has its
	// series at 0: 4 types, 7 outcomes, 3 finished states.
	for name, n := range map[string]int{"keel_attempts_total": 4 * 7, "keel_tasks_finished_total": 4 * 3,
		"keel_tasks_enqueued_total": 4, "keel_attempts_per_task": 4, "keel_leases_rescued_total": 1,
		"keel_pickup_latency_seconds": 1} {
		if got := len(gather(t, reg)[name].GetMetric()); got != n {
			t.Errorf("%s has %d series before any event, want %d", name, got, n)
		}
	}

	enqueue := func(typ, key string, opts ...keel.Option) *keel.TaskInfo {
		t.Helper()
		info, err := c.Enqueue(ctx, typ, nil, append(opts, keel.UniqueBy(key))...)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	for i := range nOK {
		enqueue("t.ok", fmt.Sprint("ok", i))
	}
	for i := range mFlaky {
		enqueue("t.flaky", fmt.Sprint("flaky", i))
	}
	for i := range kDead {
		enqueue("t.dead", fmt.Sprint("dead", i))
	}
	for i := range hDup {
		if info := enqueue("t.ok", fmt.Sprint("ok", i)); !info.Duplicate {
			t.Fatalf("enqueue %d was not a duplicate", i)
		}
	}
	later := enqueue("t.ok", "cancelled", keel.Delay(time.Hour))
	if _, err := c.Cancel(ctx, later.ID); err != nil {
		t.Fatal(err)
	}
	// A worker that claims t.lost and vanishes: its lease expires on the
	// task's only attempt and the rescuer dead-letters it.
	enqueue("t.lost", "lost")
	now := time.Now()
	if got, err := drv.Claim(ctx, driver.ClaimParams{Queue: keel.DefaultQueue, Limit: 1, Owner: "ghost", Now: now,
		LeaseExpiresAt: now.Add(10 * time.Millisecond), Types: []string{"t.lost"}}); err != nil || len(got) != 1 {
		t.Fatalf("ghost claim: %d tasks, %v", len(got), err)
	}

	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		counts, err := c.Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		q := counts[keel.DefaultQueue]
		if q[keel.StateSucceeded] == nOK+mFlaky && q[keel.StateDead] == kDead+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks did not finish: %v", q)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c.Stop(stopCtx) // every outcome observed

	g := gather(t, reg)
	g.counters(t, "keel_tasks_enqueued_total", map[string]float64{
		"queue=default,type=t.ok": nOK + 1, "queue=default,type=t.flaky": mFlaky, "queue=default,type=t.dead": kDead,
		"queue=default,type=t.lost": 1,
	})
	g.counters(t, "keel_idempotency_hits_total", map[string]float64{"queue=default,type=t.ok": hDup})
	g.counters(t, "keel_attempts_total", map[string]float64{
		"outcome=succeeded,queue=default,type=t.ok":       nOK,
		"outcome=error,queue=default,type=t.flaky":        mFlaky,
		"outcome=succeeded,queue=default,type=t.flaky":    mFlaky,
		"outcome=permanent,queue=default,type=t.dead":     kDead,
		"outcome=lease_expired,queue=default,type=t.lost": 1,
	})
	g.counters(t, "keel_tasks_finished_total", map[string]float64{
		"queue=default,state=succeeded,type=t.ok":    nOK,
		"queue=default,state=succeeded,type=t.flaky": mFlaky,
		"queue=default,state=dead,type=t.dead":       kDead,
		"queue=default,state=dead,type=t.lost":       1,
		"queue=default,state=cancelled,type=t.ok":    1,
	})
	g.counters(t, "keel_leases_rescued_total", map[string]float64{"queue=default": 1})
	for _, name := range []string{"keel_http_target_requests_total", "keel_http_target_duration_seconds", "keel_api_requests_total"} {
		g.counters(t, name, map[string]float64{})
	}
	g.histogramCounts(t, "keel_attempt_duration_seconds", map[string]uint64{
		"queue=default,type=t.ok": nOK, "queue=default,type=t.flaky": 2 * mFlaky, "queue=default,type=t.dead": kDead,
	})
	// Each stored outcome's time from the handler's return to its commit
	//: here a few milliseconds on an idle SQLite file,
	// never seconds.
	g.histogramCounts(t, "keel_outcome_commit_seconds", map[string]uint64{"queue=default": nOK + 2*mFlaky + kDead})
	if hist := g.histogram(t, "keel_outcome_commit_seconds", "queue=default"); hist.GetSampleSum() <= 0 ||
		hist.GetSampleSum() > float64(nOK+2*mFlaky+kDead) {
		t.Errorf("keel_outcome_commit_seconds sum %vs over %d outcomes, want more than 0 and under 1s each",
			hist.GetSampleSum(), hist.GetSampleCount())
	}
	// The ghost's claim is not this process's: no pickup observed for it.
	g.histogramCounts(t, "keel_pickup_latency_seconds", map[string]uint64{"queue=default": nOK + 2*mFlaky + kDead})
	g.histogramCounts(t, "keel_attempts_per_task", map[string]uint64{
		"type=t.ok": nOK, "type=t.flaky": mFlaky, "type=t.dead": kDead, "type=t.lost": 1,
	})
	// The retry distribution: t.ok and t.dead at 1 attempt, t.flaky at 2.
	for typ, want := range map[string]map[float64]uint64{
		"t.ok":    {1: nOK, 2: nOK, 3: nOK},
		"t.flaky": {1: 0, 2: mFlaky, 3: mFlaky},
		"t.dead":  {1: kDead, 2: kDead},
	} {
		hist := g.histogram(t, "keel_attempts_per_task", "type="+typ)
		for le, n := range want {
			if got := bucket(hist, le); got != n {
				t.Errorf("keel_attempts_per_task{type=%s} bucket le=%v: %d, want %d", typ, le, got, n)
			}
		}
	}
	if hist := g.histogram(t, "keel_attempts_per_task", "type=t.flaky"); hist.GetSampleSum() != 2*mFlaky {
		t.Errorf("keel_attempts_per_task{type=t.flaky} sum %v, want %d", hist.GetSampleSum(), 2*mFlaky)
	}

	// The cluster-wide gauges come from the live counters through Stats:
	// every view of the queue is there.
	g.counters(t, "keel_tasks", map[string]float64{
		"queue=default,state=ready": 0, "queue=default,state=scheduled": 0, "queue=default,state=retrying": 0,
		"queue=default,state=running": 0, "queue=default,state=dead": kDead + 1,
	})
	g.counters(t, "keel_oldest_ready_age_seconds", map[string]float64{"queue=default": 0})
}

// gathered is one scrape of a registry, by metric name.
type gathered map[string]*dto.MetricFamily

func gather(t *testing.T, reg *prometheus.Registry) gathered {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	g := gathered{}
	for _, mf := range mfs {
		g[mf.GetName()] = mf
	}
	return g
}

// labelKey is a series' labels as "k=v,k=v", sorted by name.
func labelKey(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// counters checks that the counter or gauge name has exactly the series
// of want, with their values; counters at 0 that want lacks (there from
// the start for the client's queues and types) are left out.
func (g gathered) counters(t *testing.T, name string, want map[string]float64) {
	t.Helper()
	got := map[string]float64{}
	for _, m := range g[name].GetMetric() {
		switch {
		case m.Counter != nil:
			if _, ok := want[labelKey(m)]; !ok && m.GetCounter().GetValue() == 0 {
				continue
			}
			got[labelKey(m)] = m.GetCounter().GetValue()
		case m.Gauge != nil:
			got[labelKey(m)] = m.GetGauge().GetValue()
		default:
			got[labelKey(m)] = float64(m.GetHistogram().GetSampleCount())
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got %v\nwant %v", name, got, want)
	}
}

// histogramCounts checks that the histogram name has exactly the series
// of want, with their observation counts; series without observations
// that want lacks are left out.
func (g gathered) histogramCounts(t *testing.T, name string, want map[string]uint64) {
	t.Helper()
	got := map[string]uint64{}
	for _, m := range g[name].GetMetric() {
		if _, ok := want[labelKey(m)]; !ok && m.GetHistogram().GetSampleCount() == 0 {
			continue
		}
		got[labelKey(m)] = m.GetHistogram().GetSampleCount()
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s observations:\n got %v\nwant %v", name, got, want)
	}
}

func (g gathered) histogram(t *testing.T, name, labels string) *dto.Histogram {
	t.Helper()
	i := slices.IndexFunc(g[name].GetMetric(), func(m *dto.Metric) bool { return labelKey(m) == labels })
	if i < 0 {
		t.Fatalf("%s{%s}: no such series", name, labels)
	}
	return g[name].GetMetric()[i].GetHistogram()
}

// bucket is the cumulative count of observations ≤ le.
func bucket(h *dto.Histogram, le float64) uint64 {
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	return 1 << 63 // no such bucket: never the expected value
}

// TestArchivalCounts: what the leader archives and deletes is counted in
// keel_archived_total and keel_archive_deleted_total. The client's clock
// jumps two hours ahead after the tasks finished (SQLite stamps the
// caller's clock), so they are past a one-hour retention.
func TestArchivalCounts(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	h := keel.NewHandlers()
	keel.Handle(h, "t", func(ctx context.Context, task *keel.Task[map[string]int]) error { return nil })
	c, err := keel.NewClient(keel.Config{
		Driver: openDriver(t, "sqlite"), Handlers: h, Logger: slog.New(slog.DiscardHandler),
		Now:             func() time.Time { return time.Now().Add(time.Duration(offset.Load())) },
		RetainSucceeded: time.Hour, DeleteArchivedAfter: time.Hour, ArchiveInterval: 10 * time.Millisecond, ArchiveBatch: 2,
		PollInterval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := metrics.New(metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Watch(c); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(ctx) //nolint:errcheck // nothing to report
	gather(t, reg).counters(t, "keel_archived_total", map[string]float64{"state=cancelled": 0, "state=dead": 0, "state=succeeded": 0})
	var ids []int64
	for range 3 {
		info, err := c.Enqueue(ctx, "t", map[string]int{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	waitUntil(t, "tasks succeeded", func() bool {
		for _, id := range ids {
			if info, err := c.Get(ctx, id); err != nil || info.State != keel.StateSucceeded {
				return false
			}
		}
		return true
	})
	offset.Store(int64(2 * time.Hour))
	waitUntil(t, "tasks archived", func() bool { return c.Archived().Succeeded == 3 })
	g := gather(t, reg)
	g.counters(t, "keel_archived_total", map[string]float64{"state=cancelled": 0, "state=dead": 0, "state=succeeded": 3})
	g.counters(t, "keel_archive_deleted_total", map[string]float64{"": 0})
	offset.Store(int64(4 * time.Hour))
	waitUntil(t, "archived tasks deleted", func() bool { return c.Archived().Deleted == 3 })
	gather(t, reg).counters(t, "keel_archive_deleted_total", map[string]float64{"": 3})
}

// waitUntil polls cond until it holds, failing the test after 15 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestScheduleTasksCounted: keel_schedule_tasks_total counts the tasks a
// schedule's ticks and triggers enqueued, by schedule.
func TestScheduleTasksCounted(t *testing.T) {
	drv := openDriver(t, "sqlite")
	h := keel.NewHandlers()
	keel.Handle(h, "t.ok", func(ctx context.Context, task *keel.Task[struct{}]) error { return nil })
	c, err := keel.NewClient(keel.Config{
		Driver: drv, Handlers: h, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), PollInterval: 20 * time.Millisecond,
		Schedules: []keel.Schedule{
			{Name: "often", Spec: "@every 1s", Type: "t.ok"},
			{Name: "yearly", Spec: "0 0 1 1 *", Type: "t.ok"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := metrics.New(metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Watch(c); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	if _, err := c.TriggerSchedule(t.Context(), "yearly"); err != nil {
		t.Fatal(err)
	}
	value := func(labels string) float64 {
		for _, s := range gather(t, reg)["keel_schedule_tasks_total"].GetMetric() {
			if labelKey(s) == labels {
				return s.GetCounter().GetValue()
			}
		}
		return 0
	}
	for deadline := time.Now().Add(30 * time.Second); value("schedule=often") < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("keel_schedule_tasks_total{schedule=often} = %v after 30s, want 2 ticks", value("schedule=often"))
		}
	}
	if got := value("schedule=yearly"); got != 1 {
		t.Fatalf("keel_schedule_tasks_total{schedule=yearly} = %v, want 1 (the trigger)", got)
	}
}

// TestRedisGateCounts: the Redis gate's decisions are counted in
// keel_redis_gate_total; a client without a gate has no such series.
func TestRedisGateCounts(t *testing.T) {
	t.Parallel()
	testdb.Require(t, testdb.Redis)
	rdb := redis.NewClient(&redis.Options{Addr: testdb.RedisAddr()})
	t.Cleanup(func() { rdb.Close() })
	drv := openDriver(t, "sqlite")
	watch := func(cfg keel.Config) (*keel.Client, *prometheus.Registry) {
		c, err := keel.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m, err := metrics.New(metrics.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Watch(c); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(m)
		return c, reg
	}
	_, plain := watch(keel.Config{Driver: drv, Types: []string{"t"}, Logger: slog.New(slog.DiscardHandler)})
	if _, ok := gather(t, plain)["keel_redis_gate_total"]; ok {
		t.Error("keel_redis_gate_total without a gate")
	}
	c, reg := watch(keel.Config{Driver: drv, Types: []string{"t"}, Logger: slog.New(slog.DiscardHandler),
		RedisGate: &keel.RedisGate{Client: rdb, Prefix: fmt.Sprintf("keeltest:metrics:%d:", time.Now().UnixNano()),
			TTL: time.Minute, Timeout: 5 * time.Second, Wait: 20 * time.Second}})
	for range 3 {
		if _, err := c.Enqueue(t.Context(), "t", map[string]int{"n": 1}, keel.IdempotencyKey("gate-metrics")); err != nil {
			t.Fatal(err)
		}
	}
	gather(t, reg).counters(t, "keel_redis_gate_total",
		map[string]float64{"result=acquired": 1, "result=hit": 2, "result=skipped": 0, "result=fallback": 0})
}

// TestBatchesFinishedCounted: keel_batches_finished_total is there at 0
// from the start for both outcomes and counts the batches the leader
// finished: success when every member succeeded, else failure.
func TestBatchesFinishedCounted(t *testing.T) {
	drv := openDriver(t, "sqlite")
	h := keel.NewHandlers()
	keel.Handle(h, "t.member", func(ctx context.Context, task *keel.Task[struct{ Fail bool }]) error {
		if task.Args.Fail {
			return keel.Permanent(errors.New("on purpose"))
		}
		return nil
	})
	keel.Handle(h, "t.done", func(ctx context.Context, task *keel.Task[batch.Event]) error { return nil })
	c, err := keel.NewClient(keel.Config{Driver: drv, Handlers: h, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
		PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m, err := metrics.New(metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Watch(c); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	value := func(labels string) (float64, bool) {
		for _, s := range gather(t, reg)["keel_batches_finished_total"].GetMetric() {
			if labelKey(s) == labels {
				return s.GetCounter().GetValue(), true
			}
		}
		return 0, false
	}
	for _, l := range []string{"outcome=success", "outcome=failure"} {
		if v, ok := value(l); !ok || v != 0 {
			t.Fatalf("before any batch keel_batches_finished_total{%s} = %v (present %v), want 0", l, v, ok)
		}
	}
	for _, fail := range []bool{false, false, true} {
		_, _, err := batch.Enqueue(t.Context(), c, batch.Spec{OnFinish: &keel.TaskSpec{Type: "t.done"}, Tasks: []keel.TaskSpec{
			{Type: "t.member", Payload: map[string]bool{"Fail": fail}}, {Type: "t.member"}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s, _ := value("outcome=success")
		f, _ := value("outcome=failure")
		if s == 2 && f == 1 {
			break
		}
		if time.Now().After(deadline) || s > 2 || f > 1 {
			t.Fatalf("keel_batches_finished_total success %v failure %v, want 2 and 1", s, f)
		}
	}
}
