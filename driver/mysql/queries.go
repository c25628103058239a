package mysql

import (
	"strings"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The driver's SQL; stmt.go turns its markers into placeholders. {now}
// stands for the statement's one "now": the caller's clock when
// Options.CallerClock is set, else the database's UTC_TIMESTAMP(6),
// which MySQL evaluates once per statement. Other instants are passed as
// microsecond offsets from it. Lists of ids ({ids}, {pairs}) are expanded to
// placeholders by count, never from user input.

const taskColumns = `id, queue, type, priority, payload, state, attempt, max_attempts, fence, run_at, timeout_ms,
	idem_key, payload_digest, lease_owner, lease_expires_at, created_at, started_at, attempted_at,
	finished_at, updated_at, errors, result, meta, snoozes, steps, batch_id, seq_key`

const (
	// The pick reads what a worker needs (as it was before the mark) and
	// the statement's now, which the mark then writes: the claimed rows
	// need no reading back.
	claimPickHead = `SELECT id, type, priority, payload, attempt, max_attempts, fence, run_at, timeout_ms,
	created_at, snoozes, meta, coalesce(seq_key, ''), {now}
FROM keel_tasks
WHERE state = 'pending' AND queue = ? AND run_at <= {now}`
	claimPickTail = `
ORDER BY priority DESC, run_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED`
)

// matchWhere selects the tasks of a bulk operation: the state (dead or
// cancelled; the literal list keeps other states out whatever the
// argument), then type, queue, finished_at from and before, each given
// twice and not filtering when NULL.
const matchWhere = `state IN ('dead', 'cancelled') AND state = ?
	AND (? IS NULL OR type = ?) AND (? IS NULL OR queue = ?)
	AND (? IS NULL OR finished_at >= ?) AND (? IS NULL OR finished_at < ?)`

const settingColumns = `kind, name, paused, concurrency, timeout_ms, max_attempts, backoff_base_ms,
	backoff_max_ms, updated_at, rate, burst`

const typeColumns = `name, queue, priority, max_attempts, timeout_ms, backoff_base_ms, backoff_max_ms, on_dead, on_dead_hook,
	brake_window, brake_threshold, brake_cooldown_ms, updated_at`

// insertRow is one row of a (multi-row) insert.
// Its run time is an offset from now, or NULL for a held task, stored as
// driver.HeldUntil itself (see runAtArg).
var insertRow = prepare(`(?, ?, ?, ?, 'pending', ?, COALESCE(TIMESTAMPADD(MICROSECOND, ?, {now}), ` + heldUntil + `),
	?, ?, ?, {now}, {now}, '[]', ?)`)

// heldUntil is driver.HeldUntil as a literal.
var heldUntil = `CAST('` + driver.HeldUntil.Format("2006-01-02 15:04:05.999999") + `' AS DATETIME(6))`

var (
	sqlInsert = prepare(`INSERT INTO keel_tasks (queue, type, priority, payload, state, max_attempts, run_at,
	timeout_ms, idem_key, payload_digest, created_at, updated_at, errors, meta) VALUES {rows}`)

	// The holder of a key is read with a locking read: it sees the latest
	// committed row whatever the transaction's snapshot.
	// It also reads the statement's now: the minute the hit is counted in.
	sqlByKey = prepare(`SELECT ` + taskColumns + `, {now} FROM keel_tasks WHERE idem_held = ? LOCK IN SHARE MODE`)

	// The claim's pick for each of its type filters (one at most, see
	// sqlutil.ClaimTypes): none, the types to take or the paused types to
	// skip. A claim that filters nothing pays nothing for the filter.
	sqlClaimPick          = prepare(claimPickHead + claimPickTail)
	sqlClaimPickTypes     = prepare(claimPickHead + ` AND type IN ({types})` + claimPickTail)
	sqlClaimPickExcluding = prepare(claimPickHead + ` AND type NOT IN ({types})` + claimPickTail)
	// A half-open brake's probes: due retries of the types, the most
	// attempted first (ClaimParams.Retried).
	sqlClaimPickRetried = prepare(claimPickHead + ` AND type IN ({types}) AND attempt > 0` +
		strings.Replace(claimPickTail, "priority DESC, run_at", "priority DESC, attempt DESC, run_at", 1))

	// Every statement that locks a list of tasks by id reads them on the
	// primary key (FORCE INDEX): a plan through keel_tasks_state or
	// keel_tasks_lease locked those index entries first and the rows
	// after, the reverse of a single task's transition (its row, then its
	// index entries), and the two deadlocked. The victim could be the
	// transaction of a caller's CompleteTx, which keel cannot run again.
	// TestLockingReadsUsePrimary holds the plans.
	sqlClaimMark = prepare(`UPDATE keel_tasks FORCE INDEX (PRIMARY)
SET state = 'running', attempt = attempt + 1, fence = fence + 1, lease_owner = ?,
	lease_expires_at = TIMESTAMPADD(MICROSECOND, ?, {now}), attempted_at = {now},
	started_at = COALESCE(started_at, {now}), updated_at = {now}
WHERE id IN ({ids}) AND state = 'pending'`)

	// The pick also reads the statement's now, which the rest of the
	// transaction then uses: the live counters need the instant written.
	sqlSucceedPick = prepare(`SELECT id, {now} FROM keel_tasks FORCE INDEX (PRIMARY)
WHERE id IN ({ids}) AND (id, fence) IN ({pairs}) AND state = 'running' AND lease_owner = ?
FOR UPDATE`)

	// A success keeps lease_owner: the node that ran it.
	sqlSucceedMark = prepare(`UPDATE keel_tasks FORCE INDEX (PRIMARY)
SET state = 'succeeded', finished_at = {now}, updated_at = {now}, lease_expires_at = NULL
WHERE id IN ({ids}) AND state = 'running' AND lease_owner = ?`)

	// MySQL assigns left to right, each assignment seeing the ones before
	// (MariaDB's SIMULTANEOUS_ASSIGNMENT mode does not): no assignment below
	// reads a column assigned before it, so both orders give one result. A
	// success keeps lease_owner (the node that ran it); every other state
	// clears it.
	sqlTransition = prepare(`UPDATE keel_tasks FORCE INDEX (PRIMARY)
SET state = ?,
	run_at = COALESCE(TIMESTAMPADD(MICROSECOND, ?, {now}), run_at),
	result = COALESCE(?, result),
	attempt = attempt - ?, snoozes = snoozes + ?,
	errors = CASE WHEN ? IS NULL THEN errors ELSE JSON_ARRAY_APPEND(
		CASE WHEN JSON_LENGTH(errors) >= 20 THEN JSON_REMOVE(errors, '$[0]') ELSE errors END,
		'$', JSON_EXTRACT(?, '$')) END,
	finished_at = CASE WHEN ? IN ('succeeded', 'dead') THEN {now} ELSE NULL END,
	lease_owner = IF(? = 'succeeded', lease_owner, NULL), lease_expires_at = NULL, updated_at = {now}
WHERE id = ? AND fence = ? AND state = 'running' AND lease_owner = ?`)

	sqlHeartbeatPick = prepare(`SELECT id FROM keel_tasks FORCE INDEX (PRIMARY)
WHERE id IN ({ids}) AND state = 'running' AND lease_owner = ?
FOR UPDATE`)

	sqlHeartbeatMark = prepare(`UPDATE keel_tasks FORCE INDEX (PRIMARY)
SET lease_expires_at = TIMESTAMPADD(MICROSECOND, ?, {now}), updated_at = {now}
WHERE id IN ({ids}) AND state = 'running' AND lease_owner = ?`)

	sqlExpired = prepare(`SELECT id, queue, type, priority, attempt, max_attempts, fence, run_at, lease_owner,
	lease_expires_at, attempted_at, {now}
FROM keel_tasks
WHERE state = 'running' AND lease_expires_at < {now}
ORDER BY lease_expires_at
LIMIT ?`)

	// sqlLockExpired locks, of the tasks the rescuer decided on, those
	// still running with an expired lease, skipping any another statement
	// holds (a heartbeat renewing it, a finish): those are not lost.
	sqlLockExpired = prepare(`SELECT id FROM keel_tasks FORCE INDEX (PRIMARY)
WHERE id IN ({ids}) AND state = 'running' AND lease_expires_at < ?
FOR UPDATE SKIP LOCKED`)

	sqlGet = `SELECT ` + taskColumns + ` FROM keel_tasks WHERE id = ?`

	// sqlClaimed is the tasks of a queue running under an owner with a
	// live lease.
	sqlClaimed = prepare(`SELECT ` + taskColumns + ` FROM keel_tasks
WHERE state = 'running' AND lease_owner = ? AND queue = ? AND lease_expires_at > {now}
ORDER BY id
LIMIT ?`)

	// sqlGetByKey reads the task holding a key, on keel_tasks_idem.
	sqlGetByKey = `SELECT ` + taskColumns + ` FROM keel_tasks WHERE idem_held = ?`

	// sqlRecentFinished reads the newest ? succeeded and dead tasks that
	// finished at or after ?: the newest of each state backwards along
	// keel_tasks_finished (finished_state, finished_at, queue), merged.
	// Each half reads at most the limit, whatever the table's size (one
	// range over both states would sort all of them).
	sqlRecentFinished = `(SELECT id, queue, type, state, attempt, created_at, run_at, attempted_at, finished_at
	FROM keel_tasks FORCE INDEX (keel_tasks_finished)
	WHERE finished_state = 'succeeded' AND finished_at >= ? ORDER BY finished_at DESC LIMIT ?)
UNION ALL
(SELECT id, queue, type, state, attempt, created_at, run_at, attempted_at, finished_at
	FROM keel_tasks FORCE INDEX (keel_tasks_finished)
	WHERE finished_state = 'dead' AND finished_at >= ? ORDER BY finished_at DESC LIMIT ?)
ORDER BY finished_at DESC
LIMIT ?`

	// sqlGetLocked locks a task before a single-row change and reads the
	// now the change is then made at.
	sqlGetLocked = prepare(`SELECT ` + taskColumns + `, {now} FROM keel_tasks WHERE id = ? FOR UPDATE`)

	sqlGetIDs = prepare(`SELECT ` + taskColumns + ` FROM keel_tasks WHERE id IN ({ids})`)

	// sqlGetArchived reads an archived task (migration 006).
	sqlGetArchived = `SELECT ` + taskColumns + `, archived_at FROM keel_archive WHERE id = ?`

	// Cancelling a running task records its attempt in the history,
	// ended by the cancel (driver.OutcomeCancelled). errors is assigned
	// first: MySQL's later assignments see the earlier ones.
	sqlCancel = prepare(`UPDATE keel_tasks
SET errors = CASE WHEN state <> 'running' THEN errors ELSE JSON_ARRAY_APPEND(
		CASE WHEN JSON_LENGTH(errors) >= 20 THEN JSON_REMOVE(errors, '$[0]') ELSE errors END,
		'$', JSON_OBJECT('attempt', attempt, 'node', lease_owner,
			'start', DATE_FORMAT(attempted_at, '%Y-%m-%dT%H:%i:%s.%fZ'), 'end', DATE_FORMAT({now}, '%Y-%m-%dT%H:%i:%s.%fZ'),
			'outcome', '` + string(driver.OutcomeCancelled) + `', 'error', '` + driver.CancelledWhileRunning + `')) END,
	state = 'cancelled', finished_at = {now}, updated_at = {now}, lease_owner = NULL, lease_expires_at = NULL
WHERE id = ? AND state IN ('pending', 'running')`)

	// sqlSaveStep stores one step's result with a running task, fenced
	// like a transition; an empty owner fences by the fence alone. The
	// name is quoted in the JSON path (driver.ValidateStepName keeps
	// quotes and backslashes out of it); JSON_EXTRACT(?, '$') makes the
	// result a JSON value on MySQL and MariaDB alike. The step's time is
	// the statement's now as text (driver.StepTimeLayout).
	sqlSaveStep = prepare(`UPDATE keel_tasks
SET steps = JSON_SET(COALESCE(steps, JSON_OBJECT()), CONCAT('$."', ?, '"'),
		JSON_OBJECT('result', JSON_EXTRACT(?, '$'), 'at', DATE_FORMAT({now}, '%Y-%m-%dT%H:%i:%s.%fZ'),
			'attempt', attempt)),
	updated_at = {now}
WHERE id = ? AND fence = ? AND state = 'running' AND (? = '' OR lease_owner = ?)`)

	sqlRetry = prepare(`UPDATE keel_tasks
SET state = 'pending', attempt = 0, snoozes = 0, run_at = {now}, finished_at = NULL, updated_at = {now}
WHERE id = ? AND state IN ('dead', 'cancelled')`)

	// CountAhead: at most ? ready tasks of one queue and priority a claim
	// takes before a run_at and id, of those with run_at from ? on (NULL:
	// all); one range of the claim index.
	sqlCountAhead = prepare(`SELECT COUNT(*) FROM (SELECT 1 FROM keel_tasks
	WHERE state = 'pending' AND queue = ? AND priority = ? AND run_at <= {now}
		AND (? IS NULL OR run_at >= ?) AND (run_at < ? OR (run_at = ? AND id < ?))
	LIMIT ?) a`)

	// Retry (same columns) for matching tasks: lock the first ones whose
	// idempotency key no other task holds, then update those the caller
	// keeps (one per key). The picks of bulk operations name their index:
	// left alone, the optimizer sorts every task of the state.
	sqlRetryMatchingPick = prepare(`SELECT id, idem_key, queue, type, priority, {now} FROM keel_tasks k FORCE INDEX (keel_tasks_state)
WHERE ` + matchWhere + `
	AND (idem_key IS NULL OR NOT EXISTS (SELECT 1 FROM keel_tasks h WHERE h.idem_held = k.idem_key))
ORDER BY id
LIMIT ?
FOR UPDATE`)

	sqlRetryMatchingMark = prepare(`UPDATE keel_tasks
SET state = 'pending', attempt = 0, snoozes = 0, run_at = {now}, finished_at = NULL, updated_at = {now}
WHERE id IN ({ids}) AND state IN ('dead', 'cancelled')`)

	sqlPurgeMatchingPick = prepare(`SELECT id, queue, type FROM keel_tasks FORCE INDEX (keel_tasks_state)
WHERE ` + matchWhere + `
ORDER BY id
LIMIT ?
FOR UPDATE`)

	// The bulk operations restricted to a list of ids, read by primary
	// key: the same picks with id IN ({ids}) first.
	sqlRetryMatchingPickIDs = prepare(`SELECT id, idem_key, queue, type, priority, {now} FROM keel_tasks k
WHERE id IN ({ids}) AND ` + matchWhere + `
	AND (idem_key IS NULL OR NOT EXISTS (SELECT 1 FROM keel_tasks h WHERE h.idem_held = k.idem_key))
ORDER BY id
LIMIT ?
FOR UPDATE`)

	sqlPurgeMatchingPickIDs = prepare(`SELECT id, queue, type FROM keel_tasks
WHERE id IN ({ids}) AND ` + matchWhere + `
ORDER BY id
LIMIT ?
FOR UPDATE`)

	sqlPurgeMatchingDelete = prepare(`DELETE FROM keel_tasks WHERE id IN ({ids}) AND state IN ('dead', 'cancelled')`)

	// One upsert: a NULL argument keeps the stored value (0 on a new row).
	// Each assignment reads only its own column, so MariaDB's
	// SIMULTANEOUS_ASSIGNMENT mode does not change the result.
	sqlPatchSetting = prepare(`INSERT INTO keel_settings (` + settingColumns + `)
VALUES (?, ?, COALESCE(?, FALSE), COALESCE(?, 0), COALESCE(?, 0), COALESCE(?, 0), COALESCE(?, 0), COALESCE(?, 0), {now},
	COALESCE(?, 0), COALESCE(?, 0))
ON DUPLICATE KEY UPDATE paused = COALESCE(?, paused), concurrency = COALESCE(?, concurrency),
	timeout_ms = COALESCE(?, timeout_ms), max_attempts = COALESCE(?, max_attempts),
	backoff_base_ms = COALESCE(?, backoff_base_ms), backoff_max_ms = COALESCE(?, backoff_max_ms),
	rate = COALESCE(?, rate), burst = COALESCE(?, burst),
	tokens_at = CASE WHEN ? IS NULL AND ? IS NULL THEN tokens_at END,
	updated_at = VALUES(updated_at)`)

	// A limited claim (migration 009): the limit's row, locked until the
	// claim commits (a locking read); the running tasks of a type or a
	// queue through keel_tasks_lease. The claim's transaction is READ
	// COMMITTED: the count sees every claim that held the lock before.
	sqlLimitRow = `SELECT concurrency, rate, burst, tokens, tokens_at FROM keel_settings
WHERE kind = ? AND name = ? FOR UPDATE`
	sqlRunningOfType  = `SELECT COUNT(*) FROM keel_tasks WHERE state = 'running' AND type = ?`
	sqlRunningOfQueue = `SELECT COUNT(*) FROM keel_tasks WHERE state = 'running' AND queue = ?`
	sqlLimitNow       = prepare(`SELECT {now}`)
	sqlSpendTokens    = `UPDATE keel_settings SET tokens = ?, tokens_at = ? WHERE kind = ? AND name = ?`

	// The declared defaults of task types (keel_types, migration 004):
	// each declaration replaces the type's row whole.
	sqlDeclareType = prepare(`INSERT INTO keel_types (` + typeColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {now})
ON DUPLICATE KEY UPDATE queue = VALUES(queue), priority = VALUES(priority), max_attempts = VALUES(max_attempts),
	timeout_ms = VALUES(timeout_ms), backoff_base_ms = VALUES(backoff_base_ms),
	backoff_max_ms = VALUES(backoff_max_ms), on_dead = VALUES(on_dead), on_dead_hook = VALUES(on_dead_hook),
	brake_window = VALUES(brake_window), brake_threshold = VALUES(brake_threshold),
	brake_cooldown_ms = VALUES(brake_cooldown_ms), updated_at = VALUES(updated_at)`)

	sqlListTypes = prepare(`SELECT ` + typeColumns + ` FROM keel_types ORDER BY name`)

	sqlListTypesNamed = prepare(`SELECT ` + typeColumns + ` FROM keel_types WHERE name IN ({names}) ORDER BY name`)

	sqlGetSetting = `SELECT ` + settingColumns + ` FROM keel_settings WHERE kind = ? AND name = ?`

	sqlListSettings = `SELECT ` + settingColumns + ` FROM keel_settings ORDER BY kind, name`

	// The row changes hands when it is ours or expired. expires_at's
	// condition holds after owner's assignment (the new owner is ours) and
	// before it (SIMULTANEOUS_ASSIGNMENT: ours or expired) alike.
	sqlLead = prepare(`INSERT INTO keel_leaders (name, owner, expires_at)
VALUES (?, ?, TIMESTAMPADD(MICROSECOND, ?, {now}))
ON DUPLICATE KEY UPDATE
	owner = IF(owner = VALUES(owner) OR expires_at < {now}, VALUES(owner), owner),
	expires_at = IF(owner = VALUES(owner) OR expires_at < {now}, VALUES(expires_at), expires_at)`)

	sqlLeader = `SELECT owner FROM keel_leaders WHERE name = ? FOR UPDATE`

	sqlResign = `DELETE FROM keel_leaders WHERE name = ? AND owner = ?`

	sqlList = `SELECT ` + taskColumns + ` FROM keel_tasks`
)

// The live counters' SQL (keel_counts and keel_minutes, migration 005).
// Writers add to their connection's shard (CONNECTION_ID()); readers
// sum the shards.
const (
	// sqlCounts reads the live counters.
	sqlCounts = `SELECT queue, type, kind, priority, due, SUM(n) FROM keel_counts
GROUP BY queue, type, kind, priority, due HAVING SUM(n) <> 0
ORDER BY queue, type, kind, priority, due`

	// sqlTrueCounts counts keel_tasks the way the live counters do; only
	// Reconcile runs it. due is computed with TIMESTAMPDIFF, which does not
	// depend on the session's time zone (unlike UNIX_TIMESTAMP, which also
	// gives NULL after 2038 on MariaDB before 11.5).
	sqlTrueCounts = `SELECT queue, type, CASE WHEN state = 'pending' AND attempt > 0 THEN 'retrying' ELSE state END,
	CASE WHEN state = 'pending' THEN priority ELSE 0 END,
	CASE WHEN state = 'pending' THEN FLOOR(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', run_at) / 60000000) ELSE 0 END, COUNT(*)
FROM keel_tasks GROUP BY 1, 2, 3, 4, 5`

	// sqlCountUpsert adds to counters; {rows} is a list of countRow or
	// countRowFolded.
	sqlCountUpsert = `INSERT INTO keel_counts (queue, type, kind, priority, due, n, shard) VALUES {rows}
ON DUPLICATE KEY UPDATE n = n + VALUES(n)`

	countRow       = `(?, ?, ?, ?, ?, ?, CONNECTION_ID())`
	countRowFolded = `(?, ?, ?, ?, ?, ?, 0)`

	minuteColumns = `minute, queue, type, enqueued, hits, attempts, ended, failed, succeeded, dead, cancelled,
	duration_ms, first_ms, last_ms`

	// sqlMinuteUpsert adds to history rows; {rows} is a list of minuteRow.
	// first_ms and last_ms are 0 when no attempt ended.
	sqlMinuteUpsert = `INSERT INTO keel_minutes (` + minuteColumns + `, shard) VALUES {rows}
ON DUPLICATE KEY UPDATE enqueued = enqueued + VALUES(enqueued), hits = hits + VALUES(hits),
	attempts = attempts + VALUES(attempts), ended = ended + VALUES(ended), failed = failed + VALUES(failed),
	succeeded = succeeded + VALUES(succeeded), dead = dead + VALUES(dead),
	cancelled = cancelled + VALUES(cancelled), duration_ms = duration_ms + VALUES(duration_ms),
	first_ms = CASE WHEN first_ms = 0 OR (VALUES(first_ms) <> 0 AND VALUES(first_ms) < first_ms)
		THEN VALUES(first_ms) ELSE first_ms END,
	last_ms = CASE WHEN VALUES(last_ms) > last_ms THEN VALUES(last_ms) ELSE last_ms END`

	minuteRow = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, CONNECTION_ID())`

	// sqlMinutes reads the history from minute ? on.
	sqlMinutes = `SELECT minute, queue, type, SUM(enqueued), SUM(hits), SUM(attempts), SUM(ended), SUM(failed),
	SUM(succeeded), SUM(dead), SUM(cancelled), SUM(duration_ms), COALESCE(MIN(NULLIF(first_ms, 0)), 0), MAX(last_ms)
FROM keel_minutes WHERE minute >= ?
GROUP BY minute, queue, type ORDER BY minute, queue, type`

	// sqlLiveShards lists the server's connections: the shards that may
	// still be written. Without the PROCESS privilege a server lists only
	// the connections of the caller's own account.
	sqlLiveShards = `SELECT ID FROM information_schema.PROCESSLIST`

	// sqlDropMinute deletes one history row (locked by sqlShardMinutes).
	sqlDropMinute = `DELETE FROM keel_minutes WHERE minute = ? AND queue = ? AND type = ? AND shard = ?`

	minuteRowFolded = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)`

	// sqlDropCount deletes one counter row (locked by sqlShardCounts).
	sqlDropCount   = `DELETE FROM keel_counts WHERE queue = ? AND type = ? AND kind = ? AND priority = ? AND due = ? AND shard = ?`
	sqlDropMinutes = `DELETE FROM keel_minutes WHERE minute < ?`
)

// sqlShardCounts locks and reads the counter rows Reconcile folds into
// shard 0: those of connections not in {live}, and zero rows of shard 0.
var sqlShardCounts = prepare(`SELECT queue, type, kind, priority, due, n, shard FROM keel_counts
WHERE (shard <> 0 AND shard NOT IN ({live})) OR (shard = 0 AND n = 0)
ORDER BY queue, type, kind, priority, due, shard FOR UPDATE SKIP LOCKED`)

// sqlShardMinutes locks and reads the history rows of minutes before ?
// of connections not in {live}, which Reconcile folds into shard 0.
var sqlShardMinutes = prepare(`SELECT ` + minuteColumns + `, shard FROM keel_minutes
WHERE shard <> 0 AND shard NOT IN ({live}) AND minute < ?
ORDER BY minute, queue, type, shard FOR UPDATE SKIP LOCKED`)

// sqlCountedRows reads what the counters need of the running tasks with
// the given ids: transitions whose caller did not describe the task.
var sqlCountedRows = prepare(`SELECT id, queue, type, priority, attempt, run_at, attempted_at FROM keel_tasks
WHERE id IN ({ids}) AND state = 'running'`)

// sqlNow reads the database's now (the caller's with Options.CallerClock),
// for a write whose statements cannot read it themselves.
var sqlNow = prepare(`SELECT {now}`)

// The node registry's SQL (keel_nodes, migration 002). Like the task
// queries, every statement starts from one now: the caller's clock or the
// database's UTC_TIMESTAMP(6).

var sqlRegisterNode = prepare(`INSERT INTO keel_nodes (name, host, pid, queues, started_at, heartbeat_at, workers, version, running)
VALUES (?, ?, ?, ?, COALESCE(?, {now}), {now}, ?, ?, ?)
ON DUPLICATE KEY UPDATE host = VALUES(host), pid = VALUES(pid), queues = VALUES(queues),
	started_at = VALUES(started_at), heartbeat_at = VALUES(heartbeat_at), workers = VALUES(workers),
	version = VALUES(version), running = VALUES(running)`)

const sqlListNodes = `SELECT name, host, pid, queues, started_at, heartbeat_at, COALESCE(workers, '{}'), version, running FROM keel_nodes ORDER BY name`

const sqlRemoveNode = `DELETE FROM keel_nodes WHERE name = ?`

var sqlPruneNodes = prepare(`DELETE FROM keel_nodes WHERE heartbeat_at < TIMESTAMPADD(MICROSECOND, -?, {now})`)

// sqlPruneSourceReports deletes the reports (migration 014) not refreshed
// within ? of sources on nodes without a heartbeat within ? either: a
// source whose process died. A live node's stopped source keeps its last
// report.
var sqlPruneSourceReports = prepare(`DELETE FROM keel_sources
WHERE updated_at < TIMESTAMPADD(MICROSECOND, -?, {now})
	AND node NOT IN (SELECT name FROM keel_nodes WHERE heartbeat_at >= TIMESTAMPADD(MICROSECOND, -?, {now}))`)

// Alerts, their deliveries and stored documents (keel_alerts,
// keel_alert_deliveries, keel_meta, migration 006). Unlike the task
// queries, every time is the caller's (the leader's clock), on every
// database alike.

const alertColumns = sqlutil.AlertColumns

// sqlFireAlert opens an alert; a duplicate key (error 1062) on open_key
// means one of its rule and subject is open already.
const sqlFireAlert = `INSERT INTO keel_alerts (rule, subject, open_key, message, hint, vals, fired_at)
VALUES (?, ?, ?, ?, ?, ?, ?)`

const sqlOpenAlert = `SELECT ` + alertColumns + ` FROM keel_alerts WHERE open_key = ?`

const sqlGetAlert = `SELECT ` + alertColumns + ` FROM keel_alerts WHERE id = ?`

const sqlListAlerts = `SELECT ` + alertColumns + ` FROM keel_alerts`

// sqlUpdateAlert records the latest message and values of alert ? (the
// last) if it is open.
const sqlUpdateAlert = `UPDATE keel_alerts SET current_message = ?, current_vals = ?, current_at = ?
WHERE id = ? AND open_key IS NOT NULL`

// sqlResolveAlert resolves alert ? (the last) if it is open.
const sqlResolveAlert = `UPDATE keel_alerts SET open_key = NULL, resolved_at = ?, resolved_message = ?, resolved_vals = ?
WHERE id = ? AND open_key IS NOT NULL`

// sqlDeliveries reads the deliveries of the alerts in {ids}.
const sqlDeliveries = `SELECT ` + sqlutil.DeliveryColumns + ` FROM keel_alert_deliveries
WHERE alert_id IN ({ids}) ORDER BY alert_id, event, notifier`

// sqlRecordDelivery counts one attempt of an alert's event to a notifier:
// delivered_at (NULL for a failure) is kept from the first success. An
// unknown alert inserts nothing. Each assignment reads only its own
// column, so MariaDB's SIMULTANEOUS_ASSIGNMENT mode does not change the
// result.
const sqlRecordDelivery = `INSERT INTO keel_alert_deliveries (alert_id, event, notifier, attempts, delivered_at, last_error, updated_at)
SELECT id, ?, ?, 1, ?, ?, ? FROM keel_alerts WHERE id = ?
ON DUPLICATE KEY UPDATE attempts = keel_alert_deliveries.attempts + 1,
	delivered_at = COALESCE(keel_alert_deliveries.delivered_at, VALUES(delivered_at)),
	last_error = VALUES(last_error), updated_at = VALUES(updated_at)`

const sqlGetMeta = `SELECT value FROM keel_meta WHERE name = ?`

const sqlPutMeta = `INSERT INTO keel_meta (name, value, updated_at) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE value = VALUES(value), updated_at = VALUES(updated_at)`

const sqlDeleteMeta = `DELETE FROM keel_meta WHERE name = ?`

// The migrations' bookkeeping (migrate.go); a named lock serialises
// migrators.
const (
	sqlDatabase        = `SELECT DATABASE()`
	sqlMigrateLock     = `SELECT GET_LOCK(?, 60)`
	sqlMigrateUnlock   = `SELECT RELEASE_LOCK(?)`
	sqlMigrationsTable = `CREATE TABLE IF NOT EXISTS keel_migrations (
		version INT NOT NULL PRIMARY KEY, name VARCHAR(255) NOT NULL, applied_at DATETIME(6) NOT NULL)`
	sqlMigrationAt     = `SELECT applied_at FROM keel_migrations WHERE version = ?`
	sqlMigrationRecord = `INSERT INTO keel_migrations (version, name, applied_at) VALUES (?, ?, ?)`
)

// Archival (migration 006). Each pick locks the oldest tasks of one state
// that finished before {now} plus ? microseconds (a negative offset), at
// most ?, skipping rows another transaction holds: succeeded and dead ones
// by finish time on keel_tasks_finished, cancelled ones (which that index
// leaves out) in id order on keel_tasks_state.
var (
	sqlArchivePickSucceeded = archivePick("succeeded")
	sqlArchivePickDead      = archivePick("dead")
	sqlArchivePickCancelled = prepare(`SELECT id, queue, type FROM keel_tasks FORCE INDEX (keel_tasks_state)
WHERE state = 'cancelled' AND finished_at < TIMESTAMPADD(MICROSECOND, ?, {now})
ORDER BY id
LIMIT ?
FOR UPDATE SKIP LOCKED`)

	// sqlArchiveCopy copies the picked (locked) tasks to keel_archive,
	// archived at {now}; sqlArchiveDelete then deletes them.
	sqlArchiveCopy = prepare(`INSERT INTO keel_archive (` + taskColumns + `, archived_at)
SELECT ` + taskColumns + `, {now} FROM keel_tasks WHERE id IN ({ids})`)
	sqlArchiveDelete = prepare(`DELETE FROM keel_tasks WHERE id IN ({ids})`)

	// sqlPurgeArchive deletes the ? oldest rows of keel_archive archived
	// before ?.
	sqlPurgeArchive = `DELETE FROM keel_archive WHERE archived_at < ? ORDER BY archived_at LIMIT ?`
)

// archivePick is the pick of succeeded or dead tasks: state is a literal
// from this file, never user input.
func archivePick(state string) stmt {
	return prepare(`SELECT id, queue, type FROM keel_tasks FORCE INDEX (keel_tasks_finished)
WHERE finished_state = '` + state + `' AND finished_at < TIMESTAMPADD(MICROSECOND, ?, {now})
ORDER BY finished_at
LIMIT ?
FOR UPDATE SKIP LOCKED`)
}
