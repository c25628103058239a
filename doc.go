// Package keel is a durable background task system for Go. Callers hand it
// work and walk away; keel runs every task by contract, whether or not
// anyone is watching: nothing lost, nothing applied twice, nothing stuck.
//
// Tasks are rows in a database reached through a storage driver. The
// embedded default is driver/sqlite (one file, zero setup, no cgo);
// driver/postgres serves many worker processes on many machines sharing
// one database (FOR UPDATE SKIP LOCKED claims, LISTEN/NOTIFY wake-ups, a
// node registry and an elected leader for maintenance); driver/mysql does
// the same on MySQL 8 and MariaDB 10.6+. Changing the driver is
// configuration, not a code change.
//
// The same engine runs as a server: `keel serve` (package server and
// cmd/keel) adds an HTTP API, HTTP-target task types for workers in other
// languages and an operator CLI. package server's handler can also be
// mounted in a Go program's own HTTP server.
//
// # Quick start
//
//	drv, err := sqlite.Open(ctx, "app.db", sqlite.Options{})
//	if err != nil { ... }
//	defer drv.Close()
//
//	h := keel.NewHandlers()
//	keel.Handle(h, "email.send", func(ctx context.Context, t *keel.Task[Email]) error {
//		return send(ctx, t.Args.To, t.Args.Subject) // nil: done; an error: retried
//	})
//
//	c, err := keel.NewClient(keel.Config{Driver: drv, Handlers: h})
//	if err != nil { ... }
//	if err := c.Start(ctx); err != nil { ... } // workers, heartbeat, rescuer
//	defer c.Stop(ctx)                          // graceful: see Client.Stop
//
//	info, err := c.Enqueue(ctx, "email.send", Email{To: "a@example.com", Subject: "hi"})
//
// Enqueue returns once the task is durable. A client without handlers only
// enqueues; declare the types it may enqueue in Config.Types, or with
// Declare, which also gives them their defaults.
//
// # Tasks and states
//
// A task has a type, a JSON payload, a queue and a priority. Its state is
// pending (ready, scheduled for later, or waiting to retry), running,
// succeeded, dead (the dead letter: kept, can be requeued with
// Client.Retry) or cancelled (Client.Cancel). Ready tasks of a queue run
// by priority (larger first), then by run time and id. Every failed attempt
// is recorded in TaskInfo.Errors with its outcome, node, times and, for a
// panic, the stack (the last 20 are kept).
//
// # Options
//
// Per task, pass Options to Enqueue: Queue, Priority, RunAt or Delay,
// MaxAttempts, Timeout, UniqueBy or IdempotencyKey, and Meta. Per type,
// pass Queue, Priority, MaxAttempts, Timeout, Backoff and MaxSnoozes to
// Handle (or Declare); they become the type's defaults and Enqueue's
// options override them. A client stores the defaults it registers in the
// database before its first enqueue or at Start, so every client enqueuing
// the type applies them, also one that only lists it in Config.Types and
// Config.AnyType servers. A worker claims only the types it has handlers
// for.
//
// # Outcomes
//
// What a handler returns decides what happens next:
//
//	nil                    succeeded; a result set with Task.SetResult is stored
//	an error               retried after the backoff while attempts remain, else dead
//	RetryAfter(err, d)     like an error, but the next attempt waits d
//	Permanent(err)         dead at once, whatever attempts remain
//	Snooze(d)              pending again after d; the attempt is not counted;
//	                       past Config.MaxSnoozes (100) dead, outcome snoozed
//	a panic                recovered, recorded with its stack, retried like an error
//	timeout exceeded       recorded as outcome "timeout", retried like an error
//
// A payload that does not decode into the handler's type is a permanent
// failure. IsPermanent, RetryDelay and SnoozeDelay classify errors outside
// a worker; package keeltest runs a handler once and reports its outcome.
//
// # Idempotency
//
// UniqueBy(naturalKey) dedupes by content: the key is a SHA-256 over the
// type, the natural key and the canonical JSON of the payload. Submitting
// the same content again returns the existing task with
// TaskInfo.Duplicate set and inserts nothing; changed content is new work.
// IdempotencyKey(k) uses the caller's own key: the same key with the same
// payload is a duplicate, with another payload (or type) it fails with
// ErrIdempotencyConflict. A key is held while its task is pending, running
// or succeeded; dead and cancelled tasks release it, so a resubmission runs
// again. The database's unique index decides, also between processes.
//
// # Retention and archival
//
// The elected leader moves succeeded and cancelled tasks to an archive
// table Config.RetainSucceeded after they finished, and dead ones
// Config.RetainDead after (both 30 days by default; dead letters at least
// 7 days), in batches while workers run. Get still finds an archived task
// (TaskInfo.Archived); lists and counts no longer do, Cancel and Retry
// return ErrWrongState, and it no longer holds its idempotency key: the
// retention is the window in which a repeated key returns the existing
// task. Archived tasks are deleted only when Config.DeleteArchivedAfter is
// set; Client.Archived counts what was moved and deleted.
//
// # Transactions
//
// EnqueueTx and EnqueueManyTx insert inside the caller's transaction (a
// *sql.Tx, or pgx.Tx with PostgreSQL): the task
// exists if and only if the transaction commits. Inside a handler,
// CompleteTx marks the task succeeded inside the caller's transaction, so
// the handler's own writes and the completion commit together or not at
// all; it fails with ErrLeaseLost if the task is no longer this worker's.
// For SQLite, begin these transactions on the driver's DB() (the
// driver.DBer interface): SQLite has one writer, and a transaction on
// another connection would wait for keel's. Every keel write of the process
// waits while such a transaction is open: keep it short, and do not call
// Enqueue, Cancel or Retry (the non-Tx methods) while holding it.
//
// # Durable steps
//
// Step cuts a long handler into steps: each finished step stores its JSON
// result with the task (fenced like a completion), and a retried, rescued
// or requeued attempt gets the stored result back without running the step
// again, so the task continues after the last finished step. A task's
// step results take at most MaxStepsBytes (1 MiB); TaskInfo.Steps lists
// them. HTTP targets store steps through the API (Client.SaveStep behind
// POST /v1/tasks/{id}/steps).
//
// # Workers and graceful stop
//
// Start runs, for every queue in Config.Queues, a worker that claims ready
// tasks in batches up to its MaxWorkers and runs each attempt under a
// lease that one batched heartbeat per process renews. Outcomes are stored
// in batches too (group commit), and every write that ends an attempt is
// fenced: it applies only while the task is still running under this
// worker and attempt. If a process dies, the elected leader's rescuer sends
// its tasks back to pending once their leases expire (to dead on their last
// attempt). Stop stops claiming, waits for running handlers until its
// context ends, then cancels them and releases their tasks to pending
// without using an attempt.
//
// A task enqueued in the same process wakes its worker at once, and one
// this process schedules for later (Delay, RunAt, retries, snoozes,
// rescues) wakes it by timer when due, whatever the poll interval; tasks
// enqueued by other processes are found by polling every
// Config.PollInterval. A handler that ignores its ended context past
// Config.TimeoutGrace is a runaway: its attempt is recorded and its slot
// reused, and while Config.MaxRunawayHandlers of them run the client
// claims nothing (Client.RunawayHandlers counts them).
//
// # Operating
//
// Queues and Types list every queue and task type with their counts by
// state and runtime settings. UpdateQueue pauses, resumes or caps a
// queue's concurrency or rate across the cluster; UpdateType pauses a task
// type, caps its concurrency or rate across the cluster or overrides its
// timeout, max attempts and backoff; StartRamp raises a type's concurrency
// step by step while its failure ratio stays low. These settings live in the
// database: every client with workers re-reads them every
// Config.SettingsInterval (2s), so a change made anywhere applies on every
// node without a restart. RetryMatching and PurgeMatching requeue or
// delete dead letters in bulk by type, queue and finish time, a page at a
// time, or a chosen set by Filter.IDs. GetByKey finds the task holding an
// IdempotencyKey. Latency computes pickup and run time P50/P95 and the
// attempts used over the newest finished tasks (a bounded read on the
// finish-time index). Stats reports, per queue and type, the tasks by View (ready,
// scheduled, retrying, running, dead), the finish rates over the last 1, 5
// and 15 minutes of work, the oldest ready task, the time to drain and the
// dead letters of the last hour (Alert above AlertDeadPerHour). It reads
// live counters kept in the transaction of every task write, never the task
// table, and the leader reconciles them with the table every
// Config.ReconcileInterval. keel's own tasks (ReservedQueue: alert
// deliveries, on_dead hooks, the drill) count in no figure of Stats,
// History, Counts or Latency, nor in the metrics' task series: Stats.Keel
// shows them apart. Estimate (and ETA) tells when a pending task is
// expected to start and finish, or that its queue is paused, served by no
// live worker, or has no history to estimate from yet.
//
// # Traces
//
// keel makes OpenTelemetry spans with Config.TracerProvider (default the
// global provider, a no-op unless the program set one): "keel.enqueue
// <type>" for every enqueued task, a child of the span in the enqueue's
// context, and "keel.attempt <type>" for every attempt. The enqueue
// span's W3C trace context is stored in the task's meta (traceparent,
// tracestate), so every attempt, in any process, is a child of it; the
// attempt's span is in the handler's context, so the handler's own spans
// continue the trace. Without any span nothing is stored.
// # Metrics and events
//
// Client.Observe registers an Observer told about this client's task
// events (enqueued, started, attempt, rescued, cancelled). Package
// github.com/keelq/keel/metrics turns them into a prometheus.Collector
// (keel_tasks_enqueued_total, keel_attempts_total, ...), with cluster-wide
// gauges read from Stats; keel serve serves it at GET /metrics. Every
// task state change is also one log record on Config.Logger, with the
// keys task_id, type, queue, attempt, node, duration_ms, outcome, state,
// error and trace_id: success DEBUG, retry WARN, dead ERROR, cancel INFO.
//
// # Alerts and the drill
//
// The leader evaluates AlertRules (DefaultAlertRules: more than 3 dead
// letters in an hour per type and overall, a ready task older than 10m, a
// failure ratio above 50% of at least 20 attempts in 5m, a queue with
// ready tasks and no live worker, a lost node) from the live counters
// every Config.Alerts.Interval; each alert fires once and resolves once
// (Client.Alerts lists them). Every event goes to the log and to each
// Config.Alerts.Notifiers (WebhookNotifier, or any Notifier) as a keel
// task of its own in ReservedQueue, retried with backoff and durable
// across restarts; a notifier whose deliveries keep failing or are given
// up fires notifier_failing (logged at WARN). SetAlertRules changes the rules in every process at
// runtime. Client.Drill dead-letters a few tasks of a reserved type on
// purpose and reports whether, and how fast, the alert reached every
// notifier.
//
// # Periodic tasks
//
// Config.Schedules holds Schedule values: a task type enqueued on every
// tick of a cron spec (robfig/cron syntax, five fields or six with
// seconds, or "@every 10s", "@hourly"...) read in a time zone. Start
// stores them; the elected leader enqueues each tick once across all
// processes: one transaction moves the schedule's last tick forward with
// a compare-and-set and inserts the tick's task, so a second leader finds
// the tick taken. Ticks missed while no leader ran collapse into one task
// for the latest (MissedRunOnce, the default) or none (MissedSkip).
// Client.Schedules lists them with their next runs; PauseSchedule,
// ResumeSchedule (which does not run the paused period) and
// TriggerSchedule act on one in every process.
//
// # When a task dies
//
// OnDead("x.failed") on Handle or Declare enqueues one follow-up task of
// type "x.failed" (payload DeadTask: the dead task's id, type, queue,
// attempt, last error and payload) for every dead task of the type, in the
// same transaction as the dead-lettering, whether the worker or the
// leader's rescuer writes it. Config.OnDead is a hook run, durably, for
// every dead task of the types a client handles. A follow-up's death gets
// no follow-up of its own.
//
// # The automatic brake
//
// The brake judges tasks, not attempts: each task gives at most its first
// attempt's failure (an error or a timeout) and its success as evidence.
// When a type's failed share of a node's last 20 pieces reaches the
// threshold (default 80%), the node opens its brake: its tasks are not
// claimed for a cooldown (default 30s) and a brake_open alert fires; then
// a trickle of probe tasks runs, due retries first, widening with each
// success, until fresh tasks succeed again and the brake closes; probes
// failing in a row with no success reopen it. Brake and NoBrake set a
// type's thresholds; Client.SetBrake changes them at runtime,
// Client.Brakes lists brakes and Client.CloseBrake closes one by hand. The
// guide docs/brake.md shows it at work.
//
// # Defaults
//
// Every Config field's comment ends with its default:
//
//	MaxAttempts        4 (one run and three retries)
//	Timeout            60s per attempt
//	BackoffBase/Max    30s doubling per retry, ±20% jitter, never above 1h
//	MaxSnoozes         100 per task; the next snooze dead-letters it
//	LeaseTTL           30s, renewed every HeartbeatInterval (10s)
//	PollInterval       1s
//	RescueInterval     10s
//	ReconcileInterval  5m
//	MaintainInterval   1m
//	HistoryRetention   192h (8 days)
//	RetainSucceeded    720h (30 days; also the idempotency window of a
//	                   succeeded task: an archived task holds no key)
//	RetainDead         720h (30 days, at least 7)
//	DeleteArchivedAfter 0: archived tasks are never deleted
//	ArchiveInterval    1m, ArchiveBatch 1000
//	SettingsInterval   2s
//	ClaimBatch         100
//	TimeoutGrace       5s
//	MaxRunawayHandlers the sum of the queues' MaxWorkers
//	MaxPayloadBytes    1 MiB
//	Alerts             DefaultAlertRules to the log, evaluated every 15s
//	Queues             {"default": 10 workers}
//	TracerProvider     otel.GetTracerProvider() (a no-op unless set)
package keel
