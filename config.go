package keel

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/config"
)

// DefaultQueue is the queue tasks go to unless Queue says otherwise.
const DefaultQueue = "default"

// QueueConfig configures one named queue a worker serves.
type QueueConfig struct {
	// MaxWorkers is how many of the queue's tasks run at once in this
	// process. Default 10.
	MaxWorkers int
	// Prefetch is how many of the queue's tasks the worker claims ahead,
	// while every slot is busy, and holds to start the moment a slot
	// frees, in claim order, without waiting for a claim. A held task's
	// lease is renewed like a running task's; its timeout counts from its
	// handler's start; Stop gives it back at once, its attempt refunded.
	// It waits for a running task to finish, so a slow task type delays
	// the tasks held behind it. Queues and types with a cluster-wide
	// concurrency or rate (UpdateQueue, UpdateType) hold none. At most
	// 4×MaxWorkers and 1000; NoPrefetch turns it off. Default
	// MaxWorkers/4, rounded down (0 below 4 workers).
	Prefetch int
}

// NoPrefetch, as QueueConfig.Prefetch, turns prefetch off: the queue
// claims only as many tasks as it has free slots.
const NoPrefetch = -1

// Config configures a Client. Only Driver is required; every other field's
// comment ends with its default.
type Config struct {
	// Driver is the storage driver, for example from sqlite.Open. Required.
	Driver driver.Driver
	// Handlers maps task types to handlers. A client with handlers can Start
	// workers. Default none (enqueue-only).
	Handlers *Handlers
	// Types declares task types this client may enqueue without handling
	// them itself (another process runs them). Their enqueues apply the
	// defaults the type was registered with elsewhere (Handle or Declare
	// options, stored in the database), read at most every
	// SettingsInterval; an Enqueue option or this client's own Handle or
	// Declare options take precedence. Default none.
	Types []string
	// OnDead, when set, is called once for every dead-lettered task of the
	// types this client has handlers for (see OnDead for a follow-up task
	// of a type of your own instead). It is durable: each death enqueues,
	// atomically with it, a task of keel's own type keel.on_dead (reserved
	// queue "keel") whose handler calls OnDead in a started client with
	// the hook, so it runs at least once even if processes die; an error
	// runs it again with backoff (1s doubling to 5m, 25 attempts). The
	// TaskInfo is the dead task as Get returns it. Default nil.
	OnDead func(ctx context.Context, t TaskInfo) error
	// AnyType lets Enqueue accept any valid task type, not only those with
	// a handler or in Types: for servers that store tasks other processes
	// work (keel serve). Such types get their stored defaults, as Types
	// do. Default false.
	AnyType bool
	// Queues are the queues Start works, each with its concurrency. Default
	// {"default": {MaxWorkers: 10}}.
	Queues map[string]QueueConfig
	// Node names this process in leases and error histories. Default
	// hostname-pid-random.
	Node string
	// Version is the version this process shows in the node registry
	// (keel nodes, the dashboard). Default keel's module version from the
	// program's build information ("" when it has none).
	Version string
	// RedisGate, when set, puts a Redis first gate before the database's
	// idempotency check for single tasks with a key: an accelerator that
	// spares the database most duplicate inserts, never a guarantee (the
	// unique index still decides; see RedisGate). Default nil (no gate).
	RedisGate *RedisGate
	// Logger receives keel's logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock; tests inject their own. Default time.Now.
	Now func() time.Time
	// TracerProvider makes keel's OpenTelemetry spans: one per enqueued
	// task ("keel.enqueue <type>") and one per attempt ("keel.attempt
	// <type>"), which joins the enqueue's trace through the W3C trace
	// context stored in the task's meta. Default otel.GetTracerProvider(),
	// the global provider: a no-op, recording nothing, unless the program
	// set one with otel.SetTracerProvider.
	TracerProvider trace.TracerProvider

	// MaxAttempts is how often a task runs before it is dead-lettered.
	// Default 4 (one run and three retries).
	MaxAttempts int
	// Timeout bounds one attempt. Default 60s.
	Timeout time.Duration
	// BackoffBase is the first retry delay, doubled on each further retry.
	// Default 30s.
	BackoffBase time.Duration
	// BackoffMax caps the retry delay. Default 1h.
	BackoffMax time.Duration
	// BackoffJitter spreads retry delays by ± this fraction; a negative value
	// turns jitter off. Default 0.2.
	BackoffJitter float64
	// MaxSnoozes bounds how often one task may Snooze (snoozes use no
	// attempt): the snooze after the last one allowed dead-letters the task
	// with outcome "snoozed", so a task that always snoozes cannot stay
	// forever. Retry and RetryMatching reset the count; a type's own bound
	// is set with the MaxSnoozes option on Handle. 1..1000000. Default 100.
	MaxSnoozes int

	// LeaseTTL is how long a claimed task stays ours without a heartbeat.
	// Default 30s.
	LeaseTTL time.Duration
	// HeartbeatInterval is how often leases are renewed, in one batch per
	// process. Default 10s; must be below LeaseTTL.
	HeartbeatInterval time.Duration
	// PollInterval is how often idle workers look for tasks enqueued by
	// other processes (same-process enqueues wake them at once, and so do
	// other processes' with a driver.Notifier such as PostgreSQL's; the poll
	// is then a fallback). Default 1s.
	PollInterval time.Duration
	// RescueInterval is how often the leader looks for expired leases.
	// Default 10s.
	RescueInterval time.Duration
	// ReconcileInterval is how often the leader checks the live counters
	// against the task table (a read of the whole table) and corrects any
	// difference, and drops history older than HistoryRetention. Default 5m.
	ReconcileInterval time.Duration
	// MaintainInterval is how often the leader checks whether the database
	// needs upkeep that it is not doing itself, and does it: on
	// PostgreSQL, a VACUUM of the task table when autovacuum is off for it
	// (or has left its dead rows for 5 minutes), without which every
	// claim steps over the dead index entries of all tasks claimed before.
	// A check reads one row of statistics. SQLite and MySQL need none.
	// Default 1m.
	MaintainInterval time.Duration
	// HistoryRetention is how long the per-minute history (rates, the
	// ETA, the dashboard's charts) is kept; at least 1h, which Stats
	// reads. Default 8 days (192h).
	HistoryRetention time.Duration
	// RetainSucceeded is how long succeeded and cancelled tasks stay in
	// the task table after they finished; then the leader moves them to
	// the archive (keel_archive), where Get still finds them. It is also
	// how long a succeeded task holds its idempotency key: an archived task
	// holds none. At least 1m (MinRetainSucceeded). Default 30 days
	// (720h).
	RetainSucceeded time.Duration
	// RetainDead is how long dead tasks (dead letters) stay in the task
	// table, where they can be requeued, before they are archived. At
	// least 7 days (168h). Default 30 days (720h).
	RetainDead time.Duration
	// DeleteArchivedAfter is how long archived tasks are kept before the
	// leader deletes them (each deletion logged and counted); 0 keeps them
	// for ever. Default 0.
	DeleteArchivedAfter time.Duration
	// ArchiveInterval is how often the leader archives finished tasks past
	// their retention (and deletes archived ones, see
	// DeleteArchivedAfter). Default 1m.
	ArchiveInterval time.Duration
	// ArchiveBatch is how many tasks one archival transaction moves (or
	// deletes), 1..10000; a round runs batches until one moves fewer.
	// Default 1000.
	ArchiveBatch int
	// SettingsInterval is how often workers read the runtime settings of
	// queues and types (pause, concurrency, timeout, retry policy) that any
	// node may change. Default 2s.
	SettingsInterval time.Duration
	// ClaimBatch caps how many tasks one claim takes, 1..1000; a claim also
	// takes no more than the queue's free worker slots. Default 100. With
	// hundreds of workers, claims of hundreds cost the database less per
	// task: keel bench runs 1,000 workers with claims of 500.
	ClaimBatch int
	// TimeoutGrace is how long a handler may keep running after its context
	// was cancelled (timeout, stop, lost lease) before keel gives up waiting
	// and records the attempt. Default 5s.
	TimeoutGrace time.Duration
	// MaxRunawayHandlers bounds the handlers that ignore their ended
	// context (timeout, stop, lost lease, cancel) and keep running past
	// TimeoutGrace: their attempts are recorded and their slots reused, but
	// while this many of them run the client claims no new tasks, so such
	// a handler cannot make the process run unbounded work. Each is logged
	// at ERROR; RunawayHandlers counts them. Default the sum of the
	// queues' MaxWorkers.
	MaxRunawayHandlers int
	// MaxPayloadBytes bounds a payload. Default 1 MiB.
	MaxPayloadBytes int

	// Alerts configures the alert rules the leader evaluates and the
	// notifiers this process delivers alerts to (see AlertConfig). Default:
	// DefaultAlertRules, delivered to the log, evaluated every 15s.
	Alerts AlertConfig

	// Schedules are periodic tasks (see Schedule), stored when Start runs:
	// a definition replaces the stored one of its name, keeping a pause
	// set through the API (a changed spec or zone counts its ticks from
	// then). The elected leader enqueues every stored schedule's ticks,
	// whichever process defined it. Default none.
	Schedules []Schedule
}

// The least retention Config accepts: dead letters are kept at least a
// week (seed 000 §3.2); succeeded and cancelled tasks at least a minute,
// so a test can watch archival happen (a test that cannot wait a minute
// moves its Config.Now clock instead).
const (
	MinRetainSucceeded = time.Minute
	MinRetainDead      = 7 * 24 * time.Hour
)

func (c Config) withDefaults() Config {
	if c.Handlers == nil {
		c.Handlers = NewHandlers()
	}
	if c.Queues == nil {
		c.Queues = map[string]QueueConfig{DefaultQueue: {}}
	}
	var workers int
	c.Queues, workers = config.DefaultQueues(c.Queues)
	c.fields().Default(workers)
	rules := DefaultAlertRules()
	if c.Alerts.Rules != nil { // the caller keeps its own copy to change
		rules = *c.Alerts.Rules
	}
	c.Alerts.Rules = &rules
	c.Alerts.Notifiers = slices.Clone(c.Alerts.Notifiers)
	c.Schedules = slices.Clone(c.Schedules)
	return c
}

// fields points at c's settings that internal/config defaults and checks.
func (c *Config) fields() config.Fields {
	return config.Fields{Node: &c.Node, Version: &c.Version, Logger: &c.Logger, Now: &c.Now, TracerProvider: &c.TracerProvider,
		MaxAttempts: &c.MaxAttempts, MaxSnoozes: &c.MaxSnoozes, ArchiveBatch: &c.ArchiveBatch, ClaimBatch: &c.ClaimBatch,
		MaxRunawayHandlers: &c.MaxRunawayHandlers, MaxPayloadBytes: &c.MaxPayloadBytes, BackoffJitter: &c.BackoffJitter,
		Timeout: &c.Timeout, BackoffBase: &c.BackoffBase, BackoffMax: &c.BackoffMax, LeaseTTL: &c.LeaseTTL,
		HeartbeatInterval: &c.HeartbeatInterval, PollInterval: &c.PollInterval, RescueInterval: &c.RescueInterval,
		ReconcileInterval: &c.ReconcileInterval, MaintainInterval: &c.MaintainInterval,
		HistoryRetention: &c.HistoryRetention, RetainSucceeded: &c.RetainSucceeded, RetainDead: &c.RetainDead,
		DeleteArchivedAfter: &c.DeleteArchivedAfter, ArchiveInterval: &c.ArchiveInterval,
		SettingsInterval: &c.SettingsInterval, TimeoutGrace: &c.TimeoutGrace,
		AlertsInterval: &c.Alerts.Interval, AlertsRetryMax: &c.Alerts.RetryMax}
}

func (c Config) validate() error {
	if c.Driver == nil {
		return invalid("Config.Driver is required")
	}
	return config.Check(c.fields(), c.Queues, c.Types, c.validateAlerts)
}
