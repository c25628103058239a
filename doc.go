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
// # Transactions
//
// EnqueueTx and EnqueueManyTx insert inside the caller's transaction (a
// *sql.Tx, or pgx.Tx with PostgreSQL): the task exists if and only if the
// transaction commits. Inside a handler, CompleteTx marks the task
// succeeded in the caller's transaction, fenced: it fails with
// ErrLeaseLost if the task is no longer this worker's. For SQLite, begin
// these transactions on the driver's DB() and keep them short.
//
// # Durable steps
//
// Step cuts a long handler into steps: each finished step stores its JSON
// result with the task, and a retried, rescued or requeued attempt gets
// the stored result back without running the step again.
//
// # Workers and graceful stop
//
// Start runs, for every queue in Config.Queues, a worker that claims ready
// tasks in batches and runs each attempt under a lease that one batched
// heartbeat per process renews. Every write that ends an attempt is
// fenced: it applies only while the task is still running under this
// worker and attempt. If a process dies, the elected leader's rescuer sends
// its tasks back to pending once their leases expire. Stop stops claiming,
// waits for running handlers until its context ends, then cancels them and
// releases their tasks to pending without using an attempt.
//
// # Operating
//
// Queues, Types, UpdateQueue and UpdateType list and change queues and
// types across the cluster (pause, concurrency, rate, timeout, attempts,
// backoff); StartRamp raises a type's concurrency step by step; Brake,
// SetBrake and Brakes hold a type back while its downstream fails.
// RetryMatching and PurgeMatching act on dead letters in bulk. Stats,
// History, Latency and Estimate (ETA) report from live counters, never
// from the task table; keel's own tasks (ReservedQueue) count in none of
// the users' figures. Observe registers an Observer of task events, which
// package metrics turns into Prometheus series; attempts and enqueues are
// OpenTelemetry spans through Config.TracerProvider. The leader evaluates
// AlertRules and delivers alerts to Config.Alerts.Notifiers as durable
// tasks; Drill proves the path. Config.Schedules holds periodic tasks, each
// tick enqueued once across the cluster. Package batch writes a group of
// tasks in one transaction, with callbacks enqueued exactly once when the
// last member finished. DependsOn holds a task until the tasks it names
// have succeeded; package workflow writes named tasks with their needs in
// one transaction and reads the graph. OnDead enqueues a follow-up for
// every dead task of a type. The leader archives finished tasks after
// Config.RetainSucceeded and Config.RetainDead. The Sequence option runs
// the tasks of one key one at a time, in enqueue order, across the
// cluster (package sequence lists the keys a dead member holds).
//
// Each of these has a guide in the repository's docs folder: tasks.md,
// idempotency.md, steps.md, batches.md, workflows.md, sequences.md, schedules.md, limits.md (limits, rates, ramps,
// the brake), operations.md (alerts, the drill, on_dead, retention, crash
// safety, the CLI), observability.md (metrics, logs, traces, stats and
// ETA), databases.md, http-api.md, sources.md, dashboard.md,
// configuration.md and performance.md.
//
// # Defaults
//
// Every Config field's comment ends with its default. The main ones:
// MaxAttempts 4, Timeout 60s per attempt, backoff 30s doubling to 1h with
// ±20% jitter, LeaseTTL 30s renewed every 10s, PollInterval 1s,
// RetainSucceeded and RetainDead 30 days, Queues {"default": 10 workers},
// MaxPayloadBytes 1 MiB.
package keel
