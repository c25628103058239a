// Package metrics exposes a keel client's Prometheus metrics. New returns a
// Collector; Watch makes it observe a client's events
// (keel.Client.Observe). Register it in your own prometheus.Registry, or
// serve Handler; keel serve serves it at GET /metrics.
//
// Counters and histograms count what this process did (Prometheus sums
// them across instances). The gauges keel_tasks and
// keel_oldest_ready_age_seconds are cluster-wide: they are read at scrape
// time from Client.Stats, at most once per Options.StatsInterval.
//
// The metrics, with their labels:
//
//	keel_tasks_enqueued_total          counter    queue, type
//	keel_tasks_finished_total          counter    queue, type, state (succeeded, dead, cancelled)
//	keel_attempts_total                counter    queue, type, outcome (succeeded, error, timeout, panic,
//	                                              permanent, lease_expired, snoozed)
//	keel_idempotency_hits_total        counter    queue, type
//	keel_tasks                         gauge      queue, state (ready, scheduled, retrying, running, dead)
//	keel_oldest_ready_age_seconds      gauge      queue
//	keel_attempt_duration_seconds      histogram  queue, type
//	keel_pickup_latency_seconds        histogram  queue
//	keel_attempts_per_task             histogram  type
//	keel_leases_rescued_total          counter    queue
//	keel_http_target_requests_total    counter    type, code
//	keel_http_target_duration_seconds  histogram  type, code
//	keel_api_requests_total            counter    route, code
//	keel_db_connections                gauge      state (in_use, idle)
//	keel_db_connections_max            gauge
//	keel_db_waits_total                counter
//	keel_db_wait_seconds_total         counter
//	keel_archived_total                counter    state (succeeded, cancelled, dead)
//	keel_archive_deleted_total         counter
//	keel_schedule_tasks_total          counter    schedule
//	keel_batches_finished_total        counter    outcome (success, failure)
//	keel_sequences_blocked             gauge
//	keel_redis_gate_total              counter    result (acquired, hit, skipped, fallback)
//	keel_internal_tasks                gauge      state (as keel_tasks)
//	keel_internal_attempts_total       counter    type, outcome (as keel_attempts_total)
//
// keel's own tasks (queue "keel": alert deliveries, on_dead hooks, the
// drill) count in none of the task families above: they are in the
// keel_internal_ families alone, so that a sum over keel_tasks or
// keel_attempts_total counts users' work only.
//
// Every family is there from the start: Watch makes a series at 0 for
// each queue the client works or its types use, each type it handles or
// declares (on its queue, with every outcome and state) and each
// schedule; the cluster-wide gauges report those queues at 0 until the
// database counts them. package server adds each API route with code
// 500, package server/httptarget each target's type with code "error".
// So a Prometheus rule on increase() sees the first event.
//
// The keel_db_ metrics are this process's connection pool to the
// database, read at scrape time from a driver that reports it
// (driver.PoolStater; all of keel's do). keel_redis_gate_total is
// present only for a client with a Redis gate (keel.Config.RedisGate).
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/known"
)

// Options configures a Collector. The zero value is valid.
type Options struct {
	// StatsInterval is how long one read of Client.Stats answers scrapes
	// for the cluster-wide gauges. Default 1s.
	StatsInterval time.Duration
	// StatsTimeout bounds that read; when it fails, a scrape has no
	// gauges (the counters are still there). Default 5s.
	StatsTimeout time.Duration
	// Logger receives failed gauge reads, at most one a minute. Default
	// slog.Default().
	Logger *slog.Logger
}

// Histogram buckets, in seconds or attempts.
var (
	durationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	pickupBuckets   = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	attemptsBuckets = []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 50, 100, 1000}
	httpBuckets     = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	commitBuckets   = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
)

// views are the states of the keel_tasks gauge, in order.
var views = []keel.View{keel.ViewReady, keel.ViewScheduled, keel.ViewRetrying, keel.ViewRunning, keel.ViewDead}

// Collector holds a client's metrics. It is a prometheus.Collector; its
// methods are safe for concurrent use.
type Collector struct {
	opts Options

	mu sync.Mutex // guards stats, the cached Stats and the log throttle
	// stats reads the cluster-wide gauges: the watched client's Stats.
	stats func(context.Context) (*keel.Stats, error)
	// archived reads the watched client's archival counts.
	archived func() keel.ArchiveTotals
	// gate reads the watched client's Redis gate counters.
	gate      func() keel.RedisGateStats
	cached    *keel.Stats
	cachedAt  time.Time
	failLogAt time.Time
	// pool reads the watched client's connection pool; nil when its
	// driver does not report one.
	pool func() driver.PoolStats
	// queues are the watched client's queues (known.Work), which the
	// cluster-wide gauges report at 0 until the database counts them.
	queues []string

	enqueued        *prometheus.CounterVec
	finished        *prometheus.CounterVec
	attempts        *prometheus.CounterVec
	idempotencyHits *prometheus.CounterVec
	attemptDuration *prometheus.HistogramVec
	commitLatency   *prometheus.HistogramVec
	pickupLatency   *prometheus.HistogramVec
	attemptsPerTask *prometheus.HistogramVec
	leasesRescued   *prometheus.CounterVec
	httpRequests    *prometheus.CounterVec
	httpDuration    *prometheus.HistogramVec
	apiRequests     *prometheus.CounterVec
	scheduleTasks   *prometheus.CounterVec
	batchesFinished *prometheus.CounterVec
	// internalAttempts counts the attempts of keel's own tasks.
	internalAttempts *prometheus.CounterVec
	internalTasks    *prometheus.Desc
	tasksDesc        *prometheus.Desc
	oldestDesc       *prometheus.Desc
	connsDesc        *prometheus.Desc
	connsMaxDesc     *prometheus.Desc
	waitsDesc        *prometheus.Desc
	waitSecondsDesc  *prometheus.Desc
	archivedDesc     *prometheus.Desc
	deletedDesc      *prometheus.Desc
	firingDesc       *prometheus.Desc
	blockedDesc      *prometheus.Desc
	gateDesc         *prometheus.Desc

	handlerOnce sync.Once
	handler     http.Handler
	regOnce     sync.Once
	reg         *prometheus.Registry
}

// New returns a Collector. It counts nothing until Watch gives it a
// client; package server and server/httptarget count HTTP requests in it
// too. It registers nothing: register it in a prometheus.Registerer, or
// serve Handler. It fails on a negative option.
func New(o Options) (*Collector, error) {
	switch {
	case o.StatsInterval < 0:
		return nil, fmt.Errorf("metrics: Options.StatsInterval must not be negative, got %v", o.StatsInterval)
	case o.StatsTimeout < 0:
		return nil, fmt.Errorf("metrics: Options.StatsTimeout must not be negative, got %v", o.StatsTimeout)
	}
	if o.StatsInterval == 0 {
		o.StatsInterval = time.Second
	}
	if o.StatsTimeout == 0 {
		o.StatsTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	}
	return &Collector{
		opts: o,
		enqueued: counter("keel_tasks_enqueued_total",
			"Tasks this process enqueued (inserted; duplicates are keel_idempotency_hits_total).", "queue", "type"),
		finished: counter("keel_tasks_finished_total",
			"Tasks this process finished: succeeded or dead after an attempt it ran or rescued, cancelled by its Cancel.",
			"queue", "type", "state"),
		attempts: counter("keel_attempts_total",
			"Attempts this process ran (or, as the leader, rescued: lease_expired), by outcome.",
			"queue", "type", "outcome"),
		idempotencyHits: counter("keel_idempotency_hits_total",
			"Enqueues in this process that found the task already there (UniqueBy, IdempotencyKey).", "queue", "type"),
		attemptDuration: histogram("keel_attempt_duration_seconds",
			"Run time of the attempts this process ran.", durationBuckets, "queue", "type"),
		commitLatency: histogram("keel_outcome_commit_seconds",
			"Time from a handler's return to its outcome committed in the database (the group commit), for the attempts this process ran; a crash in between runs the task again.",
			commitBuckets, "queue"),
		pickupLatency: histogram("keel_pickup_latency_seconds",
			"Time a task waited ready (from the later of its run time and its creation) before this process started an attempt.",
			pickupBuckets, "queue"),
		attemptsPerTask: histogram("keel_attempts_per_task",
			"Attempts a task used, observed when it succeeded or went dead in this process.", attemptsBuckets, "type"),
		leasesRescued: counter("keel_leases_rescued_total",
			"Tasks whose worker vanished that this process, as the leader, took back after their lease expired.", "queue"),
		httpRequests: counter("keel_http_target_requests_total",
			"Requests this process sent to HTTP targets, by the answer's status code (error: no answer).", "type", "code"),
		httpDuration: histogram("keel_http_target_duration_seconds",
			"Duration of the requests this process sent to HTTP targets, until the whole answer was read.",
			httpBuckets, "type", "code"),
		apiRequests: counter("keel_api_requests_total",
			"HTTP API requests this process answered, by route pattern and status code.", "route", "code"),
		batchesFinished: counter("keel_batches_finished_total",
			"Batches this process finished as the elected leader, enqueuing their callbacks: success when every member succeeded, else failure.",
			"outcome"),
		scheduleTasks: counter("keel_schedule_tasks_total",
			"Tasks this process enqueued for schedules: their ticks, as the elected leader, and triggers.", "schedule"),
		internalAttempts: counter("keel_internal_attempts_total",
			"Attempts of keel's own tasks (queue keel: alert deliveries, on_dead hooks, the drill) this process ran, by outcome; error: a notifier failed.",
			"type", "outcome"),
		internalTasks: prometheus.NewDesc("keel_internal_tasks",
			"keel's own tasks (queue keel) by state, cluster-wide, read from the database at scrape time; keel_tasks leaves them out.",
			[]string{"state"}, nil),
		tasksDesc: prometheus.NewDesc("keel_tasks",
			"Tasks by queue and state, cluster-wide (every process on the database), read from the database at scrape time.",
			[]string{"queue", "state"}, nil),
		oldestDesc: prometheus.NewDesc("keel_oldest_ready_age_seconds",
			"How long the oldest ready task of the queue has waited, cluster-wide, read from the database at scrape time (0: none ready).",
			[]string{"queue"}, nil),
		connsDesc: prometheus.NewDesc("keel_db_connections",
			"Connections of this process's pool to the database, in use or idle.", []string{"state"}, nil),
		connsMaxDesc: prometheus.NewDesc("keel_db_connections_max",
			"The limit of this process's connection pool.", nil, nil),
		waitsDesc: prometheus.NewDesc("keel_db_waits_total",
			"Times a caller in this process waited for a connection of its pool.", nil, nil),
		waitSecondsDesc: prometheus.NewDesc("keel_db_wait_seconds_total",
			"Time callers in this process waited for a connection of its pool.", nil, nil),
		archivedDesc: prometheus.NewDesc("keel_archived_total",
			"Finished tasks this process moved to the archive as the elected leader, after their retention.",
			[]string{"state"}, nil),
		deletedDesc: prometheus.NewDesc("keel_archive_deleted_total",
			"Archived tasks this process deleted as the elected leader (DeleteArchivedAfter, [retention] archive).",
			nil, nil),
		gateDesc: prometheus.NewDesc("keel_redis_gate_total",
			"Keyed single-task enqueues of this process by the Redis first gate's decision: acquired (set the key, inserted), hit (answered from the holder's task without a write), skipped (Redis failed: inserted without the gate), fallback (the holder's task did not appear in time: inserted).",
			[]string{"result"}, nil),
		firingDesc: prometheus.NewDesc("keel_alerts_firing",
			"Alerts firing now, by rule, cluster-wide (GET /v1/alerts lists them), read from the database at scrape time.",
			[]string{"rule"}, nil),
		blockedDesc: prometheus.NewDesc("keel_sequences_blocked",
			"Sequence keys held by a dead member (GET /v1/sequences lists them; at most 1000), read from the database at scrape time.",
			nil, nil),
	}, nil
}

// Watch makes m count c's events from now on (keel.Client.Observe) and
// read the cluster-wide gauges from c.Stats: call it before Start and the
// first Enqueue to count everything. A Collector watches one client; Watch
// fails on a nil client or a second call.
func (m *Collector) Watch(c *keel.Client) error {
	if c == nil {
		return errors.New("metrics: Watch: nil keel.Client")
	}
	m.mu.Lock()
	if m.stats != nil {
		m.mu.Unlock()
		return errors.New("metrics: Watch: this Collector already watches a client")
	}
	m.stats = c.Stats
	if ps, ok := c.Driver().(driver.PoolStater); ok {
		m.pool = ps.PoolStats
	}
	m.archived = c.Archived
	m.gate = c.RedisGateStats
	m.mu.Unlock()
	c.Observe(observer{m}) // calls KnownWork, which takes m.mu
	return nil
}

// vecs are the process-local metrics.
func (m *Collector) vecs() []prometheus.Collector {
	return []prometheus.Collector{m.enqueued, m.finished, m.attempts, m.idempotencyHits, m.attemptDuration, m.commitLatency,
		m.pickupLatency, m.attemptsPerTask, m.leasesRescued, m.httpRequests, m.httpDuration, m.apiRequests, m.scheduleTasks, m.batchesFinished,
		m.internalAttempts}
}

// Describe implements prometheus.Collector.
func (m *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range m.vecs() {
		v.Describe(ch)
	}
	ch <- m.tasksDesc
	ch <- m.internalTasks
	ch <- m.oldestDesc
	ch <- m.connsDesc
	ch <- m.connsMaxDesc
	ch <- m.waitsDesc
	ch <- m.waitSecondsDesc
	ch <- m.archivedDesc
	ch <- m.deletedDesc
	ch <- m.firingDesc
	ch <- m.blockedDesc
	ch <- m.gateDesc
}

// Collect implements prometheus.Collector: the counters and histograms,
// the connection pool's figures, the archival counters (Client.Archived)
// and the gauges read from Client.Stats (cached for StatsInterval; left
// out when the read fails).
func (m *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, v := range m.vecs() {
		v.Collect(ch)
	}
	m.mu.Lock()
	pool, archived, gate, queues := m.pool, m.archived, m.gate, m.queues
	m.mu.Unlock()
	if gate != nil {
		if g := gate(); g.Enabled {
			for _, r := range []struct {
				result string
				n      int64
			}{{"acquired", g.Acquired}, {"hit", g.Hits}, {"skipped", g.Skipped}, {"fallback", g.Fallbacks}} {
				ch <- prometheus.MustNewConstMetric(m.gateDesc, prometheus.CounterValue, float64(r.n), r.result)
			}
		}
	}
	if pool != nil {
		p := pool()
		ch <- prometheus.MustNewConstMetric(m.connsDesc, prometheus.GaugeValue, float64(p.InUse), "in_use")
		ch <- prometheus.MustNewConstMetric(m.connsDesc, prometheus.GaugeValue, float64(p.Idle), "idle")
		ch <- prometheus.MustNewConstMetric(m.connsMaxDesc, prometheus.GaugeValue, float64(p.Max))
		ch <- prometheus.MustNewConstMetric(m.waitsDesc, prometheus.CounterValue, float64(p.WaitCount))
		ch <- prometheus.MustNewConstMetric(m.waitSecondsDesc, prometheus.CounterValue, p.WaitDuration.Seconds())
	}
	if archived != nil {
		a := archived()
		for _, c := range []struct {
			state string
			n     int64
		}{{"succeeded", a.Succeeded}, {"cancelled", a.Cancelled}, {"dead", a.Dead}} {
			ch <- prometheus.MustNewConstMetric(m.archivedDesc, prometheus.CounterValue, float64(c.n), c.state)
		}
		ch <- prometheus.MustNewConstMetric(m.deletedDesc, prometheus.CounterValue, float64(a.Deleted))
	}
	s := m.readStats()
	if s == nil {
		return
	}
	counted := map[string]bool{}
	for _, q := range s.Queues {
		if q.Views == nil {
			continue // not counted by this database yet
		}
		counted[q.Name] = true
		for _, v := range views {
			ch <- prometheus.MustNewConstMetric(m.tasksDesc, prometheus.GaugeValue, float64(q.Views[v]), q.Name, string(v))
		}
		ch <- prometheus.MustNewConstMetric(m.oldestDesc, prometheus.GaugeValue, q.OldestReadyAge.Seconds(), q.Name)
	}
	for _, v := range views {
		ch <- prometheus.MustNewConstMetric(m.internalTasks, prometheus.GaugeValue, float64(s.Keel.Views[v]), string(v))
	}
	for _, q := range queues { // the client's queues without a task yet: 0
		if counted[q] || keel.IsKeelTask(q, "") {
			continue
		}
		for _, v := range views {
			ch <- prometheus.MustNewConstMetric(m.tasksDesc, prometheus.GaugeValue, 0, q, string(v))
		}
		ch <- prometheus.MustNewConstMetric(m.oldestDesc, prometheus.GaugeValue, 0, q)
	}
	for _, rule := range keel.AlertRuleNames() {
		ch <- prometheus.MustNewConstMetric(m.firingDesc, prometheus.GaugeValue, float64(s.Firing[rule]), rule)
	}
	ch <- prometheus.MustNewConstMetric(m.blockedDesc, prometheus.GaugeValue, float64(s.SequencesBlocked))
}

// readStats returns the cached Stats, read again when older than
// StatsInterval; nil when the read fails (logged at most once a minute).
func (m *Collector) readStats() *keel.Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stats == nil {
		return nil // no client watched
	}
	now := time.Now()
	if m.cached != nil && now.Sub(m.cachedAt) < m.opts.StatsInterval {
		return m.cached
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.StatsTimeout)
	defer cancel()
	s, err := m.stats(ctx)
	if err != nil {
		m.cached = nil
		if m.failLogAt.IsZero() || now.Sub(m.failLogAt) >= time.Minute {
			m.failLogAt = now
			m.opts.Logger.Warn("keel metrics: reading the task gauges failed; scrapes leave them out (logged at most once a minute)",
				"error", err)
		}
		return nil
	}
	m.cached, m.cachedAt = s, now
	return s
}

// Handler serves the metrics in the Prometheus text format: this
// Collector's, with Go runtime and process metrics, from a registry of
// its own. keel serve answers GET /metrics with it.
func (m *Collector) Handler() http.Handler {
	m.handlerOnce.Do(func() {
		m.handler = promhttp.HandlerFor(m.registry(), promhttp.HandlerOpts{
			ErrorLog: slog.NewLogLogger(m.opts.Logger.Handler(), slog.LevelWarn),
		})
	})
	return m.handler
}

// Registerer is the registry Handler serves: a collector registered in
// it (such as a broker source's, package keel/source) is served with the
// rest.
func (m *Collector) Registerer() prometheus.Registerer { return m.registry() }

// registry is Handler's registry: this Collector's metrics with Go
// runtime and process metrics, made once.
func (m *Collector) registry() *prometheus.Registry {
	m.regOnce.Do(func() {
		m.reg = prometheus.NewRegistry()
		m.reg.MustRegister(m, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	})
	return m.reg
}

// APIRequest counts one answered HTTP API request: route is the route's
// pattern (such as "GET /v1/tasks/{id}"), never the raw path, so that the
// label's values stay few. package server calls it.
func (m *Collector) APIRequest(route string, code int) {
	m.apiRequests.WithLabelValues(route, strconv.Itoa(code)).Inc()
}

// APIRoute makes the keel_api_requests_total series of route with code
// 500 at 0, so that it exists before the first server error. package
// server calls it for each of its routes.
func (m *Collector) APIRoute(route string) {
	m.apiRequests.WithLabelValues(route, strconv.Itoa(http.StatusInternalServerError))
}

// HTTPTarget makes the keel_http_target_ series of taskType with code
// "error" (no answer) at 0, so that they exist before the first failed
// request. package server/httptarget calls it for each target it
// registers.
func (m *Collector) HTTPTarget(taskType string) {
	m.httpRequests.WithLabelValues(taskType, "error")
	m.httpDuration.WithLabelValues(taskType, "error")
}

// HTTPTargetRequest counts one request to an HTTP target of taskType and
// its duration: code is the answer's status code, or 0 when no answer
// came (counted as code "error"). package server/httptarget calls it.
func (m *Collector) HTTPTargetRequest(taskType string, code int, d time.Duration) {
	label := "error"
	if code > 0 {
		label = strconv.Itoa(code)
	}
	m.httpRequests.WithLabelValues(taskType, label).Inc()
	m.httpDuration.WithLabelValues(taskType, label).Observe(d.Seconds())
}

// observer turns a client's events into metrics.
type observer struct{ m *Collector }

// outcomes are the attempt outcomes keel_attempts_total counts.
var outcomes = []keel.Outcome{keel.OutcomeSucceeded, keel.OutcomeError, keel.OutcomeTimeout, keel.OutcomePanic,
	keel.OutcomePermanent, keel.OutcomeLeaseExpired, keel.OutcomeSnoozed}

// finishedStates are the states keel_tasks_finished_total counts.
var finishedStates = []keel.State{keel.StateSucceeded, keel.StateDead, keel.StateCancelled}

// KnownWork makes a child at 0 of every process-local family for each
// queue, type and schedule the watched client is configured for, so
// that each series exists before its first event (an increase over a
// series that appears at 1 is no increase to Prometheus). Client.Observe
// calls it when Watch registers the observer.
func (o observer) KnownWork(w known.Work) {
	m := o.m
	for _, q := range w.Queues {
		if keel.IsKeelTask(q, "") {
			continue // keel's own work has the keel_internal_ families
		}
		m.leasesRescued.WithLabelValues(q)
		m.commitLatency.WithLabelValues(q)
		m.pickupLatency.WithLabelValues(q)
	}
	for _, t := range w.Types {
		if keel.IsKeelTask(t.Queue, t.Name) {
			for _, oc := range outcomes {
				m.internalAttempts.WithLabelValues(t.Name, string(oc))
			}
			continue
		}
		m.attemptsPerTask.WithLabelValues(t.Name)
		if t.Queue == "" {
			continue // its queue is another process's to decide
		}
		m.enqueued.WithLabelValues(t.Queue, t.Name)
		m.idempotencyHits.WithLabelValues(t.Queue, t.Name)
		m.attemptDuration.WithLabelValues(t.Queue, t.Name)
		for _, st := range finishedStates {
			m.finished.WithLabelValues(t.Queue, t.Name, string(st))
		}
		for _, oc := range outcomes {
			m.attempts.WithLabelValues(t.Queue, t.Name, string(oc))
		}
	}
	for _, s := range w.Schedules {
		m.scheduleTasks.WithLabelValues(s)
	}
	for _, oc := range []string{"success", "failure"} {
		m.batchesFinished.WithLabelValues(oc)
	}
	m.mu.Lock()
	m.queues = w.Queues
	m.mu.Unlock()
}

// Observe implements keel.Observer.
func (o observer) Observe(ev keel.Event) {
	m := o.m
	if ev.Kind == keel.EventBatchFinished {
		oc := "success"
		if ev.Outcome != keel.OutcomeSucceeded {
			oc = "failure"
		}
		m.batchesFinished.WithLabelValues(oc).Inc()
		return
	}
	if keel.IsKeelTask(ev.Queue, ev.Type) {
		m.internal(ev)
		return
	}
	switch ev.Kind {
	case keel.EventEnqueued:
		if ev.Duplicate {
			m.idempotencyHits.WithLabelValues(ev.Queue, ev.Type).Inc()
		} else {
			m.enqueued.WithLabelValues(ev.Queue, ev.Type).Inc()
			if ev.Schedule != "" {
				m.scheduleTasks.WithLabelValues(ev.Schedule).Inc()
			}
		}
	case keel.EventStarted:
		m.pickupLatency.WithLabelValues(ev.Queue).Observe(ev.PickupLatency.Seconds())
	case keel.EventAttempt:
		if ev.Outcome == keel.OutcomeReleased {
			return // refunded: no attempt
		}
		m.attempts.WithLabelValues(ev.Queue, ev.Type, string(ev.Outcome)).Inc()
		m.attemptDuration.WithLabelValues(ev.Queue, ev.Type).Observe(ev.Duration.Seconds())
		m.commitLatency.WithLabelValues(ev.Queue).Observe(ev.CommitLatency.Seconds())
		m.taskFinished(ev)
	case keel.EventRescued:
		m.leasesRescued.WithLabelValues(ev.Queue).Inc()
		m.attempts.WithLabelValues(ev.Queue, ev.Type, string(keel.OutcomeLeaseExpired)).Inc()
		m.taskFinished(ev)
	case keel.EventCancelled:
		m.finished.WithLabelValues(ev.Queue, ev.Type, string(keel.StateCancelled)).Inc()
	}
}

// internal counts an event of keel's own tasks: their attempts only.
func (m *Collector) internal(ev keel.Event) {
	switch ev.Kind {
	case keel.EventAttempt:
		if ev.Outcome != keel.OutcomeReleased {
			m.internalAttempts.WithLabelValues(ev.Type, string(ev.Outcome)).Inc()
		}
	case keel.EventRescued:
		m.internalAttempts.WithLabelValues(ev.Type, string(keel.OutcomeLeaseExpired)).Inc()
	}
}

// taskFinished counts a task that an attempt left succeeded or dead.
func (m *Collector) taskFinished(ev keel.Event) {
	if ev.State != keel.StateSucceeded && ev.State != keel.StateDead {
		return
	}
	m.finished.WithLabelValues(ev.Queue, ev.Type, string(ev.State)).Inc()
	m.attemptsPerTask.WithLabelValues(ev.Type).Observe(float64(ev.Attempt))
}
