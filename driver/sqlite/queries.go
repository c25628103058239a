package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
)

// All of the driver's SQL lives in this file.

const taskColumns = `id, queue, type, priority, payload, state, attempt, max_attempts, fence, run_at, timeout_ms,
	idem_key, payload_digest, lease_owner, lease_expires_at, created_at, started_at, attempted_at,
	finished_at, updated_at, errors, result, meta`

const sqlInsert = `INSERT INTO keel_tasks (queue, type, priority, payload, state, max_attempts, run_at,
	timeout_ms, idem_key, payload_digest, created_at, updated_at, meta)
VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING
RETURNING ` + taskColumns

const sqlByKey = `SELECT ` + taskColumns + ` FROM keel_tasks
WHERE idem_key = ? AND state IN ('pending', 'running', 'succeeded')`

// claimColumns are what a worker needs to run a task; fewer columns than
// taskColumns keep the claim cheap.
const claimColumns = `id, type, priority, payload, attempt, max_attempts, fence, run_at, timeout_ms, created_at`

// sqlClaim and sqlClaimExcluding are the claim without and with the
// paused-types filter (?6, a JSON array of types): a claim that excludes
// nothing pays nothing for the feature.
const (
	sqlClaim          = sqlClaimHead + sqlClaimTail
	sqlClaimExcluding = sqlClaimHead + `
		AND type NOT IN (SELECT value FROM json_each(?6))` + sqlClaimTail
)

const sqlClaimHead = `UPDATE keel_tasks
SET state = 'running', attempt = attempt + 1, fence = fence + 1, lease_owner = ?1, lease_expires_at = ?2,
	attempted_at = ?3, started_at = coalesce(started_at, ?3), updated_at = ?3
WHERE id IN (
	SELECT id FROM keel_tasks
	WHERE state = 'pending' AND queue = ?4 AND run_at <= ?3`

const sqlClaimTail = `
	ORDER BY priority DESC, run_at, id
	LIMIT ?5)
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
	attempt = attempt - ?4, errors = ` + appendError + `,
	finished_at = CASE WHEN ?1 IN ('succeeded', 'dead') THEN ?6 ELSE NULL END,
	lease_owner = CASE WHEN ?1 = 'succeeded' THEN lease_owner END, lease_expires_at = NULL, updated_at = ?6
WHERE id = ?7 AND fence = ?8 AND state = 'running' AND lease_owner = ?9`

const sqlHeartbeat = `UPDATE keel_tasks SET lease_expires_at = ?1, updated_at = ?2
WHERE id IN (SELECT value FROM json_each(?3)) AND state = 'running' AND lease_owner = ?4
RETURNING id`

const sqlExpired = `SELECT id, type, attempt, max_attempts, fence, lease_owner, attempted_at, run_at FROM keel_tasks
WHERE state = 'running' AND lease_expires_at < ? ORDER BY lease_expires_at LIMIT ?`

const sqlGet = `SELECT ` + taskColumns + ` FROM keel_tasks WHERE id = ?`

const sqlCancel = `UPDATE keel_tasks
SET state = 'cancelled', finished_at = ?1, updated_at = ?1, lease_owner = NULL, lease_expires_at = NULL
WHERE id = ?2 AND state IN ('pending', 'running')
RETURNING ` + taskColumns

const sqlKeyHeld = `SELECT count(*) FROM keel_tasks
WHERE idem_key = ? AND id <> ? AND state IN ('pending', 'running', 'succeeded')`

const sqlRetry = `UPDATE keel_tasks
SET state = 'pending', attempt = 0, run_at = ?1, finished_at = NULL, updated_at = ?1
WHERE id = ?2 AND state IN ('dead', 'cancelled')
RETURNING ` + taskColumns

const sqlCounts = `SELECT queue, type, state, count(*) FROM keel_tasks
GROUP BY queue, type, state ORDER BY queue, type, state`

// sqlCountFinished reads the partial index keel_tasks_finished only.
const sqlCountFinished = `SELECT queue, state, count(*) FROM keel_tasks
WHERE state IN ('succeeded', 'dead') AND finished_at >= ?
GROUP BY queue, state ORDER BY queue, state`

// sqlCountAhead counts, on the claim index, the ready tasks of queue ?1 a
// claim takes before priority ?2, run_at ?3, id ?4 at now ?5: two ranges,
// higher priorities and the same priority earlier in line.
const sqlCountAhead = `SELECT
	(SELECT count(*) FROM keel_tasks
	WHERE state = 'pending' AND queue = ?1 AND priority > ?2 AND run_at <= ?5)
	+ (SELECT count(*) FROM keel_tasks
	WHERE state = 'pending' AND queue = ?1 AND priority = ?2 AND run_at <= ?5
		AND (run_at < ?3 OR (run_at = ?3 AND id < ?4)))`

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
SET state = 'pending', attempt = 0, run_at = ?7, finished_at = NULL, updated_at = ?7
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
	SELECT min(id) FROM c WHERE idem_key IS NOT NULL GROUP BY idem_key)`

// sqlPurgeMatching deletes the first ?6 matching tasks.
const sqlPurgeMatching = `DELETE FROM keel_tasks
WHERE id IN (
	SELECT id FROM keel_tasks
	WHERE ` + matchWhere + `
	ORDER BY id
	LIMIT ?6)`

const settingColumns = `kind, name, paused, concurrency, timeout_ms, max_attempts, backoff_base_ms,
	backoff_max_ms, updated_at`

// sqlPatchSetting upserts one setting in one statement: a NULL argument
// keeps the stored value (0 on a new row).
const sqlPatchSetting = `INSERT INTO keel_settings (` + settingColumns + `)
VALUES (?1, ?2, coalesce(?3, 0), coalesce(?4, 0), coalesce(?5, 0), coalesce(?6, 0), coalesce(?7, 0),
	coalesce(?8, 0), ?9)
ON CONFLICT (kind, name) DO UPDATE SET paused = coalesce(?3, paused), concurrency = coalesce(?4, concurrency),
	timeout_ms = coalesce(?5, timeout_ms), max_attempts = coalesce(?6, max_attempts),
	backoff_base_ms = coalesce(?7, backoff_base_ms), backoff_max_ms = coalesce(?8, backoff_max_ms),
	updated_at = ?9
RETURNING ` + settingColumns

const sqlListSettings = `SELECT ` + settingColumns + ` FROM keel_settings ORDER BY kind, name`

const sqlLead = `INSERT INTO keel_leaders (name, owner, expires_at) VALUES (?1, ?2, ?3)
ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
WHERE keel_leaders.owner = excluded.owner OR keel_leaders.expires_at < ?4
RETURNING owner`

const sqlResign = `DELETE FROM keel_leaders WHERE name = ? AND owner = ?`

// sqlTx accepts the caller transactions this driver can use: *sql.Tx.
func sqlTx(tx driver.Tx) (*sql.Tx, error) {
	t, ok := tx.(*sql.Tx)
	if !ok || t == nil {
		return nil, fmt.Errorf("sqlite: got %T, want a *sql.Tx begun on the driver's DB(): %w", tx, driver.ErrUnsupportedTx)
	}
	return t, nil
}

// hotQueries are prepared once at Open and reused by every group commit.
var hotQueries = []string{sqlInsert, sqlClaim, sqlClaimExcluding, sqlSucceedMany, sqlTransition, sqlHeartbeat}

// Insert implements driver.Driver.
func (d *Driver) Insert(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	var out []driver.InsertResult
	err := d.write(ctx, func(tx querier) error {
		var err error
		out, err = insert(ctx, tx, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// InsertTx implements driver.Driver. The inserts run under a savepoint so
// a failure leaves nothing of the batch in the caller's transaction.
func (d *Driver) InsertTx(ctx context.Context, dtx driver.Tx, params []driver.InsertParams) ([]driver.InsertResult, error) {
	tx, err := sqlTx(dtx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT keel_insert`); err != nil {
		return nil, fmt.Errorf("insert tasks: %w", err)
	}
	out, err := insert(ctx, tx, params)
	if err != nil {
		undo := context.WithoutCancel(ctx)
		if _, rbErr := tx.ExecContext(undo, `ROLLBACK TO keel_insert`); rbErr != nil {
			return nil, errors.Join(err, fmt.Errorf("insert tasks: undo: %w", rbErr))
		}
		tx.ExecContext(undo, `RELEASE keel_insert`) //nolint:errcheck // the savepoint is empty now
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `RELEASE keel_insert`); err != nil {
		return nil, fmt.Errorf("insert tasks: %w", err)
	}
	return out, nil
}

func insert(ctx context.Context, tx querier, params []driver.InsertParams) ([]driver.InsertResult, error) {
	out := make([]driver.InsertResult, 0, len(params))
	for _, p := range params {
		row, err := scanTask(tx.QueryRowContext(ctx, sqlInsert, p.Queue, p.Type, p.Priority, string(p.Payload),
			p.MaxAttempts, micros(p.RunAt), p.Timeout.Milliseconds(), nullString(p.IdemKey),
			p.PayloadDigest, micros(p.Now), micros(p.Now), nullBytes(p.Meta)))
		if err == nil {
			out = append(out, driver.InsertResult{Task: row})
			continue
		}
		if !errors.Is(err, sql.ErrNoRows) || p.IdemKey == "" {
			return nil, fmt.Errorf("insert task: %w", err)
		}
		// The key is held: the unique index decided, load the holder.
		row, err = scanTask(tx.QueryRowContext(ctx, sqlByKey, p.IdemKey))
		if err != nil {
			return nil, fmt.Errorf("load task holding idempotency key: %w", err)
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
	var excluded string // JSON array of types not to claim, or empty
	if len(p.ExcludeTypes) > 0 {
		b, err := json.Marshal(p.ExcludeTypes)
		if err != nil {
			return nil, fmt.Errorf("claim tasks: %w", err)
		}
		excluded = string(b)
	}
	err := d.write(ctx, func(tx querier) error {
		out = out[:0]
		var rows *sql.Rows
		var err error
		if excluded == "" {
			rows, err = tx.QueryContext(ctx, sqlClaim, p.Owner, micros(p.LeaseExpiresAt), micros(p.Now), p.Queue, p.Limit)
		} else {
			rows, err = tx.QueryContext(ctx, sqlClaimExcluding, p.Owner, micros(p.LeaseExpiresAt), micros(p.Now),
				p.Queue, p.Limit, excluded)
		}
		if err != nil {
			return fmt.Errorf("claim tasks: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			r := driver.TaskRow{Queue: p.Queue, State: driver.StateRunning, LeaseOwner: p.Owner,
				LeaseExpiresAt: p.LeaseExpiresAt, AttemptedAt: p.Now}
			var payload []byte
			var runAt, timeoutMS, createdAt int64
			if err := rows.Scan(&r.ID, &r.Type, &r.Priority, &payload, &r.Attempt, &r.MaxAttempts,
				&r.Fence, &runAt, &timeoutMS, &createdAt); err != nil {
				return fmt.Errorf("claim tasks: %w", err)
			}
			r.Payload = payload
			r.RunAt, r.CreatedAt = fromMicros(runAt), fromMicros(createdAt)
			r.Timeout = time.Duration(timeoutMS) * time.Millisecond
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	driver.SortClaimed(out)
	return out, nil
}

// Finish implements driver.Driver. Successes without a result go in one
// statement; other transitions one statement each, all in one group commit.
func (d *Driver) Finish(ctx context.Context, p driver.FinishParams) ([]int64, error) {
	var ok []int64
	var ids []int64
	var pairs [][2]int64
	var others []driver.Transition
	for _, t := range p.Transitions {
		if t.State == driver.StateSucceeded && t.Error == nil && !t.Refund && t.Result == nil {
			ids = append(ids, t.ID)
			pairs = append(pairs, [2]int64{t.ID, t.Fence})
		} else {
			others = append(others, t)
		}
	}
	idsJSON, pairsJSON := int64List(ids), pairList(pairs)
	err := d.write(ctx, func(tx querier) error {
		ok = ok[:0]
		if len(ids) > 0 {
			rows, err := tx.QueryContext(ctx, sqlSucceedMany, micros(p.Now), idsJSON, pairsJSON, p.Owner)
			if err != nil {
				return fmt.Errorf("finish tasks: %w", err)
			}
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return fmt.Errorf("finish tasks: %w", err)
				}
				ok = append(ok, id)
			}
			if err := rows.Close(); err != nil {
				return fmt.Errorf("finish tasks: %w", err)
			}
		}
		for _, t := range others {
			applied, err := transition(ctx, tx, p.Owner, p.Now, t)
			if err != nil {
				return err
			}
			if applied {
				ok = append(ok, t.ID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ok, nil
}

// pairList renders pairs as a JSON array of two-element arrays.
func pairList(pairs [][2]int64) string {
	b := make([]byte, 0, len(pairs)*16+2)
	b = append(b, '[')
	for i, p := range pairs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, p[0], 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, p[1], 10)
		b = append(b, ']')
	}
	return string(append(b, ']'))
}

// int64List renders ids as a JSON array.
func int64List(ids []int64) string {
	b := make([]byte, 0, len(ids)*8+2)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}

// FinishTx implements driver.Driver.
func (d *Driver) FinishTx(ctx context.Context, dtx driver.Tx, owner string, now time.Time, t driver.Transition) (bool, error) {
	tx, err := sqlTx(dtx)
	if err != nil {
		return false, err
	}
	return transition(ctx, tx, owner, now, t)
}

func transition(ctx context.Context, tx querier, owner string, now time.Time, t driver.Transition) (bool, error) {
	var errJSON any
	if t.Error != nil {
		b, err := json.Marshal(t.Error)
		if err != nil {
			return false, fmt.Errorf("finish task %d: %w", t.ID, err)
		}
		errJSON = string(b)
	}
	refund := 0
	if t.Refund {
		refund = 1
	}
	res, err := tx.ExecContext(ctx, sqlTransition, string(t.State), nullMicros(t.RunAt), nullBytes(t.Result),
		refund, errJSON, micros(now), t.ID, t.Fence, owner)
	if err != nil {
		return false, fmt.Errorf("finish task %d: %w", t.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("finish task %d: %w", t.ID, err)
	}
	return n == 1, nil
}

// Heartbeat implements driver.Driver.
func (d *Driver) Heartbeat(ctx context.Context, p driver.HeartbeatParams) ([]int64, error) {
	ids := int64List(p.IDs)
	var held []int64
	err := d.write(ctx, func(tx querier) error {
		held = held[:0]
		rows, err := tx.QueryContext(ctx, sqlHeartbeat, micros(p.LeaseExpiresAt), micros(p.Now), ids, p.Owner)
		if err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return fmt.Errorf("heartbeat: %w", err)
			}
			held = append(held, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return held, nil
}

// Rescue implements driver.Driver.
func (d *Driver) Rescue(ctx context.Context, p driver.RescueParams) ([]driver.TaskRow, error) {
	var out []driver.TaskRow
	err := d.write(ctx, func(tx querier) error {
		out = out[:0]
		type expired struct {
			id                   int64
			typ, owner           string
			attempt, maxAttempts int
			fence                int64
			attemptedAt          sql.NullInt64
			runAt                int64
		}
		rows, err := tx.QueryContext(ctx, sqlExpired, micros(p.Now), p.Limit)
		if err != nil {
			return fmt.Errorf("rescue: %w", err)
		}
		var list []expired
		for rows.Next() {
			var e expired
			if err := rows.Scan(&e.id, &e.typ, &e.attempt, &e.maxAttempts, &e.fence, &e.owner, &e.attemptedAt, &e.runAt); err != nil {
				rows.Close()
				return fmt.Errorf("rescue: %w", err)
			}
			list = append(list, e)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("rescue: %w", err)
		}
		for _, e := range list {
			t := driver.Transition{ID: e.id, Fence: e.fence, State: driver.StatePending,
				RunAt: fromMicros(e.runAt).Add(p.Backoff(e.typ, e.attempt)),
				Error: &driver.AttemptError{Attempt: e.attempt, Node: e.owner, End: p.Now,
					Outcome: driver.OutcomeLeaseExpired, Error: "lease expired: worker lost"}}
			if e.attemptedAt.Valid {
				t.Error.Start = fromMicros(e.attemptedAt.Int64)
			}
			if e.attempt >= e.maxAttempts {
				t.State, t.RunAt = driver.StateDead, time.Time{}
			}
			applied, err := transition(ctx, tx, e.owner, p.Now, t)
			if err != nil {
				return err
			}
			if !applied {
				continue
			}
			row, err := scanTask(tx.QueryRowContext(ctx, sqlGet, e.id))
			if err != nil {
				return fmt.Errorf("rescue: %w", err)
			}
			out = append(out, *row)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Get implements driver.Driver.
func (d *Driver) Get(ctx context.Context, id int64) (*driver.TaskRow, error) {
	row, err := scanTask(d.rdb.QueryRowContext(ctx, sqlGet, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get task %d: %w", id, err)
	}
	return row, nil
}

// Cancel implements driver.Driver.
func (d *Driver) Cancel(ctx context.Context, id int64, now time.Time) (*driver.TaskRow, error) {
	var row *driver.TaskRow
	var opErr error
	err := d.write(ctx, func(tx querier) error {
		var err error
		row, err = scanTask(tx.QueryRowContext(ctx, sqlCancel, micros(now), id))
		opErr = nil
		if errors.Is(err, sql.ErrNoRows) {
			opErr = missingOrWrongState(ctx, tx, id)
			return nil
		}
		if err != nil {
			return fmt.Errorf("cancel task %d: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return row, opErr
}

// Retry implements driver.Driver.
func (d *Driver) Retry(ctx context.Context, id int64, now time.Time) (*driver.TaskRow, error) {
	var row *driver.TaskRow
	var opErr error
	err := d.write(ctx, func(tx querier) error {
		opErr = nil
		var key sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT idem_key FROM keel_tasks WHERE id = ?`, id).Scan(&key)
		if errors.Is(err, sql.ErrNoRows) {
			opErr = driver.ErrNotFound
			return nil
		}
		if err != nil {
			return fmt.Errorf("retry task %d: %w", id, err)
		}
		if key.Valid {
			var n int
			if err := tx.QueryRowContext(ctx, sqlKeyHeld, key.String, id).Scan(&n); err != nil {
				return fmt.Errorf("retry task %d: %w", id, err)
			}
			if n > 0 {
				opErr = fmt.Errorf("retry task %d: a newer task holds its idempotency key: %w", id, driver.ErrIdempotencyConflict)
				return nil
			}
		}
		row, err = scanTask(tx.QueryRowContext(ctx, sqlRetry, micros(now), id))
		if errors.Is(err, sql.ErrNoRows) {
			opErr = fmt.Errorf("retry task %d: %w", id, driver.ErrWrongState)
			return nil
		}
		if err != nil {
			return fmt.Errorf("retry task %d: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return row, opErr
}

func missingOrWrongState(ctx context.Context, tx querier, id int64) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM keel_tasks WHERE id = ?`, id).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return driver.ErrNotFound
	}
	return fmt.Errorf("task %d: %w", id, driver.ErrWrongState)
}

// List implements driver.Driver.
func (d *Driver) List(ctx context.Context, p driver.ListParams) ([]driver.TaskRow, error) {
	var where []string
	var args []any
	if p.State != "" {
		where, args = append(where, "state = ?"), append(args, string(p.State))
	}
	if p.Type != "" {
		where, args = append(where, "type = ?"), append(args, p.Type)
	}
	if p.Queue != "" {
		where, args = append(where, "queue = ?"), append(args, p.Queue)
	}
	if !p.CreatedAfter.IsZero() {
		where, args = append(where, "created_at >= ?"), append(args, micros(p.CreatedAfter))
	}
	if !p.CreatedBefore.IsZero() {
		where, args = append(where, "created_at < ?"), append(args, micros(p.CreatedBefore))
	}
	if !p.FinishedAfter.IsZero() {
		where, args = append(where, "finished_at >= ?"), append(args, micros(p.FinishedAfter))
	}
	if !p.FinishedBefore.IsZero() {
		where, args = append(where, "finished_at < ?"), append(args, micros(p.FinishedBefore))
	}
	if p.BeforeID > 0 {
		where, args = append(where, "id < ?"), append(args, p.BeforeID)
	}
	q := `SELECT ` + taskColumns + ` FROM keel_tasks`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, limit)
	rows, err := d.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return scanTasks(rows, nil)
}

// Counts implements driver.Driver.
func (d *Driver) Counts(ctx context.Context) ([]driver.QueueCount, error) {
	rows, err := d.rdb.QueryContext(ctx, sqlCounts)
	if err != nil {
		return nil, fmt.Errorf("count tasks: %w", err)
	}
	defer rows.Close()
	var out []driver.QueueCount
	for rows.Next() {
		var c driver.QueueCount
		if err := rows.Scan(&c.Queue, &c.Type, &c.State, &c.Count); err != nil {
			return nil, fmt.Errorf("count tasks: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Lead implements driver.Driver.
func (d *Driver) Lead(ctx context.Context, p driver.LeadParams) (bool, error) {
	var leading bool
	err := d.write(ctx, func(tx querier) error {
		var owner string
		err := tx.QueryRowContext(ctx, sqlLead, p.Name, p.Owner, micros(p.Now.Add(p.TTL)), micros(p.Now)).Scan(&owner)
		leading = err == nil
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("elect leader: %w", err)
		}
		return nil
	})
	return leading, err
}

// Resign implements driver.Driver.
func (d *Driver) Resign(ctx context.Context, name, owner string) error {
	return d.write(ctx, func(tx querier) error {
		if _, err := tx.ExecContext(ctx, sqlResign, name, owner); err != nil {
			return fmt.Errorf("resign leadership: %w", err)
		}
		return nil
	})
}
