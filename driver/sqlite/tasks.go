package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The task queries: insert, claim, finish, heartbeat, rescue, get, cancel,
// retry, list, counts and leadership. Their SQL is in queries.go.

// Insert implements driver.Driver. The writer may insert the tasks of
// several concurrent Inserts with one statement (insertTogether).
func (d *Driver) Insert(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	var out []driver.InsertResult
	o := &op{ins: params, res: &out}
	o.fn = func(tx querier) error {
		var err error
		out, err = insert(ctx, tx, params)
		return err
	}
	if err := d.submit(ctx, o); err != nil {
		return nil, err
	}
	return out, nil
}

// InsertTx implements driver.Driver. The inserts run under a savepoint so
// a failure leaves nothing of the batch in the caller's transaction.
func (d *Driver) InsertTx(ctx context.Context, dtx driver.Tx, params []driver.InsertParams) ([]driver.InsertResult, error) {
	tx, err := callerTx(dtx)
	if err != nil {
		return nil, err
	}
	var out []driver.InsertResult
	err = sqlutil.InsertSavepoint(ctx, func(ctx context.Context, q string) error {
		_, err := tx.ExecContext(ctx, q)
		return err
	}, func() error {
		out, err = insert(ctx, tx, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// insert inserts params with as few statements as it can (see
// insertSQL), in sqlutil.InsertOrder; results keep the order of params.
func insert(ctx context.Context, tx querier, params []driver.InsertParams) ([]driver.InsertResult, error) {
	out := make([]driver.InsertResult, len(params))
	if len(params) == 0 {
		return out, nil
	}
	var next int64
	if err := tx.QueryRowContext(ctx, sqlNextID).Scan(&next); err != nil {
		return nil, fmt.Errorf("insert task: %w", err)
	}
	var tally sqlutil.Tally
	var held []int // the tasks whose key another task holds
	for order := sqlutil.InsertOrder(params); len(order) > 0; {
		k := min(bits.Len(uint(len(order)))-1, maxInsertLog)
		chunk := order[:1<<k]
		order = order[1<<k:]
		args := make([]any, 0, insertArgs<<k)
		for j, i := range chunk {
			p := params[i]
			args = append(args, next+int64(j), p.Queue, p.Type, p.Priority, string(p.Payload), p.MaxAttempts,
				micros(p.RunAt), p.Timeout.Milliseconds(), sqlutil.NullString(p.IdemKey), p.PayloadDigest,
				micros(p.Now), micros(p.Now), sqlutil.NullBytes(p.Meta))
		}
		written, err := insertedIDs(ctx, tx, insertSQL[k], args, next, len(chunk))
		if err != nil {
			return nil, err
		}
		for j, i := range chunk {
			p := params[i]
			switch {
			case written[j]:
				row := insertedRow(next+int64(j), p)
				out[i] = driver.InsertResult{Task: row}
				tally.Insert(sqlutil.StateOf(row), p.Now)
			case p.IdemKey != "":
				held = append(held, i)
			default:
				return nil, fmt.Errorf("insert task: task %d was not written", next+int64(j))
			}
		}
		next += int64(len(chunk))
	}
	for _, i := range held {
		// The key is held: the unique index decided, load the holder (it
		// may be a task of this very batch).
		p := params[i]
		row, err := scanTask(tx.QueryRowContext(ctx, sqlByKey, p.IdemKey).Scan)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("load task holding idempotency key: %w", err)
		}
		if out[i], err = sqlutil.KeyHolder(row, p); err != nil {
			return nil, err
		}
		tally.Hit(row.Queue, row.Type, p.Now)
	}
	if err := count(ctx, tx, &tally); err != nil {
		return nil, err
	}
	return out, nil
}

// insertedIDs runs one insert statement of n rows with ids from first on
// and reports which rows it wrote.
func insertedIDs(ctx context.Context, tx querier, query string, args []any, first int64, n int) ([]bool, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("insert task: %w", err)
	}
	defer rows.Close()
	written := make([]bool, n)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("insert task: %w", err)
		}
		if j := id - first; j >= 0 && j < int64(n) {
			written[j] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("insert task: %w", err)
	}
	return written, nil
}

// insertedRow is the row insert wrote for p with id, as reading it
// back would return it: reading it cost more than the insert.
func insertedRow(id int64, p driver.InsertParams) *driver.TaskRow {
	created := fromMicros(micros(p.Now))
	return &driver.TaskRow{ID: id, Queue: p.Queue, Type: p.Type, Priority: p.Priority,
		Payload: bytes.Clone(p.Payload), State: driver.StatePending, MaxAttempts: p.MaxAttempts,
		RunAt: fromMicros(micros(p.RunAt)), Timeout: time.Duration(p.Timeout.Milliseconds()) * time.Millisecond,
		IdemKey: p.IdemKey, PayloadDigest: p.PayloadDigest, CreatedAt: created, UpdatedAt: created,
		Meta: bytes.Clone(p.Meta)}
}

// Claim implements driver.Driver.
func (d *Driver) Claim(ctx context.Context, p driver.ClaimParams) ([]driver.TaskRow, error) {
	include, exclude, ok := sqlutil.ClaimTypes(p)
	if !ok {
		return nil, nil // no type to claim
	}
	var out []driver.TaskRow
	err := d.write(ctx, func(tx querier) error {
		var err error
		out, err = d.claimCounted(ctx, tx, p, include, exclude)
		return err
	})
	if err != nil {
		return nil, err
	}
	driver.SortClaimed(out)
	return out, nil
}

// claimCounted claims in tx for p with its type filter (see
// sqlutil.ClaimTypes) and keeps the live counters right. Only the writer
// calls it.
func (d *Driver) claimCounted(ctx context.Context, tx querier, p driver.ClaimParams, include, exclude []string) ([]driver.TaskRow, error) {
	query, args := sqlClaim, []any{p.Owner, micros(p.LeaseExpiresAt), micros(p.Now), p.Queue, p.Limit}
	switch {
	case include != nil && p.Retried:
		query, args = sqlClaimRetried, append(args, stringList(include))
	case include != nil:
		query, args = sqlClaimTypes, append(args, stringList(include))
	case len(exclude) > 0:
		query, args = sqlClaimExcluding, append(args, stringList(exclude))
	}
	var out []driver.TaskRow
	if err := d.claim(ctx, tx, query, args, p, &out); err != nil {
		return nil, err
	}
	var tally sqlutil.Tally
	for i := range out {
		n := sqlutil.StateOf(&out[i])
		o := n
		o.State, o.Attempt = driver.StatePending, n.Attempt-1
		tally.Update(o, n, p.Now, false)
	}
	return out, count(ctx, tx, &tally)
}

// claim runs the claim query and appends the claimed tasks to out. The
// rows are read into the writer's claim buffer and appended in one step:
// grown row by row, a claim of 500 tasks allocated twice its rows' size
// (the drain's largest allocation). Only the writer calls it.
func (d *Driver) claim(ctx context.Context, tx querier, query string, args []any, p driver.ClaimParams, out *[]driver.TaskRow) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("claim tasks: %w", err)
	}
	defer rows.Close()
	buf := d.claimBuf[:0]
	defer func() {
		clear(buf) // drop the rows' payloads and strings
		d.claimBuf = buf[:0]
	}()
	var (
		id, fence                   int64
		typ                         string
		priority, attempt, max, snz int
		payload, meta               []byte
		runAt, timeoutMS, createdAt int64
	)
	for rows.Next() {
		if err := rows.Scan(&id, &typ, &priority, &payload, &attempt, &max,
			&fence, &runAt, &timeoutMS, &createdAt, &snz, &meta); err != nil {
			return fmt.Errorf("claim tasks: %w", err)
		}
		buf = append(buf, driver.TaskRow{ID: id, Queue: p.Queue, Type: typ, Priority: priority, Payload: payload,
			State: driver.StateRunning, Attempt: attempt, MaxAttempts: max, Snoozes: snz, Fence: fence,
			RunAt: fromMicros(runAt), Timeout: time.Duration(timeoutMS) * time.Millisecond,
			LeaseOwner: p.Owner, LeaseExpiresAt: p.LeaseExpiresAt, CreatedAt: fromMicros(createdAt),
			AttemptedAt: p.Now, Meta: meta})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	*out = append(*out, buf...)
	return nil
}

// Claimed implements driver.Driver.
func (d *Driver) Claimed(ctx context.Context, p driver.ClaimedParams) ([]driver.TaskRow, error) {
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.rdb, sqlClaimed, p.Owner, p.Queue, micros(p.Now), p.Limit), scanTask)
	if err != nil {
		return nil, fmt.Errorf("read back claimed tasks: %w", err)
	}
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
		if sqlutil.PlainSuccess(t) {
			ids = append(ids, t.ID)
			pairs = append(pairs, [2]int64{t.ID, t.Fence})
		} else {
			others = append(others, t)
		}
	}
	idsJSON, pairsJSON := int64List(ids), pairList(pairs)
	err := d.write(ctx, func(tx querier) error {
		ok = ok[:0]
		tasks, err := countedTasks(ctx, tx, p.Transitions)
		if err != nil {
			return err
		}
		var tally sqlutil.Tally
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
			for _, id := range ok {
				tally.Finished(tasks[id], driver.Transition{State: driver.StateSucceeded}, p.Now)
			}
		}
		for _, t := range others {
			applied, err := transition(ctx, tx, p.Owner, p.Now, t)
			if err != nil {
				return err
			}
			if applied {
				ok = append(ok, t.ID)
				tally.Finished(tasks[t.ID], t, p.Now)
			}
		}
		return count(ctx, tx, &tally)
	})
	if err != nil {
		return nil, err
	}
	return sqlutil.AddAppliedBefore(ctx, p, ok, d.Get)
}

// FinishTx implements driver.Driver.
func (d *Driver) FinishTx(ctx context.Context, dtx driver.Tx, owner string, now time.Time, t driver.Transition) (bool, error) {
	tx, err := callerTx(dtx)
	if err != nil {
		return false, err
	}
	tasks, err := countedTasks(ctx, tx, []driver.Transition{t})
	if err != nil {
		return false, err
	}
	applied, err := transition(ctx, tx, owner, now, t)
	if err != nil || !applied {
		return false, err
	}
	var tally sqlutil.Tally
	tally.Finished(tasks[t.ID], t, now)
	return true, count(ctx, tx, &tally)
}

func transition(ctx context.Context, tx querier, owner string, now time.Time, t driver.Transition) (bool, error) {
	errJSON, refund, err := sqlutil.TransitionArgs(t)
	if err != nil {
		return false, err
	}
	res, err := tx.ExecContext(ctx, sqlTransition, string(t.State), nullMicros(t.RunAt), sqlutil.NullBytes(t.Result),
		refund, errJSON, micros(now), t.ID, t.Fence, owner, sqlutil.SnoozeArg(t))
	if err != nil {
		return false, fmt.Errorf("finish task %d: %w", t.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("finish task %d: %w", t.ID, err)
	}
	if n == 1 && len(t.FollowUps) > 0 {
		if _, err := insert(ctx, tx, t.FollowUps); err != nil {
			return false, fmt.Errorf("finish task %d: insert follow-up: %w", t.ID, err)
		}
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

// ListExpired implements driver.Driver.
func (d *Driver) ListExpired(ctx context.Context, p driver.ExpiredParams) ([]driver.TaskRow, time.Time, error) {
	rows, err := d.rdb.QueryContext(ctx, sqlExpired, micros(p.Now), p.Limit)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list expired leases: %w", err)
	}
	defer rows.Close()
	var out []driver.TaskRow
	for rows.Next() {
		r := driver.TaskRow{State: driver.StateRunning}
		var runAt int64
		var owner sql.NullString
		var expires, attempted sql.NullInt64
		if err := rows.Scan(&r.ID, &r.Queue, &r.Type, &r.Priority, &r.Attempt, &r.MaxAttempts, &r.Fence, &runAt,
			&owner, &expires, &attempted); err != nil {
			return nil, time.Time{}, fmt.Errorf("list expired leases: %w", err)
		}
		r.RunAt, r.LeaseOwner = fromMicros(runAt), owner.String
		r.LeaseExpiresAt, r.AttemptedAt = optTime(expires), optTime(attempted)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("list expired leases: %w", err)
	}
	return out, p.Now, nil
}

// Rescue implements driver.Driver.
func (d *Driver) Rescue(ctx context.Context, p driver.RescueParams) ([]driver.TaskRow, error) {
	if len(p.Tasks) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(p.Tasks))
	for i, rt := range p.Tasks {
		ids[i] = rt.Transition.ID
	}
	var out []driver.TaskRow
	err := d.write(ctx, func(tx querier) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, sqlLockExpired, int64List(ids), micros(p.Now))
		if err != nil {
			return fmt.Errorf("rescue: %w", err)
		}
		expired := map[int64]bool{}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("rescue: %w", err)
			}
			expired[id] = true
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("rescue: %w", err)
		}
		trs := make([]driver.Transition, 0, len(p.Tasks))
		for _, rt := range p.Tasks {
			if expired[rt.Transition.ID] {
				trs = append(trs, rt.Transition)
			}
		}
		tasks, err := countedTasks(ctx, tx, trs)
		if err != nil {
			return err
		}
		var tally sqlutil.Tally
		for _, rt := range p.Tasks {
			if !expired[rt.Transition.ID] {
				continue
			}
			applied, err := transition(ctx, tx, rt.Owner, p.Now, rt.Transition)
			if err != nil {
				return err
			}
			if !applied {
				continue
			}
			tally.Finished(tasks[rt.Transition.ID], rt.Transition, p.Now)
			row, err := scanTask(tx.QueryRowContext(ctx, sqlGet, rt.Transition.ID).Scan)
			if err != nil {
				return fmt.Errorf("rescue: %w", err)
			}
			out = append(out, *row)
		}
		return count(ctx, tx, &tally)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Get implements driver.Driver: keel_tasks first, then keel_archive. A
// task archived between the two reads is found by the second.
func (d *Driver) Get(ctx context.Context, id int64) (*driver.TaskRow, error) {
	return getAny(ctx, d.rdb, id)
}

// getAny reads a task from keel_tasks or, failing that, keel_archive.
func getAny(ctx context.Context, q querier, id int64) (*driver.TaskRow, error) {
	row, err := getWith(ctx, q, id)
	if errors.Is(err, driver.ErrNotFound) {
		return getArchived(ctx, q, id)
	}
	return row, err
}

// GetByKey implements driver.Driver.
func (d *Driver) GetByKey(ctx context.Context, key string) (*driver.TaskRow, error) {
	row, err := scanTask(d.rdb.QueryRowContext(ctx, sqlByKey, key).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get task by idempotency key: %w", err)
	}
	return row, nil
}

func getWith(ctx context.Context, q querier, id int64) (*driver.TaskRow, error) {
	row, err := scanTask(q.QueryRowContext(ctx, sqlGet, id).Scan)
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
		opErr = nil
		old, err := getWith(ctx, tx, id)
		if err != nil && !errors.Is(err, driver.ErrNotFound) {
			return err
		}
		entry, err := sqlutil.CancelledAttempt(old, now)
		if err != nil {
			return fmt.Errorf("cancel task %d: %w", id, err)
		}
		row, err = scanTask(tx.QueryRowContext(ctx, sqlCancel, micros(now), id, entry).Scan)
		if errors.Is(err, sql.ErrNoRows) {
			_, err := getAny(ctx, tx, id) // an archived task: wrong state
			opErr = sqlutil.MissingOrWrongState(id, err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("cancel task %d: %w", id, err)
		}
		var tally sqlutil.Tally
		tally.Update(sqlutil.StateOf(old), sqlutil.StateOf(row), now, false)
		return count(ctx, tx, &tally)
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
		err := tx.QueryRowContext(ctx, sqlKeyOf, id).Scan(&key)
		if errors.Is(err, sql.ErrNoRows) {
			_, err := getArchived(ctx, tx, id) // an archived task: wrong state
			opErr = sqlutil.MissingOrWrongState(id, err)
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
		old, err := getWith(ctx, tx, id)
		if err != nil {
			return err
		}
		row, err = scanTask(tx.QueryRowContext(ctx, sqlRetry, micros(now), id).Scan)
		if errors.Is(err, sql.ErrNoRows) {
			opErr = fmt.Errorf("retry task %d: %w", id, driver.ErrWrongState)
			return nil
		}
		if err != nil {
			return fmt.Errorf("retry task %d: %w", id, err)
		}
		var tally sqlutil.Tally
		tally.Update(sqlutil.StateOf(old), sqlutil.StateOf(row), now, false)
		return count(ctx, tx, &tally)
	})
	if err != nil {
		return nil, err
	}
	return row, opErr
}

// List implements driver.Driver.
func (d *Driver) List(ctx context.Context, p driver.Filter) ([]driver.TaskRow, error) {
	q, args := d.listSQL(p)
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.rdb, q, args...), scanTask)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return out, nil
}

// listSQL is List's query and arguments for p.
func (d *Driver) listSQL(p driver.Filter) (string, []any) {
	base := sqlList
	if p.State == driver.StateRunning {
		// The running tasks, however few, from their lease index, then
		// sorted: walking every id backwards for them, which SQLite's
		// planner prefers for ORDER BY id LIMIT, reads the whole table
		// when few run.
		base += ` INDEXED BY keel_tasks_lease`
	}
	return sqlutil.ListQuery(base, p, sqlutil.Question, func(t time.Time) any { return micros(t) })
}

// Counts implements driver.Driver.
func (d *Driver) Counts(ctx context.Context) ([]driver.CountRow, error) {
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.rdb, sqlCounts), sqlutil.ScanCountRow)
	if err != nil {
		return nil, fmt.Errorf("read live counters: %w", err)
	}
	return out, nil
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

// SaveStep implements driver.Driver.
func (d *Driver) SaveStep(ctx context.Context, p driver.StepParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("save step: %w", err)
	}
	var applied bool
	err := d.write(ctx, func(tx querier) error {
		res, err := tx.ExecContext(ctx, sqlSaveStep, p.Name, string(p.Result), p.Now.UTC().Format(driver.StepTimeLayout),
			micros(p.Now), p.ID, p.Fence, p.Owner)
		if err != nil {
			return fmt.Errorf("save step %q of task %d: %w", p.Name, p.ID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("save step %q of task %d: %w", p.Name, p.ID, err)
		}
		applied = n == 1
		return nil
	})
	if err != nil {
		return false, err
	}
	return applied, nil
}
