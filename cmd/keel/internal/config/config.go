// Package config is the configuration of keel serve: one TOML file
// (keel.toml), overridden by KEEL_* environment variables, overridden by
// command-line flags. Every field's comment ends with its default.
//
// Load reads all three, fills defaults, validates and reports where each
// value came from (Values). Unknown keys in the file, unknown KEEL_HTTP_*,
// KEEL_ENGINE_*, KEEL_RETENTION_*, KEEL_LOG_*, KEEL_TRACING_* and KEEL_METRICS_* variables and values that
// do not parse are errors, never ignored; an empty variable counts as unset.
//
// Durations are strings: a Go duration ("30s", "1h30m") or whole days
// ("30d"). Sizes are integers in bytes.
//
// [[sources]] blocks (broker sources, see BrokerSource) are read from the
// file only; Config.Sources holds them and BrokerSource.Config turns one
// into a source.Config. Values shows them with the URL's password
// redacted.
//
// The environment variables (see Fields for the full list):
//
//	KEEL_CONFIG                     the file, when --config is not given
//	KEEL_LISTEN                     listen
//	KEEL_SHUTDOWN_TIMEOUT           shutdown_timeout
//	KEEL_ANY_TYPE                   any_type
//	KEEL_DSN, KEEL_DB, KEEL_SCHEMA  database.dsn, database.db, database.schema
//	KEEL_TOKEN                      adds one admin token to [[tokens]]
//	KEEL_HTTP_<FIELD>               [http] fields, e.g. KEEL_HTTP_READ_TIMEOUT
//	KEEL_ENGINE_<FIELD>             [engine] fields, e.g. KEEL_ENGINE_MAX_ATTEMPTS
//	KEEL_RETENTION_<FIELD>          [retention] fields, e.g. KEEL_RETENTION_DEAD
//	KEEL_LOG_<FIELD>                [log] fields: KEEL_LOG_LEVEL, KEEL_LOG_FORMAT
//	KEEL_TRACING_<FIELD>            [tracing] fields, e.g. KEEL_TRACING_OTLP_ENDPOINT
//	KEEL_METRICS_LISTEN             metrics.listen
//	KEEL_REDIS_<FIELD>              [redis] fields, e.g. KEEL_REDIS_URL
package config

import "time"

// DefaultPath is the file Load reads when no path is given and KEEL_CONFIG
// is unset, if it exists.
const DefaultPath = "keel.toml"

// DefaultQueue is the queue of types that do not name one, and the one
// queue configured when the file has no [queues].
const DefaultQueue = "default"

// Roles a token can have: admin may do everything, enqueue may add and read
// tasks, read may only read.
const (
	RoleAdmin   = "admin"
	RoleEnqueue = "enqueue"
	RoleRead    = "read"
)

// Config is keel serve's configuration.
type Config struct {
	// Listen is the HTTP API's address. Without tokens only a loopback
	// address is allowed. Default "127.0.0.1:7400".
	Listen string `toml:"listen"`
	// ShutdownTimeout bounds a graceful stop on SIGINT or SIGTERM: open
	// requests finish, then running tasks get what is left before they are
	// cancelled and released. Default "30s".
	ShutdownTimeout Duration `toml:"shutdown_timeout"`

	Database Database `toml:"database"`
	// Tokens are the API's bearer tokens. Default none: the server then
	// listens on loopback only and does not check requests.
	Tokens    []Token   `toml:"tokens"`
	HTTP      HTTP      `toml:"http"`
	Engine    Engine    `toml:"engine"`
	Retention Retention `toml:"retention"`
	Log       Log       `toml:"log"`
	Tracing   Tracing   `toml:"tracing"`
	Metrics   Metrics   `toml:"metrics"`
	Redis     Redis     `toml:"redis"`
	Alerts    Alerts    `toml:"alerts"`
	// Queues this server works, by name. Default one queue, "default",
	// with 10 workers. Only queues of types with a url are worked.
	Queues map[string]Queue `toml:"queues"`
	// Types are the task types the API accepts, by name. A type with a url
	// is worked here by POSTing each task to it; a type without one is
	// enqueue-only (another process works it). Default none.
	Types map[string]Type `toml:"types"`
	// AnyType makes the API accept tasks of any valid type, not only those
	// in [types], for other processes to work (keel.Config.AnyType). A
	// misspelt type is then stored, not rejected. Default false, but a
	// configuration without any [types] accepts every type.
	AnyType bool `toml:"any_type"`
	// Schedules are periodic tasks, one [[schedules]] block each: the
	// elected leader enqueues a task of the schedule's type on every tick.
	// Default none.
	Schedules []Schedule `toml:"schedules"`
	// Sources are broker sources, one [[sources]] block each: RabbitMQ
	// queues or NATS JetStream consumers whose messages become tasks.
	// Default none.
	Sources []BrokerSource `toml:"sources"`

	// File is the file read, "" if none. Set by Load.
	File string `toml:"-"`
	// Warnings are doubtful but valid settings. Set by Load.
	Warnings []string `toml:"-"`

	sources map[string]Source
}

// Database says where tasks are stored.
type Database struct {
	// DSN is a postgres:// or mysql:// URL; empty means SQLite at DB.
	// Default "".
	DSN string `toml:"dsn"`
	// DB is the SQLite file, used when DSN is empty. Default "./keel.db".
	DB string `toml:"db"`
	// Schema holds keel's tables on PostgreSQL. Default "keel".
	Schema string `toml:"schema"`
}

// Token is one API bearer token.
type Token struct {
	// Token is the secret itself, at least 16 characters. Set it or
	// TokenEnv.
	Token string `toml:"token"`
	// TokenEnv names an environment variable holding the token, so the
	// secret need not sit in the file.
	TokenEnv string `toml:"token_env"`
	// Role is admin (everything), enqueue (add and read tasks) or read.
	// Required.
	Role string `toml:"role"`

	// From says where the token came from, for messages. Set by Load.
	From string `toml:"-"`
}

// HTTP configures the API's HTTP server.
type HTTP struct {
	// ReadHeaderTimeout bounds reading a request's headers. Default "5s".
	ReadHeaderTimeout Duration `toml:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request. Default "30s".
	ReadTimeout Duration `toml:"read_timeout"`
	// WriteTimeout bounds writing a response. Default "30s".
	WriteTimeout Duration `toml:"write_timeout"`
	// IdleTimeout closes keep-alive connections idle this long. Default
	// "120s".
	IdleTimeout Duration `toml:"idle_timeout"`
	// MaxBodyBytes bounds a request body: keep it above
	// engine.max_payload_bytes by room for the rest of the request. Default
	// 1114112 (1 MiB + 64 KiB).
	MaxBodyBytes int64 `toml:"max_body_bytes"`
	// MaxBatch bounds the tasks of one batch enqueue. Default 1000.
	MaxBatch int `toml:"max_batch"`
	// Dashboard serves the web dashboard at "/" next to the API (same
	// listener, same tokens; never on [metrics] listen). Default true.
	Dashboard bool `toml:"dashboard"`
}

// Engine holds the task engine's settings (keel.Config). Per-type values
// in [types] override the first four.
type Engine struct {
	// MaxAttempts is how often a task runs before it is dead-lettered:
	// one run and MaxAttempts-1 retries, 1..1000. Default 4.
	MaxAttempts int `toml:"max_attempts"`
	// Timeout bounds one attempt. Default "60s".
	Timeout Duration `toml:"timeout"`
	// BackoffBase is the first retry delay, doubled on each further retry.
	// Default "30s".
	BackoffBase Duration `toml:"backoff_base"`
	// BackoffMax caps the retry delay. Default "1h".
	BackoffMax Duration `toml:"backoff_max"`
	// BackoffJitter spreads retry delays by ± this fraction, 0 (none) to
	// below 1. Default 0.2.
	BackoffJitter float64 `toml:"backoff_jitter"`
	// LeaseTTL is how long a claimed task stays this server's without a
	// heartbeat; a task whose worker vanished is rescued after it. Default
	// "30s".
	LeaseTTL Duration `toml:"lease_ttl"`
	// HeartbeatInterval is how often leases are renewed; below LeaseTTL.
	// Default "10s".
	HeartbeatInterval Duration `toml:"heartbeat_interval"`
	// PollInterval is how often idle workers look for tasks other
	// processes enqueued. Default "1s".
	PollInterval Duration `toml:"poll_interval"`
	// RescueInterval is how often expired leases are looked for. Default
	// "10s".
	RescueInterval Duration `toml:"rescue_interval"`
	// ReconcileInterval is how often the leader checks the live counters
	// against the task table. Default "5m".
	ReconcileInterval Duration `toml:"reconcile_interval"`
	// MaintainInterval is how often the leader checks whether the database
	// needs upkeep it is not doing itself (PostgreSQL: a VACUUM of the task
	// table where autovacuum is off). Default "1m".
	MaintainInterval Duration `toml:"maintain_interval"`
	// HistoryRetention is how long the per-minute history is kept, at
	// least "1h". Default "8d".
	HistoryRetention Duration `toml:"history_retention"`
	// SettingsInterval is how often runtime settings (pause, concurrency,
	// per-type overrides) changed on any node are read. Default "2s".
	SettingsInterval Duration `toml:"settings_interval"`
	// ClaimBatch caps the tasks one claim takes, 1..1000. Default 100.
	ClaimBatch int `toml:"claim_batch"`
	// TimeoutGrace is how long a handler may run on after its context
	// ended before its attempt is recorded anyway. Default "5s".
	TimeoutGrace Duration `toml:"timeout_grace"`
	// MaxPayloadBytes bounds a task's payload. Default 1048576 (1 MiB).
	MaxPayloadBytes int `toml:"max_payload_bytes"`
	// Node names this process in leases and attempt histories. Default ""
	// (hostname-pid-random).
	Node string `toml:"node"`
}

// Retention says how long finished tasks stay in the task table before
// the leader moves them to the archive (keel_archive, where GET
// /v1/tasks/{id}, keel status and keel inspect still find them), and how
// long archived tasks are kept.
type Retention struct {
	// Dead keeps dead letters (where keel dlq can requeue them) this
	// long, at least 7 days. Default "30d".
	Dead Duration `toml:"dead"`
	// Succeeded keeps succeeded and cancelled tasks this long, at least
	// 1m; it is also how long a succeeded task holds its idempotency key.
	// Default "30d".
	Succeeded Duration `toml:"succeeded"`
	// Archive deletes archived tasks this long after they were archived
	// (each deletion logged and counted); empty or "0s" keeps them for
	// ever. Default "0s" (off).
	Archive Duration `toml:"archive"`
	// Interval is how often the leader archives (and deletes, with
	// Archive). Default "1m".
	Interval Duration `toml:"interval"`
}

// Alerts configures the alert rules (evaluated by the leader among all
// keel processes) and the webhooks this server delivers alerts to; the
// log always gets them. The rules can be changed at runtime through the
// API (PATCH /v1/alerts/rules), which overrides these until reset.
type Alerts struct {
	// DeadPerHour: more than this many tasks dead-lettered in the last
	// hour fires, per type and for all types together; -1 turns it off.
	// Default 3.
	DeadPerHour int `toml:"dead_per_hour"`
	// OldestReadyAge: a queue whose oldest ready task waited longer fires;
	// "0s" turns it off. Default "10m".
	OldestReadyAge Duration `toml:"oldest_ready_age"`
	// FailureRatio: a type with more than this share of failed attempts
	// among at least FailureMinAttempts in FailureWindow fires; 0 turns it
	// off. Defaults 0.5, 20, "5m".
	FailureRatio       float64  `toml:"failure_ratio"`
	FailureMinAttempts int      `toml:"failure_min_attempts"`
	FailureWindow      Duration `toml:"failure_window"`
	// NoLiveWorker: a queue with ready tasks and no live worker fires.
	// Default true.
	NoLiveWorker bool `toml:"no_live_worker"`
	// NodeLost: a node silent for three heartbeat intervals fires.
	// Default true.
	NodeLost bool `toml:"node_lost"`
	// Interval is how often the rules are evaluated. Default "15s".
	Interval Duration `toml:"interval"`
	// RetryMax caps the wait between delivery attempts. Default "5m".
	RetryMax Duration `toml:"retry_max"`
	// Off turns alerting off in this server. Default false.
	Off bool `toml:"off"`
	// Webhooks receive each alert event as JSON with a "text" field chat
	// tools show. Default none.
	Webhooks []Webhook `toml:"webhooks"`
}

// Schedule is one [[schedules]] block (see keel.Schedule).
type Schedule struct {
	// Name identifies the schedule: 1-128 letters, digits and _ . : -.
	// Required.
	Name string `toml:"name"`
	// Spec is a cron expression of five fields ("*/5 * * * *"), or six
	// with seconds first, or a descriptor ("@hourly", "@every 10s").
	// Required.
	Spec string `toml:"spec"`
	// TimeZone is the IANA zone the spec is read in. Default "UTC".
	TimeZone string `toml:"time_zone"`
	// Type is the task type enqueued. Required.
	Type string `toml:"type"`
	// Queue is the tasks' queue. Default "default".
	Queue string `toml:"queue"`
	// Payload is every task's payload, a TOML table (or any value).
	// Default {}.
	Payload any `toml:"payload"`
	// Priority is the tasks' priority. Default 0.
	Priority int `toml:"priority"`
	// Missed is run_once (one task for the latest tick missed while no
	// leader ran) or skip (none). Default "run_once".
	Missed string `toml:"missed"`
}

// Webhook is one [[alerts.webhooks]] entry.
type Webhook struct {
	// Name identifies it in delivery records: 1-64 of a-z, 0-9, '_', '-'.
	// Default "webhook", then "webhook-2", ...
	Name string `toml:"name"`
	// URL receives a POST per alert event. Required.
	URL string `toml:"url"`
	// Headers are sent with each request.
	Headers map[string]string `toml:"headers"`
	// HeadersEnv are headers whose values are read from the named
	// environment variables (secrets stay out of the file).
	HeadersEnv map[string]string `toml:"headers_env"`
}

// Log configures keel serve's logs on stderr.
type Log struct {
	// Level is debug, info, warn or error. Default "info".
	Level string `toml:"level"`
	// Format is text or json. Default "text".
	Format string `toml:"format"`
}

// Tracing configures OpenTelemetry traces: a span for every enqueue and
// every attempt, exported over OTLP/HTTP. Off unless OTLPEndpoint is set.
type Tracing struct {
	// OTLPEndpoint is the OTLP/HTTP collector spans are sent to: host:port
	// such as "127.0.0.1:4318" (HTTPS unless Insecure, path /v1/traces),
	// or a URL such as "http://collector:4318" (the scheme decides TLS;
	// without a path /v1/traces is used, a path is used as given). The
	// OTEL_EXPORTER_OTLP_* variables (headers, certificates) apply too.
	// Default "": no spans are exported.
	OTLPEndpoint string `toml:"otlp_endpoint"`
	// Insecure sends spans to a host:port endpoint over plain HTTP; with a
	// URL its scheme decides. Default false.
	Insecure bool `toml:"insecure"`
	// ServiceName is the service.name of keel's spans. Default "keel".
	ServiceName string `toml:"service_name"`
	// SampleRatio is the fraction of new traces recorded, 0..1; an enqueue
	// that joins a caller's trace follows the caller's sampling decision.
	// Default 1.0.
	SampleRatio float64 `toml:"sample_ratio"`
}

// Redis configures the Redis first gate (keel.RedisGate) in front of the
// database's idempotency check for keyed enqueues: an accelerator, not a
// guarantee (the unique index still decides). Off unless URL is set.
type Redis struct {
	// URL is the Redis server, redis://[user:password@]host:port/db or
	// rediss:// for TLS. Default "": no gate.
	URL string `toml:"url"`
	// Prefix is put before the idempotency key to make the Redis key.
	// Default "keel:gate:".
	Prefix string `toml:"prefix"`
	// GateTTL is how long a gate key lives: duplicates within it are
	// answered without an insert. Default "10s".
	GateTTL Duration `toml:"gate_ttl"`
	// Timeout bounds each Redis call; a slower answer skips the gate.
	// Default "50ms".
	Timeout Duration `toml:"timeout"`
	// Wait is how long an enqueue that found the key held polls the
	// database for the holder's task before inserting itself. Default
	// "500ms".
	Wait Duration `toml:"wait"`
}

// Enabled reports whether the Redis gate is on.
func (r Redis) Enabled() bool { return r.URL != "" }

// Enabled reports whether spans are exported.
func (t Tracing) Enabled() bool { return t.OTLPEndpoint != "" }

// Metrics configures GET /metrics, the Prometheus metrics.
type Metrics struct {
	// Listen, when set, serves GET /metrics on this address of its own
	// instead of the API's: host:port, a loopback address unless tokens
	// are configured (then it needs a read or admin token, as on the API).
	// Default "" (on the API's listener).
	Listen string `toml:"listen"`
}

// Queue is one queue this server works.
type Queue struct {
	// Workers is how many of the queue's tasks run at once in this
	// server, 1..10000. Default 10.
	Workers int `toml:"workers"`
	// Prefetch is how many of the queue's tasks this server claims ahead,
	// while every worker is busy, to start the moment one frees; 0 turns
	// it off; at most 4×workers and 1000. A queue with a concurrency or
	// rate holds none. Default workers/4, rounded down.
	Prefetch int `toml:"prefetch"`
	// Concurrency caps the queue's running tasks across every node of the
	// cluster, 0..10000; keel serve stores it as the queue's runtime
	// setting when it starts (keel queue set changes it until the next
	// start). Default 0 (no cap).
	Concurrency int `toml:"concurrency"`
	// Rate caps the queue's task starts per second across the cluster, a
	// number up to 1000000; stored like Concurrency. Default 0 (none).
	Rate float64 `toml:"rate"`
	// Burst is the rate's bucket size, 0..1000000. Default 0 (max(1,
	// ceil(rate))).
	Burst int `toml:"burst"`
}

// Type is one task type the API accepts.
type Type struct {
	// URL, when set, makes the type an HTTP target: each task is POSTed
	// there and a 2xx answer succeeds it. Default "" (enqueue-only).
	URL string `toml:"url"`
	// ConnectTimeout bounds connecting to URL. Default "2s".
	ConnectTimeout Duration `toml:"connect_timeout"`
	// ReadTimeout bounds waiting for URL's answer. Default "10s".
	ReadTimeout Duration `toml:"read_timeout"`
	// MaxResultBytes bounds the JSON answer kept as the task's result (a
	// larger one succeeds without a result), at most 16 MiB. Default 65536
	// (64 KiB).
	MaxResultBytes int64 `toml:"max_result_bytes"`
	// Headers are sent with every request to URL; they may not set
	// Keel-*, Idempotency-Key, Content-Type or framing headers. Default
	// none.
	Headers map[string]string `toml:"headers"`
	// HeadersEnv are headers whose values are read from the named
	// environment variables, for secrets. Default none.
	HeadersEnv map[string]string `toml:"headers_env"`

	// Queue the type's tasks go to. Default "default".
	Queue string `toml:"queue"`
	// Priority of the type's tasks; larger runs first. Default 0.
	Priority int `toml:"priority"`
	// MaxAttempts of the type's tasks. Default engine.max_attempts.
	MaxAttempts int `toml:"max_attempts"`
	// Timeout of one attempt. Default engine.timeout.
	Timeout Duration `toml:"timeout"`
	// BackoffBase is the type's first retry delay; only for types with a
	// url. Default engine.backoff_base.
	BackoffBase Duration `toml:"backoff_base"`
	// BackoffMax caps the type's retry delay; only for types with a url.
	// Default engine.backoff_max.
	BackoffMax Duration `toml:"backoff_max"`

	// Concurrency caps the type's running tasks across every node of the
	// cluster, 0..10000; keel serve stores it as the type's runtime
	// setting when it starts (keel type set changes it until the next
	// start). Default 0 (no cap).
	Concurrency int `toml:"concurrency"`
	// Rate caps the type's task starts per second across the cluster, a
	// number up to 1000000; stored like Concurrency. Default 0 (none).
	Rate float64 `toml:"rate"`
	// Burst is the rate's bucket size, 0..1000000. Default 0 (max(1,
	// ceil(rate))).
	Burst int `toml:"burst"`
	// Ramp raises the type's concurrency step by step (keel.Ramp); keel
	// serve starts it unless the same ramp is stored already. Default
	// none.
	Ramp *Ramp `toml:"ramp"`

	// OnDead names a type (configured in [types]) of which one follow-up
	// task is enqueued, atomically, whenever a task of this type is
	// dead-lettered; its payload carries the dead task's id, type, queue,
	// attempt, last error and payload. It may not name the type itself; a
	// follow-up that dies gets no follow-up. Default "" (none).
	OnDead string `toml:"on_dead"`
	// Brake sets the type's automatic brake; only for types with a url.
	// Default: keel's (window 20, threshold 0.5, cooldown 30s).
	Brake TypeBrake `toml:"brake"`
}

// Ramp is [types."name".ramp]: a concurrency ramp (keel.Ramp).
type Ramp struct {
	// Steps are rising concurrencies, each 1..10000. Required.
	Steps []int `toml:"steps"`
	// Every is how long each step lasts, 1s..168h. Default "10m".
	Every Duration `toml:"every"`
	// MaxFailureRatio is the highest share of failed attempts (0..1) a
	// step may have and still advance. Default 0.2.
	MaxFailureRatio float64 `toml:"max_failure_ratio"`
	// MinAttempts must end before a step is judged. Default 20.
	MinAttempts int `toml:"min_attempts"`
}

// TypeBrake is a type's automatic brake ([types."x".brake]): when, of its
// last Window pieces of evidence (tasks' first failures and successes), the
// failed share reaches Threshold, its tasks are not claimed for Cooldown,
// then a trickle of probe tasks runs.
type TypeBrake struct {
	// Window is how many of the type's latest attempts are judged, 1..10000.
	// Default 20.
	Window int `toml:"window"`
	// Threshold is the failed share that opens the brake, in (0, 1].
	// Default 0.5.
	Threshold float64 `toml:"threshold"`
	// Cooldown is how long the brake stays open before a probe. Default
	// "30s".
	Cooldown Duration `toml:"cooldown"`
	// Off turns the brake off for the type. Default false.
	Off bool `toml:"off"`
}

// IsTarget reports whether the type is worked here (it has a url).
func (t Type) IsTarget() bool { return t.URL != "" }

// Defaults returns the configuration with every default and no file.
func Defaults() *Config {
	return &Config{
		Listen:          "127.0.0.1:7400",
		ShutdownTimeout: Duration(30 * time.Second),
		Database:        Database{DB: "./keel.db", Schema: "keel"},
		HTTP: HTTP{
			ReadHeaderTimeout: Duration(5 * time.Second),
			ReadTimeout:       Duration(30 * time.Second),
			WriteTimeout:      Duration(30 * time.Second),
			IdleTimeout:       Duration(120 * time.Second),
			MaxBodyBytes:      1<<20 + 64<<10,
			MaxBatch:          1000,
			Dashboard:         true,
		},
		Engine: Engine{
			MaxAttempts:       4,
			Timeout:           Duration(60 * time.Second),
			BackoffBase:       Duration(30 * time.Second),
			BackoffMax:        Duration(time.Hour),
			BackoffJitter:     0.2,
			LeaseTTL:          Duration(30 * time.Second),
			HeartbeatInterval: Duration(10 * time.Second),
			PollInterval:      Duration(time.Second),
			RescueInterval:    Duration(10 * time.Second),
			ReconcileInterval: Duration(5 * time.Minute),
			MaintainInterval:  Duration(time.Minute),
			HistoryRetention:  Duration(8 * 24 * time.Hour),
			SettingsInterval:  Duration(2 * time.Second),
			ClaimBatch:        100,
			TimeoutGrace:      Duration(5 * time.Second),
			MaxPayloadBytes:   1 << 20,
		},
		Retention: Retention{Dead: Duration(30 * 24 * time.Hour), Succeeded: Duration(30 * 24 * time.Hour),
			Interval: Duration(time.Minute)},
		Log: Log{Level: "info", Format: "text"},
		Alerts: Alerts{DeadPerHour: 3, OldestReadyAge: Duration(10 * time.Minute), FailureRatio: 0.5, FailureMinAttempts: 20,
			FailureWindow: Duration(5 * time.Minute), NoLiveWorker: true, NodeLost: true,
			Interval: Duration(15 * time.Second), RetryMax: Duration(5 * time.Minute)},
		Tracing: Tracing{ServiceName: "keel", SampleRatio: 1},
		Redis: Redis{Prefix: "keel:gate:", GateTTL: Duration(10 * time.Second), Timeout: Duration(50 * time.Millisecond),
			Wait: Duration(500 * time.Millisecond)},
		Queues:  map[string]Queue{DefaultQueue: {Workers: defaultWorkers, Prefetch: defaultWorkers / 4}},
		Types:   map[string]Type{},
		sources: map[string]Source{},
	}
}

// Defaults of the entries of [queues] and [types].
const (
	defaultWorkers        = 10
	defaultConnectTimeout = Duration(2 * time.Second)
	defaultReadTimeout    = Duration(10 * time.Second)
	defaultMaxResultBytes = 64 << 10
)

// WorkedQueues returns the queues this server works: those of its types
// with a url, with their workers.
func (c *Config) WorkedQueues() map[string]Queue {
	out := map[string]Queue{}
	for _, t := range c.Types {
		if t.IsTarget() {
			out[t.Queue] = c.Queues[t.Queue]
		}
	}
	return out
}
