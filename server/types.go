package server

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelq/keel/internal/shorten"
)

// The wire types of the v1 API. The CLI and tests decode responses into
// the same types, so a change here is a change of the API.

// Duration is a time.Duration written in JSON as a Go duration string
// ("1.5s", "2m", "1h30m").
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON accepts only a duration string such as "30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"30s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: use a form such as \"30s\" or \"5m\"", shorten.String(s, 64))
	}
	*d = Duration(v)
	return nil
}

// EnqueueRequest is the body of POST /v1/tasks and one item of a batch.
// Only Type is required; Payload defaults to {}. Queue, UniqueBy and
// IdempotencyKey may be absent but not empty; meta values must be strings.
type EnqueueRequest struct {
	Type        string            `json:"type"`
	Payload     json.RawMessage   `json:"payload,omitempty"`
	Queue       string            `json:"queue,omitempty" api:"nonempty"`
	Priority    *int              `json:"priority,omitempty"`
	RunAt       *time.Time        `json:"run_at,omitempty"`
	Delay       *Duration         `json:"delay,omitempty"`
	MaxAttempts *int              `json:"max_attempts,omitempty"`
	Timeout     *Duration         `json:"timeout,omitempty"`
	UniqueBy    string            `json:"unique_by,omitempty" api:"nonempty"`
	Meta        map[string]string `json:"meta,omitempty"`
	// IdempotencyKey is the caller's own key; for a single task the
	// Idempotency-Key header may carry it instead (both must then agree).
	IdempotencyKey string `json:"idempotency_key,omitempty" api:"nonempty"`
	// DependsOn are the ids of tasks this one waits for: it runs once they
	// have all succeeded and is cancelled if one dies or is cancelled.
	DependsOn []int64 `json:"depends_on,omitempty"`
	// Sequence puts the task in a sequence: tasks with the same key run one
	// at a time, in enqueue order. SequenceOnDead is "hold" (the default: a
	// dead member holds the rest) or "skip".
	Sequence       string     `json:"sequence,omitempty" api:"nonempty"`
	SequenceOnDead OnDeadRule `json:"sequence_on_dead,omitempty"`
}

// OnDeadRule says what a dead member does to its sequence: "hold" (the
// rest wait) or "skip" (the rest go on).
type OnDeadRule string

// UnmarshalJSON accepts "hold" and "skip" only.
func (r *OnDeadRule) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil || (s != "hold" && s != "skip") {
		return fmt.Errorf(`must be "hold" or "skip"`)
	}
	*r = OnDeadRule(s)
	return nil
}

// BatchRequest is the body of POST /v1/tasks/batch: all tasks are stored
// or none.
type BatchRequest struct {
	Tasks []EnqueueRequest `json:"tasks"`
}

// AttemptError is one failed attempt in a task's history.
type AttemptError struct {
	Attempt int       `json:"attempt"`
	Node    string    `json:"node,omitempty"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Outcome string    `json:"outcome"`
	Error   string    `json:"error"`
	Stack   string    `json:"stack,omitempty"`
}

// Task is a task as the API returns it.
type Task struct {
	ID          int64  `json:"id"`
	Type        string `json:"type"`
	Queue       string `json:"queue"`
	Priority    int    `json:"priority"`
	State       string `json:"state"`
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts"`
	// Snoozes counts the task's snoozes since it was enqueued or retried.
	Snoozes     int             `json:"snoozes"`
	Payload     json.RawMessage `json:"payload"`
	Result      json.RawMessage `json:"result,omitempty"`
	Errors      []AttemptError  `json:"errors"`
	Timeout     Duration        `json:"timeout"`
	RunAt       time.Time       `json:"run_at"`
	CreatedAt   time.Time       `json:"created_at"`
	StartedAt   *time.Time      `json:"started_at,omitempty"`
	AttemptedAt *time.Time      `json:"attempted_at,omitempty"`
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
	UpdatedAt   time.Time       `json:"updated_at"`
	// Node ran the current attempt (running) or the successful one.
	Node string          `json:"node,omitempty"`
	Meta json.RawMessage `json:"meta,omitempty"`
	// IdempotencyKey is the caller's own key, as given at enqueue.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// UniqueDigest is the key unique_by made: "u:" and the SHA-256 of the
	// type, the natural key and the canonical payload.
	UniqueDigest string `json:"unique_digest,omitempty"`
	// ETA is the estimated start of a pending task, when there is one.
	ETA *time.Time `json:"eta,omitempty"`
	// ETAFinish is the estimated end: ETA plus the type's mean run time.
	ETAFinish *time.Time `json:"eta_finish,omitempty"`
	// ETAStatus says what the estimate is: estimated, paused (the queue or
	// type is paused), braked (the type's automatic brake is open or half
	// open), no_worker (no live worker works the queue), waiting (held for
	// its turn in its sequence) or unknown (no
	// history yet); absent when the task is not pending.
	ETAStatus string `json:"eta_status,omitempty"`
	// BrakeState is, while ETAStatus is braked, the state of the type's
	// automatic brake: open (no task of the type starts before
	// NextProbeAt) or half_open (probe tasks run now).
	BrakeState string `json:"brake_state,omitempty"`
	// NextProbeAt is, while ETAStatus is braked, when the brake's next
	// probe tasks are due: an open brake's cooldown end, or for a half-open
	// brake, whose probes run now, the time of the answer.
	NextProbeAt *time.Time `json:"next_probe_at,omitempty"`
	// Duplicate is set on an enqueue answered with an existing task.
	Duplicate bool `json:"duplicate,omitempty"`
	// Archived is set for a task moved to the archive after its
	// retention, at ArchivedAt: still found by id, no longer listed,
	// requeued or cancelled, and holding no idempotency key.
	Archived   bool       `json:"archived,omitempty"`
	ArchivedAt *time.Time `json:"archived_at,omitempty"`
	// Steps are the task's finished durable steps, oldest first (keel.Step
	// in a Go handler, POST /v1/tasks/{id}/steps from an HTTP target).
	Steps []Step `json:"steps,omitempty"`
	// BatchID is the batch the task is a member of (POST /v1/batches);
	// absent for a task of no batch.
	BatchID int64 `json:"batch_id,omitempty"`
	// Sequence is the task's sequence key; Held is set while the task
	// waits for its turn (run_at is then 9999-12-31T23:59:59Z).
	Sequence string `json:"sequence,omitempty"`
	Held     bool   `json:"held,omitempty"`
}

// BatchResponse answers POST /v1/tasks/batch, in request order.
type BatchResponse struct {
	Tasks []Task `json:"tasks"`
}

// TaskList answers GET /v1/tasks and GET /v1/dead, newest first. Pass
// NextCursor as ?cursor= for the next page; it is empty on the last one.
type TaskList struct {
	Tasks      []Task `json:"tasks"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// BulkRequest selects dead letters for POST /v1/dead/requeue and
// POST /v1/dead/purge. State defaults to "dead" ("cancelled" is allowed).
// Limit (default 1000, at most 10000) caps one call; call again until
// Count is 0.
type BulkRequest struct {
	State          string     `json:"state,omitempty"`
	Type           string     `json:"type,omitempty"`
	Queue          string     `json:"queue,omitempty"`
	FinishedAfter  *time.Time `json:"finished_after,omitempty"`
	FinishedBefore *time.Time `json:"finished_before,omitempty"`
	Limit          int        `json:"limit,omitempty"`
	// IDs, when set, restricts the call to these tasks (at most 1000).
	IDs []int64 `json:"ids,omitempty"`
}

// BulkResponse says how many tasks a bulk call changed.
type BulkResponse struct {
	Count int64 `json:"count"`
}

// Queue is one queue with its counts by state and runtime settings.
type Queue struct {
	Name        string           `json:"name"`
	Counts      map[string]int64 `json:"counts"`
	Paused      bool             `json:"paused"`
	Concurrency int              `json:"concurrency,omitempty"`
	Rate        float64          `json:"rate,omitempty"`
	Burst       int              `json:"burst,omitempty"`
	UpdatedAt   *time.Time       `json:"updated_at,omitempty"`
	// Warnings, in the answer to a change, say what of it has no effect:
	// a concurrency above the workers this node runs for the queue.
	Warnings []string `json:"warnings,omitempty"`
}

// QueueList answers GET /v1/queues.
type QueueList struct {
	Queues []Queue `json:"queues"`
}

// QueuePatch is the body of PATCH /v1/queues/{name}; absent fields keep
// their value. Concurrency 0 clears the cap (cluster-wide), rate 0 the
// rate limit; burst 0 is the default bucket, max(1, ceil(rate)).
type QueuePatch struct {
	Paused      *bool    `json:"paused,omitempty"`
	Concurrency *int     `json:"concurrency,omitempty"`
	Rate        *float64 `json:"rate,omitempty"`
	Burst       *int     `json:"burst,omitempty"`
}

// TaskType is one task type with its counts and runtime settings.
type TaskType struct {
	Name        string           `json:"name"`
	Counts      map[string]int64 `json:"counts"`
	Paused      bool             `json:"paused"`
	Concurrency int              `json:"concurrency,omitempty"`
	Rate        float64          `json:"rate,omitempty"`
	Burst       int              `json:"burst,omitempty"`
	Timeout     *Duration        `json:"timeout,omitempty"`
	MaxAttempts int              `json:"max_attempts,omitempty"`
	BackoffBase *Duration        `json:"backoff_base,omitempty"`
	BackoffMax  *Duration        `json:"backoff_max,omitempty"`
	UpdatedAt   *time.Time       `json:"updated_at,omitempty"`
	// Ramp is the type's concurrency ramp, absent when it never had one.
	Ramp *RampInfo `json:"ramp,omitempty"`
	// OnDead is the declared on_dead follow-up type.
	OnDead string `json:"on_dead,omitempty"`
	// Brake is the type's automatic brake (state closed when it never
	// opened).
	Brake Brake `json:"brake"`
	// Warnings, in the answer to a change, say what of it has no effect:
	// a concurrency above the workers this node runs in all its queues.
	Warnings []string `json:"warnings,omitempty"`
}

// TypeList answers GET /v1/types.
type TypeList struct {
	Types []TaskType `json:"types"`
}

// TypePatch is the body of PATCH /v1/types/{name}; absent fields keep
// their value, "0s" or 0 clears an override (Concurrency 0 clears the cap).
type TypePatch struct {
	Paused      *bool     `json:"paused,omitempty"`
	Concurrency *int      `json:"concurrency,omitempty"`
	Rate        *float64  `json:"rate,omitempty"`
	Burst       *int      `json:"burst,omitempty"`
	Timeout     *Duration `json:"timeout,omitempty"`
	MaxAttempts *int      `json:"max_attempts,omitempty"`
	BackoffBase *Duration `json:"backoff_base,omitempty"`
	BackoffMax  *Duration `json:"backoff_max,omitempty"`
}

// Rates are tasks finished per second over the last 1, 5 and 15 minutes,
// counted over the time there was work.
type Rates struct {
	M1  float64 `json:"1m"`
	M5  float64 `json:"5m"`
	M15 float64 `json:"15m"`
}

// TypeStats is one task type of a queue in Stats.
type TypeStats struct {
	Name string `json:"name"`
	// Views: ready, scheduled, retrying, running, dead.
	Views            map[string]int64 `json:"views"`
	Counts           map[string]int64 `json:"counts"`
	Rates            Rates            `json:"rates"`
	OldestReadyAge   Duration         `json:"oldest_ready_age"`
	MeanDuration     Duration         `json:"mean_duration"`
	TimeToDrain      Duration         `json:"time_to_drain"`
	DeadLastHour     int64            `json:"dead_last_hour"`
	FailedLastHour   int64            `json:"failed_last_hour"`
	AttemptsLastHour int64            `json:"attempts_last_hour"`
	Paused           bool             `json:"paused"`
	// Braked: the type's automatic brake is open or half open.
	Braked bool `json:"braked"`
}

// QueueStats is one queue in Stats.
type QueueStats struct {
	Name           string           `json:"name"`
	Counts         map[string]int64 `json:"counts"`
	Views          map[string]int64 `json:"views"`
	Rates          Rates            `json:"rates"`
	PerSecond      float64          `json:"per_second"` // rates.5m
	OldestReadyAge Duration         `json:"oldest_ready_age"`
	TimeToDrain    Duration         `json:"time_to_drain"`
	DeadLastHour   int64            `json:"dead_last_hour"`
	Paused         bool             `json:"paused"`
	// Served: a live worker process works the queue.
	Served bool        `json:"served"`
	Types  []TypeStats `json:"types"`
}

// Stats answers GET /v1/stats.
type Stats struct {
	At           time.Time        `json:"at"`
	Counts       map[string]int64 `json:"counts"`
	Queues       []QueueStats     `json:"queues"`
	DeadLastHour int64            `json:"dead_last_hour"`
	Alert        bool             `json:"alert"`
	Firing       map[string]int   `json:"firing"`
	Nodes        int              `json:"nodes"`
	// Sources are the broker sources' latest reports, by name then node.
	Sources []SourceRecord `json:"sources"`
	// Keel is keel's own work, counted in none of the figures above.
	Keel KeelStats `json:"keel"`
}

// KeelStats is keel's own work in Stats: its queue "keel" (alert
// deliveries, on_dead hooks, the drill).
type KeelStats struct {
	Queue QueueStats `json:"queue"`
	// HitsLastHour and FailedLastHour count its idempotency hits and
	// failed attempts of the last hour.
	HitsLastHour   int64 `json:"hits_last_hour"`
	FailedLastHour int64 `json:"failed_last_hour"`
	// DeliveriesFailing counts alert deliveries waiting to retry after a
	// failed attempt, DeliveriesDead those given up.
	DeliveriesFailing int64 `json:"deliveries_failing"`
	DeliveriesDead    int64 `json:"deliveries_dead"`
}

// Problem is an error body (RFC 9457, application/problem+json).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Node is one worker process in the node registry (GET /v1/nodes).
type Node struct {
	Name        string    `json:"name"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	Queues      []string  `json:"queues"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// Workers is how many tasks of each queue the node runs at once.
	Workers map[string]int `json:"workers"`
	// Version is the keel version it runs ("" when unknown); Running how
	// many tasks it ran at its last heartbeat.
	Version string `json:"version"`
	Running int    `json:"running"`
	// Lost: no heartbeat for three heartbeat intervals (at least 30s).
	Lost bool `json:"lost"`
}

// NodeList answers GET /v1/nodes, ordered by name.
type NodeList struct {
	Nodes []Node `json:"nodes"`
}

// Pool is the server process's connection pool to the database: its
// driver's driver.PoolStats.
type Pool struct {
	// InUse is how many connections are lent out now.
	InUse int `json:"in_use"`
	// Idle is how many open connections wait in the pool.
	Idle int `json:"idle"`
	// Max is the pool's limit.
	Max int `json:"max"`
	// WaitCount is how many times a caller waited for a connection since
	// the server started.
	WaitCount int64 `json:"wait_count"`
	// WaitDuration is the total time callers waited for a connection.
	WaitDuration Duration `json:"wait_duration"`
	// MaxSetting says where Max is set.
	MaxSetting string `json:"max_setting"`
}

// System answers GET /v1/system: facts about this server process, and
// the last keel chaos run recorded in its database.
type System struct {
	// Pool is absent when the driver does not report its pool.
	Pool *Pool `json:"pool,omitempty"`
	// Chaos is absent when no keel chaos run is recorded (or the record
	// could not be read at once).
	Chaos *ChaosRun `json:"chaos,omitempty"`
}

// ChaosRun is the last keel chaos run recorded in the database's
// keel_meta: when it ended, its verdict, and its scenarios.
type ChaosRun struct {
	At time.Time `json:"at"`
	// Verdict is "pass" when no scenario failed, else "fail".
	Verdict string `json:"verdict"`
	// Database is the kind of database it ran on: sqlite, postgres or
	// mariadb.
	Database  string   `json:"database"`
	Scenarios []string `json:"scenarios"`
	Failed    []string `json:"failed,omitempty"`
	Skipped   []string `json:"skipped,omitempty"`
	Version   string   `json:"version,omitempty"`
}

// Health answers GET /healthz and a ready GET /readyz: {"status":"ok"}.
type Health struct {
	Status string `json:"status"`
}

// RampRequest is the body of PUT /v1/types/{name}/ramp: it starts (or
// restarts) the type's concurrency ramp at its first step. Absent fields
// take their defaults: every 10m, max_failure_ratio 0.2, min_attempts 20.
type RampRequest struct {
	Steps           []int     `json:"steps"`
	Every           *Duration `json:"every,omitempty"`
	MaxFailureRatio *float64  `json:"max_failure_ratio,omitempty"`
	MinAttempts     *int      `json:"min_attempts,omitempty"`
}

// RampInfo is a type's concurrency ramp and where it stands.
type RampInfo struct {
	Type            string     `json:"type"`
	Steps           []int      `json:"steps"`
	Every           Duration   `json:"every"`
	MaxFailureRatio float64    `json:"max_failure_ratio"`
	MinAttempts     int        `json:"min_attempts"`
	Step            int        `json:"step"` // 1-based: Steps[Step-1] is set now
	Concurrency     int        `json:"concurrency"`
	State           string     `json:"state"` // running, done or stopped
	Reason          string     `json:"reason,omitempty"`
	Note            string     `json:"note,omitempty"`
	StepAt          time.Time  `json:"step_at"`
	NextAt          *time.Time `json:"next_at,omitempty"`
	StartedAt       time.Time  `json:"started_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
}
