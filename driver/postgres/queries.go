package postgres

import (
	"strings"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// All of the driver's SQL lives in this file. {schema} is replaced by the
// quoted schema once, at New. Every query starts from one "now": $1 when the
// caller's clock is used, else the database's now(); other instants are
// passed as microsecond offsets from it.

const nowCTE = `WITH t AS (SELECT ` + nowExpr + ` AS now) `

// nowExpr is the statement's now as an expression. Conditions that bound
// an index range use it rather than t.now: joined from the CTE, t.now
// makes the scan the inner side of a nested loop, whose output the planner
// does not know to be in index order, and once the table has statistics it
// may sort every ready task on each claim (measured: 110 ms instead of 2 ms
// per claim of 100 with 100,000 ready tasks).
const nowExpr = `coalesce($1::timestamptz, now())`

// plusMicros is SQL for t.now plus the bigint parameter p in microseconds,
// exact at any distance: interval * number multiplies in float8, which
// rounds beyond 2^53 µs (285 years), so whole seconds (exact in float8
// times 10^6 for 18,000 years) and the remaining microseconds go apart.
func plusMicros(p string) string {
	return `t.now + ` + p + `::bigint / 1000000 * interval '1 second' + ` + p + `::bigint % 1000000 * interval '1 microsecond'`
}

// heldUntil is driver.HeldUntil as a literal: a held task's run time is
// that instant exactly, never relative to the database's clock (see
// runAtArg).
var heldUntil = `timestamptz '` + driver.HeldUntil.Format("2006-01-02 15:04:05.999999") + `+00'`

const taskColumns = `id, queue, type, priority, payload, state, attempt, max_attempts, fence, run_at, timeout_ms,
	idem_key, payload_digest, lease_owner, lease_expires_at, created_at, started_at, attempted_at,
	finished_at, updated_at, errors, result, meta, snoozes, steps, batch_id, seq_key`

type queries struct {
	reserveIDs,
	insert, byKey, claim, claimTypes, claimExcluding, claimRetried, succeedMany, transition, saveStep, heartbeat, claimed, expired, lockExpired, get,
	cancel, retry, counts, trueCounts, foldShards, foldMinutes, dropZeroCounts, dropMinutes, minutes, hits, repairCounts,
	lead, resign, list, countAhead, retryMatching, retryMatchingIDs, purgeMatching, purgeMatchingIDs, recentFinished,
	patchSetting, listSettings, limitRow, runningOfType, runningOfQueue, limitNow, spendTokens,
	declareType, listTypes, listTypesNamed,
	archiveSucceeded, archiveCancelled, archiveDead, getArchived, purgeArchive string
}

// archiveTmpl moves the $3 oldest tasks of state {state} that finished
// before now plus $2 microseconds (a negative offset) to keel_archive,
// archived at now, skipping rows another transaction holds. The pick goes
// by finish time on keel_tasks_finished (succeeded, dead) or
// keel_tasks_cancelled. The DELETE's statement trigger (migration 007)
// takes the rows off the live counters and writes no history.
var archiveTmpl = nowCTE + `, picked AS (
	SELECT k.id FROM {schema}.keel_tasks k
	WHERE k.state = '{state}'
		AND k.finished_at < ` + nowExpr + ` + $2::bigint / 1000000 * interval '1 second' + $2::bigint % 1000000 * interval '1 microsecond'
	ORDER BY k.finished_at
	LIMIT $3
	FOR UPDATE OF k SKIP LOCKED),
moved AS (
	DELETE FROM {schema}.keel_tasks k USING picked WHERE k.id = picked.id
	RETURNING ` + qualified("k", taskColumns) + `)
INSERT INTO {schema}.keel_archive (` + taskColumns + `, archived_at)
SELECT ` + taskColumns + `, t.now FROM moved, t`

// archiveQuery is archiveTmpl for one state (a literal, so the planner
// proves the partial index's predicate).
func archiveQuery(state string) string { return strings.ReplaceAll(archiveTmpl, "{state}", state) }

// claimTmpl is the claim; {filter} holds its type filter (one at most, see
// sqlutil.ClaimTypes): none, the types to take ($6) or the paused types to
// skip ($6). A claim that filters nothing pays nothing for the filter.
const claimTmpl = nowCTE + `, picked AS (
	SELECT k.id FROM {schema}.keel_tasks k
	WHERE k.state = 'pending' AND k.queue = $2 AND k.run_at <= ` + nowExpr + `{filter}
	ORDER BY k.priority DESC, k.run_at, k.id
	LIMIT $3
	FOR UPDATE OF k SKIP LOCKED)
UPDATE {schema}.keel_tasks k
SET state = 'running', attempt = k.attempt + 1, fence = k.fence + 1, lease_owner = $4,
	lease_expires_at = t.now + $5 * interval '1 microsecond', attempted_at = t.now,
	started_at = coalesce(k.started_at, t.now), updated_at = t.now
FROM picked, t
WHERE k.id = picked.id
RETURNING k.id, k.type, k.priority, k.payload, k.attempt, k.max_attempts, k.fence, k.run_at, k.timeout_ms,
	k.created_at, k.lease_expires_at, k.attempted_at, k.snoozes, k.meta, coalesce(k.seq_key, '')`

// matchWhere selects the tasks of a bulk operation: state $2 (dead or
// cancelled; the literal list lets a generic plan use keel_tasks_failed),
// and type $3, queue $4, finished_at from $5 and before $6 where not NULL.
const matchWhere = `k.state IN ('dead', 'cancelled') AND k.state = $2
		AND ($3::text IS NULL OR k.type = $3) AND ($4::text IS NULL OR k.queue = $4)
		AND ($5::timestamptz IS NULL OR k.finished_at >= $5) AND ($6::timestamptz IS NULL OR k.finished_at < $6)`

// retryMatchingTmpl is Retry (same columns) for the first $7 matching
// tasks. A task whose key another task holds is skipped, and of tasks
// sharing a key only the lowest id is taken, so the unique index does not
// fail the batch (a key taken by a concurrent insert still can: the caller
// runs the statement again). {ids} is empty or idsFilter.
const retryMatchingTmpl = nowCTE + `, c AS (
	SELECT k.id, k.idem_key FROM {schema}.keel_tasks k
	WHERE ` + matchWhere + `{ids}
		AND (k.idem_key IS NULL OR NOT EXISTS (SELECT 1 FROM {schema}.keel_tasks h
			WHERE h.idem_key = k.idem_key AND h.state IN ('pending', 'running', 'succeeded')))
	ORDER BY k.id
	LIMIT $7
	FOR UPDATE OF k),
picked AS (
	SELECT id FROM c WHERE idem_key IS NULL
	UNION ALL
	SELECT min(id) FROM c WHERE idem_key IS NOT NULL GROUP BY idem_key)
UPDATE {schema}.keel_tasks k
SET state = 'pending', attempt = 0, snoozes = 0, run_at = t.now, finished_at = NULL, updated_at = t.now
FROM picked, t
WHERE k.id = picked.id AND k.state IN ('dead', 'cancelled')
RETURNING k.queue`

// purgeMatchingTmpl deletes the first $7 matching tasks (t is unused:
// every statement's first argument is its now); {ids} is empty or
// idsFilter.
const purgeMatchingTmpl = nowCTE + `DELETE FROM {schema}.keel_tasks
WHERE id IN (
	SELECT k.id FROM {schema}.keel_tasks k
	WHERE ` + matchWhere + `{ids}
	ORDER BY k.id
	LIMIT $7
	FOR UPDATE OF k)
	AND state IN ('dead', 'cancelled')`

// idsFilter restricts a bulk operation to the ids $8, read by primary key.
const idsFilter = ` AND k.id = ANY($8::bigint[])`

const settingColumns = `kind, name, paused, concurrency, timeout_ms, max_attempts, backoff_base_ms,
	backoff_max_ms, updated_at, rate, burst`

// typeColumns are the columns of keel_types (migration 006).
const typeColumns = `name, queue, priority, max_attempts, timeout_ms, backoff_base_ms, backoff_max_ms, on_dead, on_dead_hook,
	brake_window, brake_threshold, brake_cooldown_ms, updated_at`

// newQueries builds the statements; q puts the schema in, and seq is the
// task table's id sequence as pg_get_serial_sequence names it.
func newQueries(q func(string) string, seq string) queries {
	return queries{
		// $2 ids and the statement's now. The sequence is a literal: looked
		// up in the statement, it was looked up once per id, and reserving
		// 1,000 ids took 8 ms instead of 0.5 ms.
		reserveIDs: `SELECT nextval('` + strings.ReplaceAll(seq, "'", "''") + `'::regclass), ` + nowExpr + `
FROM generate_series(1, $2)`,

		insert: q(nowCTE + `INSERT INTO {schema}.keel_tasks (queue, type, priority, payload, state, max_attempts,
	run_at, timeout_ms, idem_key, payload_digest, created_at, updated_at, meta)
SELECT $2, $3, $4, $5::text::jsonb, 'pending', $6, coalesce(` + plusMicros("$7") + `, ` + heldUntil + `), $8, $9, $10,
	t.now, t.now, $11::text::jsonb FROM t
ON CONFLICT DO NOTHING
RETURNING ` + taskColumns),

		byKey: q(`SELECT ` + taskColumns + ` FROM {schema}.keel_tasks
WHERE idem_key = $1 AND state IN ('pending', 'running', 'succeeded')`),

		claim:          q(strings.Replace(claimTmpl, "{filter}", "", 1)),
		claimTypes:     q(strings.Replace(claimTmpl, "{filter}", " AND k.type = ANY($6::text[])", 1)),
		claimExcluding: q(strings.Replace(claimTmpl, "{filter}", " AND k.type <> ALL($6::text[])", 1)),
		// A half-open brake's probes: due retries of the types, the most
		// attempted first (ClaimParams.Retried).
		claimRetried: q(strings.NewReplacer("{filter}", " AND k.type = ANY($6::text[]) AND k.attempt > 0",
			"ORDER BY k.priority DESC, k.run_at", "ORDER BY k.priority DESC, k.attempt DESC, k.run_at").Replace(claimTmpl)),

		// A success keeps lease_owner: the node that ran it. $2 are the
		// ids and $3 the same tasks as "id:fence". There is no join: a
		// join of the table to the unnested ids is planned as a read of
		// the whole table once a batch is large against the table (1,000
		// ids on 100,000 rows without statistics, which count almost no
		// rows as running), whereas id = ANY reads the primary key, and
		// the fence check against a constant array is a hash lookup. The
		// rows are locked in whatever order the plan visits them; the
		// heartbeat, the one other writer of a process's running rows,
		// never waits for a lock, so no order is needed.
		succeedMany: q(nowCTE + `UPDATE {schema}.keel_tasks k
SET state = 'succeeded', finished_at = t.now, updated_at = t.now, lease_expires_at = NULL
FROM t
WHERE k.id = ANY($2::bigint[]) AND (k.id::text || ':' || k.fence::text) = ANY($3::text[])
	AND k.state = 'running' AND k.lease_owner = $4
RETURNING k.id`),

		// A success keeps lease_owner (the node that ran it); every other
		// state clears it.
		transition: q(nowCTE + `UPDATE {schema}.keel_tasks k
SET state = $2,
	run_at = CASE WHEN $3::bigint IS NULL THEN k.run_at ELSE ` + plusMicros("$3") + ` END,
	result = coalesce($4::text::jsonb, k.result),
	attempt = k.attempt - $5, snoozes = k.snoozes + $10,
	errors = CASE WHEN $6::text IS NULL THEN k.errors ELSE
		(CASE WHEN jsonb_array_length(k.errors) >= 20 THEN k.errors - 0 ELSE k.errors END) || jsonb_build_array($6::text::jsonb) END,
	finished_at = CASE WHEN $2 IN ('succeeded', 'dead') THEN t.now ELSE NULL END,
	lease_owner = CASE WHEN $2 = 'succeeded' THEN k.lease_owner END, lease_expires_at = NULL, updated_at = t.now
FROM t
WHERE k.id = $7 AND k.fence = $8 AND k.state = 'running' AND k.lease_owner = $9`),

		// The tasks of queue $3 running under $2 with a live lease.
		claimed: q(`SELECT ` + taskColumns + ` FROM {schema}.keel_tasks k
WHERE k.state = 'running' AND k.lease_owner = $2 AND k.queue = $3 AND k.lease_expires_at > ` + nowExpr + `
ORDER BY k.id
LIMIT $4`),

		// The heartbeat renews the rows it can lock at once and skips
		// those another statement holds: a batch finishing them (which
		// then ends their lease anyway), an operator's cancel, the
		// rescuer. It reports as held every row that was running under
		// $4 when it began, skipped or not: a lease lost to the cancel or
		// the rescuer shows at the next beat, one interval later. Never
		// waiting, it cannot deadlock with a finish that locks the same
		// rows in another order, which it did when it waited
		// (TestFinishAndHeartbeatDoNotDeadlock).
		heartbeat: q(nowCTE + `, l AS (SELECT k.id FROM {schema}.keel_tasks k
	WHERE k.id = ANY($3::bigint[]) AND k.state = 'running' AND k.lease_owner = $4
	FOR UPDATE OF k SKIP LOCKED),
u AS (UPDATE {schema}.keel_tasks k
	SET lease_expires_at = t.now + $2 * interval '1 microsecond', updated_at = t.now
	FROM l, t
	WHERE k.id = l.id)
SELECT k.id FROM {schema}.keel_tasks k
WHERE k.id = ANY($3::bigint[]) AND k.state = 'running' AND k.lease_owner = $4`),

		expired: q(`SELECT k.id, k.queue, k.type, k.priority, k.attempt, k.max_attempts, k.fence, k.run_at,
	k.lease_owner, k.lease_expires_at, k.attempted_at, ` + nowExpr + `
FROM {schema}.keel_tasks k
WHERE k.state = 'running' AND k.lease_expires_at < ` + nowExpr + `
ORDER BY k.lease_expires_at
LIMIT $2`),

		// The rescue locks the tasks it was told about that are still
		// running with an expired lease, skipping any another statement
		// holds (a heartbeat renewing it, a finish): those are not lost.
		lockExpired: q(`SELECT k.id FROM {schema}.keel_tasks k
WHERE k.id = ANY($2::bigint[]) AND k.state = 'running' AND k.lease_expires_at < ` + nowExpr + `
FOR UPDATE OF k SKIP LOCKED`),

		get: q(`SELECT ` + taskColumns + ` FROM {schema}.keel_tasks WHERE id = $1`),

		// Archival (migration 008).
		archiveSucceeded: q(archiveQuery("succeeded")),
		archiveCancelled: q(archiveQuery("cancelled")),
		archiveDead:      q(archiveQuery("dead")),
		getArchived:      q(`SELECT ` + taskColumns + `, archived_at FROM {schema}.keel_archive WHERE id = $1`),
		// Deletes the $2 oldest rows archived before $1.
		purgeArchive: q(`DELETE FROM {schema}.keel_archive WHERE id IN (
	SELECT id FROM {schema}.keel_archive WHERE archived_at < $1
	ORDER BY archived_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED)`),

		// Cancelling a running task records its attempt in the history,
		// ended by the cancel (driver.OutcomeCancelled). Times in UTC, as
		// the engine writes them.
		cancel: q(nowCTE + `UPDATE {schema}.keel_tasks k
SET state = 'cancelled', finished_at = t.now, updated_at = t.now, lease_owner = NULL, lease_expires_at = NULL,
	errors = CASE WHEN k.state <> 'running' THEN k.errors ELSE
		(CASE WHEN jsonb_array_length(k.errors) >= 20 THEN k.errors - 0 ELSE k.errors END) || jsonb_build_array(jsonb_build_object(
			'attempt', k.attempt, 'node', k.lease_owner,
			'start', to_char(k.attempted_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
			'end', to_char(t.now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
			'outcome', '` + string(driver.OutcomeCancelled) + `', 'error', '` + driver.CancelledWhileRunning + `')) END
FROM t
WHERE k.id = $2 AND k.state IN ('pending', 'running')
RETURNING ` + qualified("k", taskColumns)),

		// One step's result ($3, its name $2) stored with a running task,
		// fenced like a transition; an empty owner ($5) fences by the
		// fence alone. The step's time is t.now as text
		// (driver.StepTimeLayout).
		saveStep: q(nowCTE + `UPDATE {schema}.keel_tasks k
SET steps = coalesce(k.steps, '{}'::jsonb) || jsonb_build_object($2::text, jsonb_build_object(
		'result', $3::text::jsonb,
		'at', to_char(t.now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
		'attempt', k.attempt)),
	updated_at = t.now
FROM t
WHERE k.id = $4 AND k.fence = $6 AND k.state = 'running' AND ($5 = '' OR k.lease_owner = $5)`),

		retry: q(nowCTE + `UPDATE {schema}.keel_tasks k
SET state = 'pending', attempt = 0, snoozes = 0, run_at = t.now, finished_at = NULL, updated_at = t.now
FROM t
WHERE k.id = $2 AND k.state IN ('dead', 'cancelled')
RETURNING ` + qualified("k", taskColumns)),

		// The live counters (migration 007), summed over shards.
		counts: q(`SELECT queue, type, kind, priority, due, sum(n)::bigint FROM {schema}.keel_counts
GROUP BY queue, type, kind, priority, due HAVING sum(n) <> 0
ORDER BY queue, type, kind, priority, due`),

		// keel_tasks counted the way the counters count; only Reconcile.
		// (The key expressions are the triggers', migration 007.)
		trueCounts: q(`SELECT queue, type, CASE WHEN state = 'pending' AND attempt > 0 THEN 'retrying' ELSE state END,
	CASE WHEN state = 'pending' THEN priority ELSE 0 END,
	CASE WHEN state = 'pending' THEN round(date_part('epoch', run_at) * 1000000)::bigint / 60000000 ELSE 0 END, count(*)
FROM {schema}.keel_tasks GROUP BY 1, 2, 3, 4, 5`),

		// Adds corrections ($1..$6 arrays) to shard 0.
		repairCounts: q(`INSERT INTO {schema}.keel_counts AS c (queue, type, kind, priority, due, shard, n)
SELECT u.q, u.t, u.k, u.p, u.d, 0, u.n
FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::bigint[], $6::bigint[]) AS u(q, t, k, p, d, n)
ORDER BY 1, 2, 3, 4, 5
ON CONFLICT (queue, type, kind, priority, due, shard) DO UPDATE SET n = c.n + excluded.n`),

		// Moves every shard's counts into shard 0, skipping the rows a
		// writer holds (it never waits, so it never deadlocks with one).
		foldShards: q(`WITH gone AS (DELETE FROM {schema}.keel_counts c
	WHERE (c.queue, c.type, c.kind, c.priority, c.due, c.shard) IN (
		SELECT queue, type, kind, priority, due, shard FROM {schema}.keel_counts WHERE shard <> 0
		FOR UPDATE SKIP LOCKED)
	RETURNING queue, type, kind, priority, due, n)
INSERT INTO {schema}.keel_counts AS c (queue, type, kind, priority, due, shard, n)
SELECT queue, type, kind, priority, due, 0, sum(n) FROM gone
GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
ON CONFLICT (queue, type, kind, priority, due, shard) DO UPDATE SET n = c.n + excluded.n`),

		// Moves the history rows of every shard, of minutes before $1,
		// into shard 0, skipping rows a writer holds.
		foldMinutes: q(`WITH gone AS (DELETE FROM {schema}.keel_minutes m
	WHERE (m.minute, m.queue, m.type, m.shard) IN (
		SELECT minute, queue, type, shard FROM {schema}.keel_minutes WHERE shard <> 0 AND minute < $1
		FOR UPDATE SKIP LOCKED)
	RETURNING m.*)
INSERT INTO {schema}.keel_minutes AS m (minute, queue, type, shard, enqueued, hits, attempts, ended, failed, succeeded,
	dead, cancelled, duration_ms, first_ms, last_ms)
SELECT minute, queue, type, 0, sum(enqueued), sum(hits), sum(attempts), sum(ended), sum(failed), sum(succeeded),
	sum(dead), sum(cancelled), sum(duration_ms), coalesce(min(nullif(first_ms, 0)), 0), max(last_ms)
FROM gone GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
ON CONFLICT (minute, queue, type, shard) DO UPDATE SET enqueued = m.enqueued + excluded.enqueued,
	hits = m.hits + excluded.hits, attempts = m.attempts + excluded.attempts, ended = m.ended + excluded.ended,
	failed = m.failed + excluded.failed, succeeded = m.succeeded + excluded.succeeded, dead = m.dead + excluded.dead,
	cancelled = m.cancelled + excluded.cancelled, duration_ms = m.duration_ms + excluded.duration_ms,
	first_ms = CASE WHEN m.first_ms = 0 OR (excluded.first_ms <> 0 AND excluded.first_ms < m.first_ms)
		THEN excluded.first_ms ELSE m.first_ms END,
	last_ms = greatest(m.last_ms, excluded.last_ms)`),

		dropZeroCounts: q(`DELETE FROM {schema}.keel_counts c
WHERE (c.queue, c.type, c.kind, c.priority, c.due, c.shard) IN (
	SELECT queue, type, kind, priority, due, shard FROM {schema}.keel_counts WHERE n = 0 FOR UPDATE SKIP LOCKED)`),
		dropMinutes: q(`DELETE FROM {schema}.keel_minutes WHERE minute < $1`),

		minutes: q(`SELECT minute, queue, type, sum(enqueued)::bigint, sum(hits)::bigint, sum(attempts)::bigint,
	sum(ended)::bigint, sum(failed)::bigint, sum(succeeded)::bigint, sum(dead)::bigint, sum(cancelled)::bigint,
	sum(duration_ms)::bigint, coalesce(min(nullif(first_ms, 0)), 0), max(last_ms)
FROM {schema}.keel_minutes WHERE minute >= $1
GROUP BY minute, queue, type ORDER BY minute, queue, type`),

		// Idempotency hits ($2 queues, $3 types, one element per hit) in
		// the minute of now.
		hits: q(nowCTE + `INSERT INTO {schema}.keel_minutes AS m (minute, queue, type, shard, hits)
SELECT round(date_part('epoch', t.now) * 1000000)::bigint / 60000000, u.q, u.t, pg_backend_pid(), count(*)
FROM t, unnest($2::text[], $3::text[]) AS u(q, t)
GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
ON CONFLICT (minute, queue, type, shard) DO UPDATE SET hits = m.hits + excluded.hits`),

		// At most $7 ready tasks of queue $2 and priority $3 a claim takes
		// before run_at $4, id $5, from run_at $6 on: one range of the
		// claim index.
		countAhead: q(`SELECT count(*) FROM (SELECT 1 FROM {schema}.keel_tasks k
	WHERE k.state = 'pending' AND k.queue = $2 AND k.priority = $3 AND k.run_at <= ` + nowExpr + `
		AND k.run_at >= $6 AND (k.run_at, k.id) < ($4::timestamptz, $5::bigint)
	LIMIT $7) a`),

		retryMatching:    q(strings.Replace(retryMatchingTmpl, "{ids}", "", 1)),
		retryMatchingIDs: q(strings.Replace(retryMatchingTmpl, "{ids}", idsFilter, 1)),
		purgeMatching:    q(strings.Replace(purgeMatchingTmpl, "{ids}", "", 1)),
		purgeMatchingIDs: q(strings.Replace(purgeMatchingTmpl, "{ids}", idsFilter, 1)),

		// The newest $2 succeeded and dead tasks that finished at or after
		// $1, backwards along keel_tasks_finished: $2 index entries and
		// rows, whatever the table's size.
		recentFinished: q(`SELECT k.id, k.queue, k.type, k.state, k.attempt, k.created_at, k.run_at, k.attempted_at, k.finished_at
FROM {schema}.keel_tasks k
WHERE k.state IN ('succeeded', 'dead') AND k.finished_at >= $1
ORDER BY k.finished_at DESC
LIMIT $2`),

		// One upsert: a NULL argument keeps the stored value (0 on a new
		// row); the conflicting row is locked, so concurrent patches of
		// different fields all survive.
		patchSetting: q(nowCTE + `INSERT INTO {schema}.keel_settings AS s (` + settingColumns + `)
SELECT $2, $3, coalesce($4::boolean, false), coalesce($5::integer, 0), coalesce($6::bigint, 0),
	coalesce($7::integer, 0), coalesce($8::bigint, 0), coalesce($9::bigint, 0), t.now,
	coalesce($10::double precision, 0), coalesce($11::integer, 0) FROM t
ON CONFLICT (kind, name) DO UPDATE SET paused = coalesce($4, s.paused), concurrency = coalesce($5, s.concurrency),
	timeout_ms = coalesce($6, s.timeout_ms), max_attempts = coalesce($7, s.max_attempts),
	backoff_base_ms = coalesce($8, s.backoff_base_ms), backoff_max_ms = coalesce($9, s.backoff_max_ms),
	rate = coalesce($10, s.rate), burst = coalesce($11, s.burst),
	tokens_at = CASE WHEN $10::double precision IS NULL AND $11::integer IS NULL THEN s.tokens_at END,
	updated_at = excluded.updated_at
RETURNING ` + settingColumns),

		// A limited claim (migration 011): the limit's row, locked until
		// the claim commits; the running tasks of a type or a queue
		// through keel_tasks_lease, read as a range from -infinity
		// (without statistics on lease_expires_at, IS NOT NULL read the
		// whole table); each statement of a READ COMMITTED transaction
		// sees what committed before it began, so every claim that held
		// the lock before. Then the clock, once the lock is held.
		limitRow: q(`SELECT concurrency, rate, burst, tokens, tokens_at FROM {schema}.keel_settings
WHERE kind = $1 AND name = $2 FOR UPDATE`),
		runningOfType:  q(`SELECT count(*) FROM {schema}.keel_tasks WHERE lease_expires_at > '-infinity' AND state = 'running' AND type = $1`),
		runningOfQueue: q(`SELECT count(*) FROM {schema}.keel_tasks WHERE lease_expires_at > '-infinity' AND state = 'running' AND queue = $1`),
		limitNow:       `SELECT (extract(epoch FROM coalesce($1::timestamptz, clock_timestamp())) * 1000000)::bigint`,
		spendTokens:    q(`UPDATE {schema}.keel_settings SET tokens = $3, tokens_at = $4 WHERE kind = $1 AND name = $2`),

		listSettings: q(`SELECT ` + settingColumns + ` FROM {schema}.keel_settings ORDER BY kind, name`),

		// Each declaration replaces the type's row whole.
		declareType: q(nowCTE + `INSERT INTO {schema}.keel_types AS y (` + typeColumns + `)
SELECT $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, t.now FROM t
` + sqlutil.UpsertTypeSet),

		listTypes: q(`SELECT ` + typeColumns + ` FROM {schema}.keel_types ORDER BY name`),

		listTypesNamed: q(`SELECT ` + typeColumns + ` FROM {schema}.keel_types WHERE name = ANY($1::text[]) ORDER BY name`),

		lead: q(nowCTE + `INSERT INTO {schema}.keel_leaders AS l (name, owner, expires_at)
SELECT $2, $3, t.now + $4 * interval '1 microsecond' FROM t
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE l.owner = excluded.owner OR l.expires_at < coalesce($1::timestamptz, now())
RETURNING owner`),

		resign: q(`DELETE FROM {schema}.keel_leaders WHERE name = $1 AND owner = $2`),

		list: q(`SELECT ` + taskColumns + ` FROM {schema}.keel_tasks`),
	}
}

// qualified prefixes each column of cols with alias.
func qualified(alias, cols string) string {
	parts := strings.Split(cols, ",")
	for i, p := range parts {
		parts[i] = alias + "." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// The node registry's SQL (keel_nodes, migration 002). Like the task
// queries, every statement starts from one now: $1 with the caller's clock,
// else the database's now(). The registry is written once per heartbeat per
// process, so the schema is put in at each call.

const sqlRegisterNode = nowCTE + `INSERT INTO {schema}.keel_nodes AS n (name, host, pid, queues, started_at, heartbeat_at, workers, version, running)
SELECT $2, $3, $4, $5, coalesce($6::timestamptz, t.now), t.now, $7, $8, $9 FROM t
ON CONFLICT (name) DO UPDATE SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
	started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, workers = excluded.workers,
	version = excluded.version, running = excluded.running`

const sqlListNodes = `SELECT name, host, pid, queues, started_at, heartbeat_at, workers, version, running FROM {schema}.keel_nodes ORDER BY name`

const sqlRemoveNode = `DELETE FROM {schema}.keel_nodes WHERE name = $1`

const sqlPruneNodes = nowCTE + `, gone AS (
	DELETE FROM {schema}.keel_nodes n USING t
	WHERE n.heartbeat_at < t.now - $2 * interval '1 microsecond'
	RETURNING n.name),
-- The reports (migration 016) not refreshed within $2 of sources on nodes
-- without a heartbeat within $2 either: a source whose process died. A
-- live node's stopped source keeps its last report.
reports AS (
	DELETE FROM {schema}.keel_sources s USING t
	WHERE s.updated_at < t.now - $2 * interval '1 microsecond'
		AND NOT EXISTS (SELECT 1 FROM {schema}.keel_nodes n
			WHERE n.name COLLATE "C" = s.node AND n.heartbeat_at >= t.now - $2 * interval '1 microsecond'))
SELECT count(*) FROM gone`

// Alerts, their deliveries and stored documents (keel_alerts,
// keel_alert_deliveries, keel_meta, migration 008). Unlike the task
// queries, every time is the caller's (the leader's clock), on every
// database alike. The schema is put in at each call.

// sqlFireAlert opens an alert unless one of its rule and subject is open:
// the unique open_key decides, and a conflict returns no row.
const sqlFireAlert = `INSERT INTO {schema}.keel_alerts (rule, subject, open_key, message, hint, vals, fired_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (open_key) DO NOTHING
RETURNING ` + sqlutil.AlertColumns

const sqlOpenAlert = `SELECT ` + sqlutil.AlertColumns + ` FROM {schema}.keel_alerts WHERE open_key = $1`

const sqlGetAlert = `SELECT ` + sqlutil.AlertColumns + ` FROM {schema}.keel_alerts WHERE id = $1`

const sqlListAlerts = `SELECT ` + sqlutil.AlertColumns + ` FROM {schema}.keel_alerts`

// sqlUpdateAlert records the latest message and values of alert $4 if it
// is open.
const sqlUpdateAlert = `UPDATE {schema}.keel_alerts SET current_message = $1, current_vals = $2, current_at = $3
WHERE id = $4 AND open_key IS NOT NULL`

// sqlResolveAlert resolves alert $4 if it is open.
const sqlResolveAlert = `UPDATE {schema}.keel_alerts SET open_key = NULL, resolved_at = $1, resolved_message = $2, resolved_vals = $3
WHERE id = $4 AND open_key IS NOT NULL`

// sqlDeliveries reads the deliveries of the alerts in $1.
const sqlDeliveries = `SELECT ` + sqlutil.DeliveryColumns + ` FROM {schema}.keel_alert_deliveries
WHERE alert_id = ANY($1::bigint[]) ORDER BY alert_id, event, notifier`

// sqlRecordDelivery counts one attempt of alert $1's event $2 to notifier
// $3 at $6: delivered_at $4 (NULL for a failure) is kept from the first
// success, last_error is $5. An unknown alert inserts nothing.
const sqlRecordDelivery = `INSERT INTO {schema}.keel_alert_deliveries AS d
	(alert_id, event, notifier, attempts, delivered_at, last_error, updated_at)
SELECT id, $2::text, $3::text, 1, $4::timestamptz, $5::text, $6::timestamptz FROM {schema}.keel_alerts WHERE id = $1
ON CONFLICT (alert_id, event, notifier) DO UPDATE SET attempts = d.attempts + 1,
	delivered_at = coalesce(d.delivered_at, excluded.delivered_at), last_error = excluded.last_error,
	updated_at = excluded.updated_at`

const sqlGetMeta = `SELECT value FROM {schema}.keel_meta WHERE name = $1`

const sqlPutMeta = `INSERT INTO {schema}.keel_meta (name, value, updated_at) VALUES ($1, $2, $3)
ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`

const sqlDeleteMeta = `DELETE FROM {schema}.keel_meta WHERE name = $1`

// notifySQL sends one notification per queue in $2, each with the payload
// $3 || queue (see notify.go).
const notifySQL = `SELECT pg_notify($1, $3 || q) FROM unnest($2::text[]) AS q`

// The migrations' bookkeeping (migrate.go); the lock serialises migrators.
const (
	sqlMigrateLock     = `SELECT pg_advisory_xact_lock(hashtext($1))`
	sqlMigrationsTable = `CREATE SCHEMA IF NOT EXISTS {schema};
			CREATE TABLE IF NOT EXISTS {schema}.keel_migrations (
				version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`
	sqlMigrationAt     = `SELECT applied_at FROM {schema}.keel_migrations WHERE version = $1`
	sqlMigrationRecord = `INSERT INTO {schema}.keel_migrations (version, name) VALUES ($1, $2)`
)
