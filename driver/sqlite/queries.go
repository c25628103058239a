package sqlite

import (
	"strings"

	"github.com/keelq/keel/driver/internal/sqlutil"
)

// All of the driver's SQL lives in this file. Times are Unix microseconds
// from the engine's clock.

const taskColumns = `id, queue, type, priority, payload, state, attempt, max_attempts, fence, run_at, timeout_ms,
	idem_key, payload_digest, lease_owner, lease_expires_at, created_at, started_at, attempted_at,
	finished_at, updated_at, errors, result, meta, snoozes, steps, batch_id, seq_key`

// sqlNextID is the id above every id in keel_tasks and keel_archive (two
// seeks to the end of a primary key): SQLite would otherwise reuse the id
// of an archived task that had the highest id. insert gives its rows the
// ids from there on, in the writer's transaction, which holds the write
// lock.
const sqlNextID = `SELECT coalesce(max(m), 0) + 1 FROM (SELECT max(id) AS m FROM keel_tasks UNION ALL SELECT max(id) FROM keel_archive)`

// The multi-row insert: sqlInsertHead, then insertRow once per task, then
// sqlInsertTail. A row whose idempotency key is held is skipped, and only
// the ids of the rows written come back; the rest of each row is what was
// inserted (insertedRow).
const (
	sqlInsertHead = `INSERT INTO keel_tasks (id, queue, type, priority, payload, state, max_attempts, run_at,
	timeout_ms, idem_key, payload_digest, created_at, updated_at, meta) VALUES `
	insertRow     = `(?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsertTail = ` ON CONFLICT DO NOTHING RETURNING id`
	insertArgs    = 13 // placeholders in insertRow
)

// maxInsertLog: an insert statement carries 1, 2, 4, … up to
// 1<<maxInsertLog rows, so that nine texts, each prepared once, serve
// every batch size (3,328 placeholders at most, far under SQLite's 32,766).
const maxInsertLog = 8

// insertSQL[k] inserts 1<<k rows.
var insertSQL = func() (out [maxInsertLog + 1]string) {
	for k := range out {
		out[k] = sqlInsertHead + strings.TrimSuffix(strings.Repeat(insertRow+", ", 1<<k), ", ") + sqlInsertTail
	}
	return out
}()

// sqlByKey reads the task holding key ? on keel_tasks_idem (Insert,
// GetByKey).
const sqlByKey = `SELECT ` + taskColumns + ` FROM keel_tasks INDEXED BY keel_tasks_idem
WHERE idem_key = ? AND state IN ('pending', 'running', 'succeeded')`

// claimColumns are what a worker needs to run a task; fewer columns than
// taskColumns keep the claim cheap.
const claimColumns = `id, type, priority, payload, attempt, max_attempts, fence, run_at, timeout_ms, created_at, snoozes, meta,
	coalesce(seq_key, '')`

// The claim, one statement for each of its type filters (one at most, see
// sqlutil.ClaimTypes): none, the types to take (?6, a JSON array) or the
// paused types to skip (?6, a JSON array). A claim that filters nothing
// pays nothing for the filters.
const (
	sqlClaim      = sqlClaimHead + sqlClaimTail
	sqlClaimTypes = sqlClaimHead + `
		AND type IN (SELECT value FROM json_each(?6))` + sqlClaimTail
	sqlClaimExcluding = sqlClaimHead + `
		AND type NOT IN (SELECT value FROM json_each(?6))` + sqlClaimTail
	// A half-open brake's probes: due retries of the types, the most
	// attempted first (ClaimParams.Retried).
	sqlClaimRetried = sqlClaimHead + `
		AND type IN (SELECT value FROM json_each(?6)) AND attempt > 0
	ORDER BY priority DESC, attempt DESC, run_at, id
	LIMIT ?5 + 0)
RETURNING ` + claimColumns
)

const sqlClaimHead = `UPDATE keel_tasks
SET state = 'running', attempt = attempt + 1, fence = fence + 1, lease_owner = ?1, lease_expires_at = ?2,
	attempted_at = ?3, started_at = coalesce(started_at, ?3), updated_at = ?3
WHERE id IN (
	SELECT id FROM keel_tasks
	WHERE state = 'pending' AND queue = ?4 AND run_at <= ?3`

// The limit is written ?5 + 0, not ?5: SQLite (3.46 on) plans a LIMIT
// that is a bare parameter with its bound value and so marks the statement
// to be compiled again whenever ?5 is bound, which cost a claim of 16
// tasks a fifth of its time. The plan is the claim index's order either
// way (TestClaimPlan).
const sqlClaimTail = `
	ORDER BY priority DESC, run_at, id
	LIMIT ?5 + 0)
RETURNING ` + claimColumns

// sqlSucceedMany finishes a batch of successes without results in one
// statement. ?2 is a JSON array of task ids, ?3 a JSON array of [id, fence]
// pairs: each row is found by its primary key and fenced by one lookup in a
// set built once. A success keeps lease_owner: the node that ran it.
const sqlSucceedMany = `UPDATE keel_tasks
SET state = 'succeeded', finished_at = ?1, updated_at = ?1, lease_expires_at = NULL
WHERE id IN (SELECT value FROM json_each(?2))
	AND (id, fence) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?3))
	AND state = 'running' AND lease_owner = ?4
RETURNING id`

// appendError appends ?-bound JSON to errors, keeping the last 20 entries.
const appendError = `CASE WHEN ?5 IS NULL THEN errors ELSE json_insert(
	CASE WHEN json_array_length(errors) >= 20 THEN json_remove(errors, '$[0]') ELSE errors END,
	'$[#]', json(?5)) END`

// sqlTransition moves one running task on; a success keeps lease_owner
// (the node that ran it), every other state clears it.
const sqlTransition = `UPDATE keel_tasks
SET state = ?1, run_at = coalesce(?2, run_at), result = coalesce(?3, result),
	attempt = attempt - ?4, snoozes = snoozes + ?10, errors = ` + appendError + `,
	finished_at = CASE WHEN ?1 IN ('succeeded', 'dead') THEN ?6 ELSE NULL END,
	lease_owner = CASE WHEN ?1 = 'succeeded' THEN lease_owner END, lease_expires_at = NULL, updated_at = ?6
WHERE id = ?7 AND fence = ?8 AND state = 'running' AND lease_owner = ?9`

const sqlHeartbeat = `UPDATE keel_tasks SET lease_expires_at = ?1, updated_at = ?2
WHERE id IN (SELECT value FROM json_each(?3)) AND state = 'running' AND lease_owner = ?4
RETURNING id`

const sqlExpired = `SELECT id, queue, type, priority, attempt, max_attempts, fence, run_at, lease_owner,
	lease_expires_at, attempted_at
FROM keel_tasks
WHERE state = 'running' AND lease_expires_at < ? ORDER BY lease_expires_at LIMIT ? + 0`

// sqlLockExpired keeps, of the tasks the rescuer decided on, those still
// running with an expired lease (the single writer needs no row locks).
const sqlLockExpired = `SELECT id FROM keel_tasks
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'running' AND lease_expires_at < ?2`

const sqlGet = `SELECT ` + taskColumns + ` FROM keel_tasks WHERE id = ?`

// sqlClaimed is the tasks of a queue running under an owner with a live
// lease.
const sqlClaimed = `SELECT ` + taskColumns + ` FROM keel_tasks
WHERE state = 'running' AND lease_owner = ?1 AND queue = ?2 AND lease_expires_at > ?3
ORDER BY id
LIMIT ?4`

// sqlGetArchived reads an archived task (migration 006).
const sqlGetArchived = `SELECT ` + taskColumns + `, archived_at FROM keel_archive WHERE id = ?`

const sqlKeyOf = `SELECT idem_key FROM keel_tasks WHERE id = ?`

const sqlList = `SELECT ` + taskColumns + ` FROM keel_tasks`

// sqlCancel cancels a pending or running task; ?3, when not NULL, is the
// running attempt's entry for the history (sqlutil.CancelledAttempt).
const sqlCancel = `UPDATE keel_tasks
SET state = 'cancelled', finished_at = ?1, updated_at = ?1, lease_owner = NULL, lease_expires_at = NULL,
	errors = CASE WHEN ?3 IS NULL OR state <> 'running' THEN errors ELSE json_insert(
		CASE WHEN json_array_length(errors) >= 20 THEN json_remove(errors, '$[0]') ELSE errors END,
		'$[#]', json(?3)) END
WHERE id = ?2 AND state IN ('pending', 'running')
RETURNING ` + taskColumns

const sqlKeyHeld = `SELECT count(*) FROM keel_tasks
WHERE idem_key = ? AND id <> ? AND state IN ('pending', 'running', 'succeeded')`

const sqlRetry = `UPDATE keel_tasks
SET state = 'pending', attempt = 0, snoozes = 0, run_at = ?1, finished_at = NULL, updated_at = ?1
WHERE id = ?2 AND state IN ('dead', 'cancelled')
RETURNING ` + taskColumns

// sqlCounts reads the live counters (migration 005).
const sqlCounts = `SELECT queue, type, kind, priority, due, sum(n) FROM keel_counts
GROUP BY queue, type, kind, priority, due HAVING sum(n) <> 0
ORDER BY queue, type, kind, priority, due`

// sqlTrueCounts counts keel_tasks the way the live counters do; only
// Reconcile runs it.
const sqlTrueCounts = `SELECT queue, type, CASE WHEN state = 'pending' AND attempt > 0 THEN 'retrying' ELSE state END,
	CASE WHEN state = 'pending' THEN priority ELSE 0 END,
	CASE WHEN state = 'pending' THEN run_at / 60000000 ELSE 0 END, count(*)
FROM keel_tasks GROUP BY 1, 2, 3, 4, 5`

// sqlCountUpsert adds to counters; {rows} is a list of (?, ?, ?, ?, ?, 0, ?).
const sqlCountUpsert = `INSERT INTO keel_counts (queue, type, kind, priority, due, shard, n) VALUES {rows}
ON CONFLICT (queue, type, kind, priority, due, shard) DO UPDATE SET n = n + excluded.n`

const countRow = `(?, ?, ?, ?, ?, 0, ?)`

const minuteColumns = `minute, queue, type, enqueued, hits, attempts, ended, failed, succeeded, dead, cancelled,
	duration_ms, first_ms, last_ms`

// sqlMinuteUpsert adds to history rows; {rows} is a list of minuteRow.
const sqlMinuteUpsert = `INSERT INTO keel_minutes (shard, ` + minuteColumns + `) VALUES {rows}
ON CONFLICT (minute, queue, type, shard) DO UPDATE SET enqueued = enqueued + excluded.enqueued,
	hits = hits + excluded.hits, attempts = attempts + excluded.attempts, ended = ended + excluded.ended,
	failed = failed + excluded.failed, succeeded = succeeded + excluded.succeeded, dead = dead + excluded.dead,
	cancelled = cancelled + excluded.cancelled, duration_ms = duration_ms + excluded.duration_ms,
	first_ms = CASE WHEN first_ms = 0 OR (excluded.first_ms <> 0 AND excluded.first_ms < first_ms)
		THEN excluded.first_ms ELSE first_ms END,
	last_ms = max(last_ms, excluded.last_ms)`

const minuteRow = `(0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// sqlMinutes reads the history from minute ? on.
const sqlMinutes = `SELECT minute, queue, type, sum(enqueued), sum(hits), sum(attempts), sum(ended), sum(failed),
	sum(succeeded), sum(dead), sum(cancelled), sum(duration_ms), coalesce(min(nullif(first_ms, 0)), 0), max(last_ms)
FROM keel_minutes WHERE minute >= ?
GROUP BY minute, queue, type ORDER BY minute, queue, type`

const (
	sqlDropZeroCounts = `DELETE FROM keel_counts WHERE n = 0`
	sqlDropMinutes    = `DELETE FROM keel_minutes WHERE minute < ?`
)

// sqlCountedRows reads what the counters need of the tasks with the ids in
// the JSON array ?1 that are running: transitions whose caller did not
// describe the task.
const sqlCountedRows = `SELECT id, queue, type, priority, attempt, run_at, attempted_at FROM keel_tasks
WHERE id IN (SELECT value FROM json_each(?1)) AND state = 'running'`

// sqlCountAhead counts, on the claim index, at most ?7 ready tasks of
// queue ?1 and priority ?2 a claim takes before run_at ?3, id ?4 at now ?5,
// from run_at ?6 on.
const sqlCountAhead = `SELECT count(*) FROM (SELECT 1 FROM keel_tasks
WHERE state = 'pending' AND queue = ?1 AND priority = ?2 AND run_at <= ?5 AND run_at >= ?6
	AND (run_at < ?3 OR (run_at = ?3 AND id < ?4))
LIMIT ?7)`

// matchWhere selects the tasks of a bulk operation: state ?1 (dead or
// cancelled; the literal list lets the planner use keel_tasks_failed), and
// type ?2, queue ?3, finished_at from ?4 and before ?5 where not NULL.
const matchWhere = `state IN ('dead', 'cancelled') AND state = ?1
		AND (?2 IS NULL OR type = ?2) AND (?3 IS NULL OR queue = ?3)
		AND (?4 IS NULL OR finished_at >= ?4) AND (?5 IS NULL OR finished_at < ?5)`

// sqlRetryMatching is Retry (same columns) for the first ?6 matching tasks
// at now ?7. A task whose key another task holds is skipped, and of tasks
// sharing a key only the lowest id is taken, so the unique index never
// fails the batch.
const sqlRetryMatching = `UPDATE keel_tasks
SET state = 'pending', attempt = 0, snoozes = 0, run_at = ?7, finished_at = NULL, updated_at = ?7
WHERE id IN (
	WITH c AS (
		SELECT id, idem_key FROM keel_tasks k
		WHERE ` + matchWhere + `
			AND (idem_key IS NULL OR NOT EXISTS (SELECT 1 FROM keel_tasks h
				WHERE h.idem_key = k.idem_key AND h.state IN ('pending', 'running', 'succeeded')))
		ORDER BY id
		LIMIT ?6)
	SELECT id FROM c WHERE idem_key IS NULL
	UNION ALL
	SELECT min(id) FROM c WHERE idem_key IS NOT NULL GROUP BY idem_key)
RETURNING queue, type, priority`

// sqlPurgeMatching deletes the first ?6 matching tasks.
const sqlPurgeMatching = `DELETE FROM keel_tasks
WHERE id IN (
	SELECT id FROM keel_tasks
	WHERE ` + matchWhere + `
	ORDER BY id
	LIMIT ?6)
RETURNING queue, type`

// sqlRetryMatchingIDs and sqlPurgeMatchingIDs are the bulk operations
// restricted to the ids in the JSON array ?8 (retry) or ?7 (purge), read
// by primary key.
const (
	sqlRetryMatchingIDs = `UPDATE keel_tasks
SET state = 'pending', attempt = 0, snoozes = 0, run_at = ?7, finished_at = NULL, updated_at = ?7
WHERE id IN (
	WITH c AS (
		SELECT id, idem_key FROM keel_tasks k
		WHERE id IN (SELECT value FROM json_each(?8)) AND ` + matchWhere + `
			AND (idem_key IS NULL OR NOT EXISTS (SELECT 1 FROM keel_tasks h
				WHERE h.idem_key = k.idem_key AND h.state IN ('pending', 'running', 'succeeded')))
		ORDER BY id
		LIMIT ?6)
	SELECT id FROM c WHERE idem_key IS NULL
	UNION ALL
	SELECT min(id) FROM c WHERE idem_key IS NOT NULL GROUP BY idem_key)
RETURNING queue, type, priority`
	sqlPurgeMatchingIDs = `DELETE FROM keel_tasks
WHERE id IN (
	SELECT id FROM keel_tasks
	WHERE id IN (SELECT value FROM json_each(?7)) AND ` + matchWhere + `
	ORDER BY id
	LIMIT ?6)
RETURNING queue, type`
)

// sqlRecentFinished reads the newest ?2 succeeded and dead tasks that
// finished at or after ?1, newest first, backwards along
// keel_tasks_finished: ?2 index entries and rows, whatever the table's
// size.
const sqlRecentFinished = `SELECT id, queue, type, state, attempt, created_at, run_at, attempted_at, finished_at
FROM keel_tasks INDEXED BY keel_tasks_finished
WHERE state IN ('succeeded', 'dead') AND finished_at >= ?1
ORDER BY finished_at DESC
LIMIT ?2`

// Archival (migration 006). Each pick reads the oldest finished tasks of
// one state by finish time on an index: keel_tasks_finished for succeeded
// and dead (the literal list lets the planner use the partial index; it
// skips, in the index, dead rows newer than their cutoff), and
// keel_tasks_cancelled. ?1 is the cutoff, ?2 the limit.
const (
	sqlArchivePickSucceeded = `SELECT id, queue, type FROM keel_tasks INDEXED BY keel_tasks_finished
WHERE state IN ('succeeded', 'dead') AND state = 'succeeded' AND finished_at < ?1
ORDER BY finished_at LIMIT ?2`
	sqlArchivePickDead = `SELECT id, queue, type FROM keel_tasks INDEXED BY keel_tasks_finished
WHERE state IN ('succeeded', 'dead') AND state = 'dead' AND finished_at < ?1
ORDER BY finished_at LIMIT ?2`
	sqlArchivePickCancelled = `SELECT id, queue, type FROM keel_tasks INDEXED BY keel_tasks_cancelled
WHERE state = 'cancelled' AND finished_at < ?1
ORDER BY finished_at LIMIT ?2`
)

// sqlArchiveCopy copies the tasks with the ids in the JSON array ?1 to
// keel_archive, archived at ?2; sqlArchiveDelete then deletes them.
const (
	sqlArchiveCopy = `INSERT INTO keel_archive (` + taskColumns + `, archived_at)
SELECT ` + taskColumns + `, ?2 FROM keel_tasks WHERE id IN (SELECT value FROM json_each(?1))`
	sqlArchiveDelete = `DELETE FROM keel_tasks WHERE id IN (SELECT value FROM json_each(?1))`
)

// sqlPurgeArchive deletes the ?2 oldest rows of keel_archive archived
// before ?1.
const sqlPurgeArchive = `DELETE FROM keel_archive WHERE id IN (
	SELECT id FROM keel_archive WHERE archived_at < ?1 ORDER BY archived_at LIMIT ?2)`

const settingColumns = `kind, name, paused, concurrency, timeout_ms, max_attempts, backoff_base_ms,
	backoff_max_ms, updated_at, rate, burst`

// sqlPatchSetting upserts one setting in one statement: a NULL argument
// keeps the stored value (0 on a new row).
const sqlPatchSetting = `INSERT INTO keel_settings (` + settingColumns + `)
VALUES (?1, ?2, coalesce(?3, 0), coalesce(?4, 0), coalesce(?5, 0), coalesce(?6, 0), coalesce(?7, 0),
	coalesce(?8, 0), ?9, coalesce(?10, 0), coalesce(?11, 0))
ON CONFLICT (kind, name) DO UPDATE SET paused = coalesce(?3, paused), concurrency = coalesce(?4, concurrency),
	timeout_ms = coalesce(?5, timeout_ms), max_attempts = coalesce(?6, max_attempts),
	backoff_base_ms = coalesce(?7, backoff_base_ms), backoff_max_ms = coalesce(?8, backoff_max_ms),
	rate = coalesce(?10, rate), burst = coalesce(?11, burst),
	tokens_at = CASE WHEN ?10 IS NULL AND ?11 IS NULL THEN tokens_at END,
	updated_at = ?9
RETURNING ` + settingColumns

// A limited claim (migration 009): the limit's row, and the running tasks
// of a type or a queue through keel_tasks_lease. The writer's transaction
// is BEGIN IMMEDIATE: it holds the database's write lock from its start,
// against every other process too, so nothing changes between the count
// and the claim.
const (
	sqlLimitRow = `SELECT concurrency, rate, burst, tokens, tokens_at FROM keel_settings
WHERE kind = ?1 AND name = ?2`
	sqlRunningOfType  = `SELECT count(*) FROM keel_tasks WHERE state = 'running' AND type = ?1`
	sqlRunningOfQueue = `SELECT count(*) FROM keel_tasks WHERE state = 'running' AND queue = ?1`
	sqlSpendTokens    = `UPDATE keel_settings SET tokens = ?3, tokens_at = ?4 WHERE kind = ?1 AND name = ?2`
)

const sqlListSettings = `SELECT ` + settingColumns + ` FROM keel_settings ORDER BY kind, name`

// The declared defaults of task types (keel_types, migration 004): each
// declaration replaces the type's row whole.
const typeColumns = `name, queue, priority, max_attempts, timeout_ms, backoff_base_ms, backoff_max_ms, on_dead, on_dead_hook,
	brake_window, brake_threshold, brake_cooldown_ms, updated_at`

const sqlDeclareType = `INSERT INTO keel_types (` + typeColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
` + sqlutil.UpsertTypeSet

const sqlListTypes = `SELECT ` + typeColumns + ` FROM keel_types ORDER BY name`

// sqlListTypesNamed reads the types named in ? (a JSON array).
const sqlListTypesNamed = `SELECT ` + typeColumns + ` FROM keel_types
WHERE name IN (SELECT value FROM json_each(?)) ORDER BY name`

const sqlLead = `INSERT INTO keel_leaders (name, owner, expires_at) VALUES (?1, ?2, ?3)
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE keel_leaders.owner = excluded.owner OR keel_leaders.expires_at < ?4
RETURNING owner`

const sqlResign = `DELETE FROM keel_leaders WHERE name = ? AND owner = ?`

// The node registry (keel_nodes, migration 002).

const sqlRegisterNode = `INSERT INTO keel_nodes (name, host, pid, queues, started_at, heartbeat_at, workers, version, running)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
	started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, workers = excluded.workers,
	version = excluded.version, running = excluded.running`

const sqlListNodes = `SELECT name, host, pid, queues, started_at, heartbeat_at, workers, version, running FROM keel_nodes ORDER BY name`

const sqlRemoveNode = `DELETE FROM keel_nodes WHERE name = ?`

const sqlPruneNodes = `DELETE FROM keel_nodes WHERE heartbeat_at < ?`

// sqlPruneSourceReports deletes the reports (migration 014) not refreshed
// since ?1 of sources on nodes without a heartbeat since ?1 either: a
// source whose process died. A live node's stopped source keeps its last
// report.
const sqlPruneSourceReports = `DELETE FROM keel_sources
WHERE updated_at < ?1 AND node NOT IN (SELECT name FROM keel_nodes WHERE heartbeat_at >= ?1)`

// Alerts, their deliveries and stored documents (keel_alerts,
// keel_alert_deliveries, keel_meta, migration 006). Times are the leader's.

const alertColumns = sqlutil.AlertColumns

// sqlFireAlert opens an alert unless one of its rule and subject is open:
// the unique open_key decides, and a conflict returns no row.
const sqlFireAlert = `INSERT INTO keel_alerts (rule, subject, open_key, message, hint, vals, fired_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (open_key) DO NOTHING
RETURNING ` + alertColumns

const sqlOpenAlert = `SELECT ` + alertColumns + ` FROM keel_alerts WHERE open_key = ?`

const sqlGetAlert = `SELECT ` + alertColumns + ` FROM keel_alerts WHERE id = ?`

const sqlListAlerts = `SELECT ` + alertColumns + ` FROM keel_alerts`

// sqlUpdateAlert records the latest message and values of alert ?4 if it
// is open.
const sqlUpdateAlert = `UPDATE keel_alerts SET current_message = ?1, current_vals = ?2, current_at = ?3
WHERE id = ?4 AND open_key IS NOT NULL`

// sqlResolveAlert resolves alert ?4 if it is open.
const sqlResolveAlert = `UPDATE keel_alerts SET open_key = NULL, resolved_at = ?1, resolved_message = ?2, resolved_vals = ?3
WHERE id = ?4 AND open_key IS NOT NULL`

// sqlDeliveries reads the deliveries of the alerts in ? (a JSON array).
const sqlDeliveries = `SELECT ` + sqlutil.DeliveryColumns + ` FROM keel_alert_deliveries
WHERE alert_id IN (SELECT value FROM json_each(?)) ORDER BY alert_id, event, notifier`

// sqlRecordDelivery counts one attempt of alert ?1's event ?2 to notifier
// ?3 at ?6: delivered_at ?4 (NULL for a failure) is kept from the first
// success, last_error is ?5. An unknown alert inserts nothing.
const sqlRecordDelivery = `INSERT INTO keel_alert_deliveries (alert_id, event, notifier, attempts, delivered_at, last_error, updated_at)
SELECT id, ?2, ?3, 1, ?4, ?5, ?6 FROM keel_alerts WHERE id = ?1
ON CONFLICT (alert_id, event, notifier) DO UPDATE SET attempts = attempts + 1,
	delivered_at = coalesce(delivered_at, excluded.delivered_at), last_error = excluded.last_error,
	updated_at = excluded.updated_at`

const sqlGetMeta = `SELECT value FROM keel_meta WHERE name = ?`

const sqlPutMeta = `INSERT INTO keel_meta (name, value, updated_at) VALUES (?, ?, ?)
ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`

const sqlDeleteMeta = `DELETE FROM keel_meta WHERE name = ?`

// hotQueries are prepared once at Open and reused by every group commit.
var hotQueries = []string{sqlNextID, insertSQL[0], sqlClaim, sqlClaimTypes, sqlClaimExcluding, sqlSucceedMany, sqlTransition, sqlHeartbeat}

// The migrations' bookkeeping (migrate.go).
const (
	sqlMigrationsTable = `CREATE TABLE IF NOT EXISTS keel_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`
	sqlMigrationAt     = `SELECT applied_at FROM keel_migrations WHERE version = ?`
	sqlMigrationRecord = `INSERT INTO keel_migrations (version, name, applied_at) VALUES (?, ?, ?)`
)

// sqlSaveStep stores one step's result (?1 the step name, ?2 its JSON,
// ?3 its time as text, driver.StepTimeLayout) with a running task, fenced
// like a transition; an empty owner (?7) fences by the fence alone. The
// name is quoted in the JSON path; driver.ValidateStepName keeps quotes
// and backslashes out of it.
const sqlSaveStep = `UPDATE keel_tasks
SET steps = json_set(coalesce(steps, '{}'), '$."' || ?1 || '"',
	json_object('result', json(?2), 'at', ?3, 'attempt', attempt)), updated_at = ?4
WHERE id = ?5 AND fence = ?6 AND state = 'running' AND (?7 = '' OR lease_owner = ?7)`
