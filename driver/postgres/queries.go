package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keelq/keel/driver"
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

const taskColumns = `id, queue, type, priority, payload, state, attempt, max_attempts, fence, run_at, timeout_ms,
	idem_key, payload_digest, lease_owner, lease_expires_at, created_at, started_at, attempted_at,
	finished_at, updated_at, errors, result, meta`

type queries struct {
	reserveIDs,
	insert, byKey, claim, claimExcluding, succeedMany, transition, heartbeat, expired, get,
	cancel, retry, counts, lead, resign, list,
	countFinished, countAhead, retryMatching, purgeMatching, patchSetting, listSettings string
}

// claimTmpl is the claim; {exclude} is empty in claim and the paused-types
// filter in claimExcluding, so a claim that excludes nothing pays nothing.
const claimTmpl = nowCTE + `, picked AS (
	SELECT k.id FROM {schema}.keel_tasks k
	WHERE k.state = 'pending' AND k.queue = $2 AND k.run_at <= ` + nowExpr + `{exclude}
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
	k.created_at, k.lease_expires_at, k.attempted_at`

// matchWhere selects the tasks of a bulk operation: state $2 (dead or
// cancelled; the literal list lets a generic plan use keel_tasks_failed),
// and type $3, queue $4, finished_at from $5 and before $6 where not NULL.
const matchWhere = `k.state IN ('dead', 'cancelled') AND k.state = $2
		AND ($3::text IS NULL OR k.type = $3) AND ($4::text IS NULL OR k.queue = $4)
		AND ($5::timestamptz IS NULL OR k.finished_at >= $5) AND ($6::timestamptz IS NULL OR k.finished_at < $6)`

const settingColumns = `kind, name, paused, concurrency, timeout_ms, max_attempts, backoff_base_ms,
	backoff_max_ms, updated_at`

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
SELECT $2, $3, $4, $5::text::jsonb, 'pending', $6, ` + plusMicros("$7") + `, $8, $9, $10,
	t.now, t.now, $11::text::jsonb FROM t
ON CONFLICT DO NOTHING
RETURNING ` + taskColumns),

		byKey: q(`SELECT ` + taskColumns + ` FROM {schema}.keel_tasks
WHERE idem_key = $1 AND state IN ('pending', 'running', 'succeeded')`),

		claim:          q(strings.Replace(claimTmpl, "{exclude}", "", 1)),
		claimExcluding: q(strings.Replace(claimTmpl, "{exclude}", " AND k.type <> ALL($6::text[])", 1)),

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
	attempt = k.attempt - $5,
	errors = CASE WHEN $6::text IS NULL THEN k.errors ELSE
		(CASE WHEN jsonb_array_length(k.errors) >= 20 THEN k.errors - 0 ELSE k.errors END) || jsonb_build_array($6::text::jsonb) END,
	finished_at = CASE WHEN $2 IN ('succeeded', 'dead') THEN t.now ELSE NULL END,
	lease_owner = CASE WHEN $2 = 'succeeded' THEN k.lease_owner END, lease_expires_at = NULL, updated_at = t.now
FROM t
WHERE k.id = $7 AND k.fence = $8 AND k.state = 'running' AND k.lease_owner = $9`),

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

		expired: q(`SELECT k.id, k.type, k.attempt, k.max_attempts, k.fence, k.lease_owner, k.attempted_at, k.run_at, ` + nowExpr + `
FROM {schema}.keel_tasks k
WHERE k.state = 'running' AND k.lease_expires_at < ` + nowExpr + `
ORDER BY k.lease_expires_at
LIMIT $2
FOR UPDATE OF k SKIP LOCKED`),

		get: q(`SELECT ` + taskColumns + ` FROM {schema}.keel_tasks WHERE id = $1`),

		cancel: q(nowCTE + `UPDATE {schema}.keel_tasks k
SET state = 'cancelled', finished_at = t.now, updated_at = t.now, lease_owner = NULL, lease_expires_at = NULL
FROM t
WHERE k.id = $2 AND k.state IN ('pending', 'running')
RETURNING ` + qualified("k", taskColumns)),

		retry: q(nowCTE + `UPDATE {schema}.keel_tasks k
SET state = 'pending', attempt = 0, run_at = t.now, finished_at = NULL, updated_at = t.now
FROM t
WHERE k.id = $2 AND k.state IN ('dead', 'cancelled')
RETURNING ` + qualified("k", taskColumns)),

		counts: q(`SELECT queue, type, state, count(*) FROM {schema}.keel_tasks
GROUP BY queue, type, state ORDER BY queue, type, state`),

		// Reads the partial index keel_tasks_finished only.
		countFinished: q(`SELECT queue, state, count(*) FROM {schema}.keel_tasks
WHERE state IN ('succeeded', 'dead') AND finished_at >= $1
GROUP BY queue, state ORDER BY queue, state`),

		// The ready tasks of queue $2 a claim takes before priority $3,
		// run_at $4, id $5: two ranges of the claim index, higher
		// priorities and the same priority earlier in line.
		countAhead: q(`SELECT
	(SELECT count(*) FROM {schema}.keel_tasks k
	WHERE k.state = 'pending' AND k.queue = $2 AND k.priority > $3 AND k.run_at <= ` + nowExpr + `)
	+ (SELECT count(*) FROM {schema}.keel_tasks k
	WHERE k.state = 'pending' AND k.queue = $2 AND k.priority = $3 AND k.run_at <= ` + nowExpr + `
		AND (k.run_at, k.id) < ($4::timestamptz, $5::bigint))`),

		// Retry (same columns) for the first $7 matching tasks. A task
		// whose key another task holds is skipped, and of tasks sharing a
		// key only the lowest id is taken, so the unique index does not
		// fail the batch (a key taken by a concurrent insert still can:
		// the caller runs the statement again).
		retryMatching: q(nowCTE + `, c AS (
	SELECT k.id, k.idem_key FROM {schema}.keel_tasks k
	WHERE ` + matchWhere + `
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
SET state = 'pending', attempt = 0, run_at = t.now, finished_at = NULL, updated_at = t.now
FROM picked, t
WHERE k.id = picked.id AND k.state IN ('dead', 'cancelled')
RETURNING k.queue`),

		// Deletes the first $7 matching tasks (t is unused: every
		// statement's first argument is its now).
		purgeMatching: q(nowCTE + `DELETE FROM {schema}.keel_tasks
WHERE id IN (
	SELECT k.id FROM {schema}.keel_tasks k
	WHERE ` + matchWhere + `
	ORDER BY k.id
	LIMIT $7
	FOR UPDATE OF k)
	AND state IN ('dead', 'cancelled')`),

		// One upsert: a NULL argument keeps the stored value (0 on a new
		// row); the conflicting row is locked, so concurrent patches of
		// different fields all survive.
		patchSetting: q(nowCTE + `INSERT INTO {schema}.keel_settings AS s (` + settingColumns + `)
SELECT $2, $3, coalesce($4::boolean, false), coalesce($5::integer, 0), coalesce($6::bigint, 0),
	coalesce($7::integer, 0), coalesce($8::bigint, 0), coalesce($9::bigint, 0), t.now FROM t
ON CONFLICT (kind, name) DO UPDATE SET paused = coalesce($4, s.paused), concurrency = coalesce($5, s.concurrency),
	timeout_ms = coalesce($6, s.timeout_ms), max_attempts = coalesce($7, s.max_attempts),
	backoff_base_ms = coalesce($8, s.backoff_base_ms), backoff_max_ms = coalesce($9, s.backoff_max_ms),
	updated_at = excluded.updated_at
RETURNING ` + settingColumns),

		listSettings: q(`SELECT ` + settingColumns + ` FROM {schema}.keel_settings ORDER BY kind, name`),

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

// Insert implements driver.Driver: all tasks in one transaction.
func (d *Driver) Insert(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("insert tasks: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it is a no-op
	out, err := d.insertNotify(ctx, pgxQuerier{db: tx}, params)
	if err != nil {
		return nil, err
	}
	// The caller learns exactly what happened: a context that ended before
	// the commit writes nothing; once committing, the commit is not
	// abandoned halfway because the context ended.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("insert tasks: commit: %w", err)
	}
	return out, nil
}

// InsertTx implements driver.Driver. The inserts run under a savepoint so
// a failure leaves nothing of the batch in the caller's transaction.
func (d *Driver) InsertTx(ctx context.Context, dtx driver.Tx, params []driver.InsertParams) ([]driver.InsertResult, error) {
	q, err := callerTx(dtx)
	if err != nil {
		return nil, err
	}
	if _, err := q.exec(ctx, `SAVEPOINT keel_insert`, nil); err != nil {
		return nil, fmt.Errorf("insert tasks: %w", err)
	}
	out, err := d.insertNotify(ctx, q, params)
	if err != nil {
		undo := context.WithoutCancel(ctx)
		if _, rbErr := q.exec(undo, `ROLLBACK TO SAVEPOINT keel_insert`, nil); rbErr != nil {
			return nil, errors.Join(err, fmt.Errorf("insert tasks: undo: %w", rbErr))
		}
		q.exec(undo, `RELEASE SAVEPOINT keel_insert`, nil) //nolint:errcheck // the savepoint is empty now
		return nil, err
	}
	if _, err := q.exec(ctx, `RELEASE SAVEPOINT keel_insert`, nil); err != nil {
		return nil, fmt.Errorf("insert tasks: %w", err)
	}
	return out, nil
}

// insertRows inserts params one statement each.
func (d *Driver) insertRows(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, error) {
	out := make([]driver.InsertResult, 0, len(params))
	for _, p := range params {
		var row *driver.TaskRow
		err := q.query(ctx, d.sql.insert, []any{d.now(p.Now), p.Queue, p.Type, p.Priority, string(p.Payload),
			p.MaxAttempts, offset(p.RunAt, p.Now), p.Timeout.Milliseconds(), nullString(p.IdemKey),
			p.PayloadDigest, nullBytes(p.Meta)}, func(scan func(...any) error) error {
			var err error
			row, err = scanTask(scan)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("insert task: %w", err)
		}
		if row != nil {
			out = append(out, driver.InsertResult{Task: row})
			continue
		}
		if p.IdemKey == "" {
			return nil, errors.New("insert task: no row inserted")
		}
		// The key is held: the unique index decided, load the holder.
		err = q.byID().query(ctx, d.sql.byKey, []any{p.IdemKey}, func(scan func(...any) error) error {
			var err error
			row, err = scanTask(scan)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("load task holding idempotency key: %w", err)
		}
		if row == nil {
			// The holder finished and released the key between the two
			// statements; the caller may retry.
			return nil, errors.New("insert task: idempotency key holder vanished, try again")
		}
		if row.PayloadDigest != p.PayloadDigest {
			return nil, fmt.Errorf("insert task: key held by task %d: %w", row.ID, driver.ErrIdempotencyConflict)
		}
		out = append(out, driver.InsertResult{Task: row, Duplicate: true})
	}
	return out, nil
}

// Claim implements driver.Driver.
func (d *Driver) Claim(ctx context.Context, p driver.ClaimParams) ([]driver.TaskRow, error) {
	var out []driver.TaskRow
	query, args := d.sql.claim, []any{d.now(p.Now), p.Queue, p.Limit, p.Owner, offset(p.LeaseExpiresAt, p.Now)}
	if len(p.ExcludeTypes) > 0 {
		query, args = d.sql.claimExcluding, append(args, p.ExcludeTypes)
	}
	err := pgxQuerier{db: d.pool}.query(ctx, query, args, func(scan func(...any) error) error {
		r := driver.TaskRow{Queue: p.Queue, State: driver.StateRunning, LeaseOwner: p.Owner}
		var timeoutMS int64
		if err := scan(&r.ID, &r.Type, &r.Priority, &r.Payload, &r.Attempt, &r.MaxAttempts, &r.Fence,
			&r.RunAt, &timeoutMS, &r.CreatedAt, &r.LeaseExpiresAt, &r.AttemptedAt); err != nil {
			return err
		}
		r.Timeout = time.Duration(timeoutMS) * time.Millisecond
		r.RunAt, r.CreatedAt = r.RunAt.UTC(), r.CreatedAt.UTC()
		r.LeaseExpiresAt, r.AttemptedAt = r.LeaseExpiresAt.UTC(), r.AttemptedAt.UTC()
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	driver.SortClaimed(out)
	return out, nil
}

// Finish implements driver.Driver: successes without a result in one
// statement, other transitions one statement each, in one transaction.
func (d *Driver) Finish(ctx context.Context, p driver.FinishParams) ([]int64, error) {
	var ok []int64
	var ids []int64
	var keys []string
	var others []driver.Transition
	for _, t := range p.Transitions {
		if t.State == driver.StateSucceeded && t.Error == nil && !t.Refund && t.Result == nil {
			ids, keys = append(ids, t.ID), append(keys, strconv.FormatInt(t.ID, 10)+":"+strconv.FormatInt(t.Fence, 10))
		} else {
			others = append(others, t)
		}
	}
	finish := func(q querier) error {
		ok = ok[:0]
		if len(ids) > 0 {
			err := q.byID().query(ctx, d.sql.succeedMany, []any{d.now(p.Now), ids, keys, p.Owner}, func(scan func(...any) error) error {
				var id int64
				if err := scan(&id); err != nil {
					return err
				}
				ok = append(ok, id)
				return nil
			})
			if err != nil {
				return fmt.Errorf("finish tasks: %w", err)
			}
		}
		for _, t := range others {
			applied, err := d.transition(ctx, q, p.Owner, p.Now, t)
			if err != nil {
				return err
			}
			if applied {
				ok = append(ok, t.ID)
			}
		}
		return nil
	}
	var err error
	if len(others) == 0 {
		err = finish(pgxQuerier{db: d.pool})
	} else {
		err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error { return finish(pgxQuerier{db: tx}) })
	}
	if err != nil {
		return nil, err
	}
	return ok, nil
}

// FinishTx implements driver.Driver.
func (d *Driver) FinishTx(ctx context.Context, dtx driver.Tx, owner string, now time.Time, t driver.Transition) (bool, error) {
	q, err := callerTx(dtx)
	if err != nil {
		return false, err
	}
	return d.transition(ctx, q, owner, now, t)
}

func (d *Driver) transition(ctx context.Context, q querier, owner string, now time.Time, t driver.Transition) (bool, error) {
	var errJSON any
	if t.Error != nil {
		b, err := json.Marshal(t.Error)
		if err != nil {
			return false, fmt.Errorf("finish task %d: %w", t.ID, err)
		}
		errJSON = string(b)
	}
	var runAt any
	if !t.RunAt.IsZero() {
		runAt = offset(t.RunAt, now)
	}
	refund := 0
	if t.Refund {
		refund = 1
	}
	n, err := q.byID().exec(ctx, d.sql.transition, []any{d.now(now), string(t.State), runAt, nullBytes(t.Result),
		refund, errJSON, t.ID, t.Fence, owner})
	if err != nil {
		return false, fmt.Errorf("finish task %d: %w", t.ID, err)
	}
	return n == 1, nil
}

// Heartbeat implements driver.Driver.
func (d *Driver) Heartbeat(ctx context.Context, p driver.HeartbeatParams) ([]int64, error) {
	var held []int64
	err := pgxQuerier{db: d.pool}.byID().query(ctx, d.sql.heartbeat, []any{d.now(p.Now), offset(p.LeaseExpiresAt, p.Now),
		p.IDs, p.Owner}, func(scan func(...any) error) error {
		var id int64
		if err := scan(&id); err != nil {
			return err
		}
		held = append(held, id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	return held, nil
}

// Rescue implements driver.Driver.
func (d *Driver) Rescue(ctx context.Context, p driver.RescueParams) ([]driver.TaskRow, error) {
	var out []driver.TaskRow
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		out = out[:0]
		q := pgxQuerier{db: tx}
		type expired struct {
			id                   int64
			typ, owner           string
			attempt, maxAttempts int
			fence                int64
			attemptedAt          *time.Time
			runAt, dbNow         time.Time
		}
		var list []expired
		err := q.query(ctx, d.sql.expired, []any{d.now(p.Now), p.Limit}, func(scan func(...any) error) error {
			var e expired
			if err := scan(&e.id, &e.typ, &e.attempt, &e.maxAttempts, &e.fence, &e.owner, &e.attemptedAt, &e.runAt, &e.dbNow); err != nil {
				return err
			}
			list = append(list, e)
			return nil
		})
		if err != nil {
			return fmt.Errorf("rescue: %w", err)
		}
		for _, e := range list {
			// Offsets are taken from the database's now, which the
			// transition adds them back to.
			t := driver.Transition{ID: e.id, Fence: e.fence, State: driver.StatePending,
				RunAt: e.runAt.Add(p.Backoff(e.typ, e.attempt)),
				Error: &driver.AttemptError{Attempt: e.attempt, Node: e.owner, End: e.dbNow.UTC(),
					Outcome: driver.OutcomeLeaseExpired, Error: "lease expired: worker lost"}}
			if e.attemptedAt != nil {
				t.Error.Start = e.attemptedAt.UTC()
			}
			if e.attempt >= e.maxAttempts {
				t.State, t.RunAt = driver.StateDead, time.Time{}
			}
			applied, err := d.transition(ctx, q, e.owner, e.dbNow, t)
			if err != nil {
				return err
			}
			if !applied {
				continue
			}
			row, err := d.getWith(ctx, q, e.id)
			if err != nil {
				return fmt.Errorf("rescue: %w", err)
			}
			out = append(out, *row)
		}
		rescued := make([]*driver.TaskRow, len(out))
		for i := range out {
			rescued[i] = &out[i]
		}
		return d.notifyReady(ctx, q, rescued)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Get implements driver.Driver.
func (d *Driver) Get(ctx context.Context, id int64) (*driver.TaskRow, error) {
	row, err := d.getWith(ctx, pgxQuerier{db: d.pool}, id)
	if err != nil {
		return nil, err
	}
	return row, nil
}

func (d *Driver) getWith(ctx context.Context, q querier, id int64) (*driver.TaskRow, error) {
	row, err := d.one(ctx, q.byID(), d.sql.get, id)
	if err != nil {
		return nil, fmt.Errorf("get task %d: %w", id, err)
	}
	if row == nil {
		return nil, driver.ErrNotFound
	}
	return row, nil
}

// one returns the single task row a query yields, or nil.
func (d *Driver) one(ctx context.Context, q querier, query string, args ...any) (*driver.TaskRow, error) {
	var row *driver.TaskRow
	err := q.query(ctx, query, args, func(scan func(...any) error) error {
		var err error
		row, err = scanTask(scan)
		return err
	})
	return row, err
}

// Cancel implements driver.Driver.
func (d *Driver) Cancel(ctx context.Context, id int64, now time.Time) (*driver.TaskRow, error) {
	q := pgxQuerier{db: d.pool}
	row, err := d.one(ctx, q.byID(), d.sql.cancel, d.now(now), id)
	if err != nil {
		return nil, fmt.Errorf("cancel task %d: %w", id, err)
	}
	if row == nil {
		return nil, d.missingOrWrongState(ctx, id)
	}
	return row, nil
}

// Retry implements driver.Driver.
func (d *Driver) Retry(ctx context.Context, id int64, now time.Time) (*driver.TaskRow, error) {
	row, err := d.retryNotify(ctx, now, id)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return nil, fmt.Errorf("retry task %d: a newer task holds its idempotency key: %w", id, driver.ErrIdempotencyConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("retry task %d: %w", id, err)
	}
	if row == nil {
		return nil, d.missingOrWrongState(ctx, id)
	}
	return row, nil
}

func (d *Driver) missingOrWrongState(ctx context.Context, id int64) error {
	if _, err := d.Get(ctx, id); err != nil {
		return err
	}
	return fmt.Errorf("task %d: %w", id, driver.ErrWrongState)
}

// List implements driver.Driver.
func (d *Driver) List(ctx context.Context, p driver.ListParams) ([]driver.TaskRow, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if p.State != "" {
		add("state = $%d", string(p.State))
	}
	if p.Type != "" {
		add("type = $%d", p.Type)
	}
	if p.Queue != "" {
		add("queue = $%d", p.Queue)
	}
	if !p.CreatedAfter.IsZero() {
		add("created_at >= $%d", p.CreatedAfter)
	}
	if !p.CreatedBefore.IsZero() {
		add("created_at < $%d", p.CreatedBefore)
	}
	if !p.FinishedAfter.IsZero() {
		add("finished_at >= $%d", p.FinishedAfter)
	}
	if !p.FinishedBefore.IsZero() {
		add("finished_at < $%d", p.FinishedBefore)
	}
	if p.BeforeID > 0 {
		add("id < $%d", p.BeforeID)
	}
	q := d.sql.list
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	args = append(args, limit)
	q += fmt.Sprintf(" ORDER BY id DESC LIMIT $%d", len(args))
	var out []driver.TaskRow
	err := pgxQuerier{db: d.pool}.query(ctx, q, args, func(scan func(...any) error) error {
		row, err := scanTask(scan)
		if err != nil {
			return err
		}
		out = append(out, *row)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return out, nil
}

// Counts implements driver.Driver.
func (d *Driver) Counts(ctx context.Context) ([]driver.QueueCount, error) {
	var out []driver.QueueCount
	err := pgxQuerier{db: d.pool}.query(ctx, d.sql.counts, nil, func(scan func(...any) error) error {
		var c driver.QueueCount
		var state string
		if err := scan(&c.Queue, &c.Type, &state, &c.Count); err != nil {
			return err
		}
		c.State = driver.State(state)
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	return out, nil
}

// Lead implements driver.Driver.
func (d *Driver) Lead(ctx context.Context, p driver.LeadParams) (bool, error) {
	leading := false
	err := pgxQuerier{db: d.pool}.query(ctx, d.sql.lead, []any{d.now(p.Now), p.Name, p.Owner, p.TTL.Microseconds()},
		func(scan func(...any) error) error {
			var owner string
			leading = true
			return scan(&owner)
		})
	if err != nil {
		return false, fmt.Errorf("elect leader: %w", err)
	}
	return leading, nil
}

// Resign implements driver.Driver.
func (d *Driver) Resign(ctx context.Context, name, owner string) error {
	if _, err := d.pool.Exec(ctx, d.sql.resign, name, owner); err != nil {
		return fmt.Errorf("resign leadership: %w", err)
	}
	return nil
}
