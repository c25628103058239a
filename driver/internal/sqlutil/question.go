package sqlutil

// The statements SQLite and MySQL write alike ("?" placeholders, no
// schema). PostgreSQL numbers its placeholders and writes its own.

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
