package sqlutil

// The statements SQLite and MySQL write alike ("?" placeholders, no
// schema; PostgreSQL numbers its placeholders and writes its own), and the
// clauses SQLite and PostgreSQL write alike.

// Brakes (see BrakeSQL).
const (
	QListBrakes  = `SELECT ` + BrakeColumns + ` FROM keel_brakes ORDER BY type`
	QChangeBrake = `UPDATE keel_brakes SET state = ?, opened_at = ?, open_until = ?, probe_task_id = ?,
	probe_owner = ?, probe_at = ?, probe_attempt = ?, ratio = ?, attempts = ?, reason = ?, closed_at = ?, updated_at = ?
WHERE type = ? AND state IN (?, ?, ?) AND (? OR coalesce(probe_owner, '') = ?)`
	QSetBrakeConfig = `UPDATE keel_brakes SET cfg_window = ?, cfg_threshold = ?, cfg_cooldown_ms = ?, updated_at = ?
WHERE type = ?`
)

// Idempotent requests (see RequestSQL).
const (
	QFinishRequest = `UPDATE keel_idempotency SET state = 'done', status = ?, headers = ?, body = ?
WHERE scope = ? AND idem_key = ? AND owner = ? AND state = 'in_flight'`
	QReleaseRequest = `DELETE FROM keel_idempotency
WHERE scope = ? AND idem_key = ? AND owner = ? AND state = 'in_flight'`
	QPurgeRequests = `DELETE FROM keel_idempotency WHERE expires_at <= ?`
)

// Rejected messages and source reports (see SourceSQL, RejectedSQL).
const (
	QFindRejected     = `SELECT id FROM keel_rejected WHERE source = ? AND digest = ?`
	QGetRejected      = `SELECT ` + RejectedColumns + ` FROM keel_rejected WHERE id = ?`
	QResolveRejected  = `UPDATE keel_rejected SET resubmitted_at = ?, task_id = ? WHERE id = ? AND resubmitted_at IS NULL`
	QRejectedExists   = `SELECT count(*) FROM keel_rejected WHERE id = ?`
	QDeleteRejected   = `DELETE FROM keel_rejected WHERE id = ?`
	QListSourceReport = `SELECT ` + SourceColumns + ` FROM keel_sources ORDER BY source, node`
)

// UpsertTypeSet ends the type declaration's upsert where SQLite and
// PostgreSQL write it alike: each declaration replaces the type's row
// whole.
const UpsertTypeSet = `ON CONFLICT (name) DO UPDATE SET queue = excluded.queue, priority = excluded.priority,
	max_attempts = excluded.max_attempts, timeout_ms = excluded.timeout_ms,
	backoff_base_ms = excluded.backoff_base_ms,
	backoff_max_ms = excluded.backoff_max_ms, on_dead = excluded.on_dead, on_dead_hook = excluded.on_dead_hook,
	brake_window = excluded.brake_window, brake_threshold = excluded.brake_threshold,
	brake_cooldown_ms = excluded.brake_cooldown_ms,
	updated_at = excluded.updated_at`

// UpsertScheduleSet ends the schedule upsert's SET list where SQLite and
// PostgreSQL write it alike (last_tick, before it, differs).
const UpsertScheduleSet = `    spec = excluded.spec, time_zone = excluded.time_zone, type = excluded.type,
    queue = excluded.queue, payload = excluded.payload, priority = excluded.priority, missed = excluded.missed,
    updated_at = excluded.updated_at`
