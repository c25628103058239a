package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The task queries: insert, claim, finish, heartbeat, rescue, get, cancel,
// retry, list, counts and leadership. Their SQL is in queries.go.

// Insert implements driver.Driver: all tasks in one transaction, run again
// after a deadlock or serialization failure (keys are inserted in order, so
// batches sharing keys do not deadlock on them; anything else still could).
func (d *Driver) Insert(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	for attempt := 0; ; attempt++ {
		out, err := d.insertTx(ctx, params)
		if err == nil || attempt+1 >= maxTxAttempts || !retryable(err) {
			return out, err
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
}

// insertTx inserts params in one transaction of its own.
func (d *Driver) insertTx(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("insert tasks: %w", unavailable(ctx, err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it is a no-op
	out, queues, err := d.insertNotify(ctx, pgxQuerier{db: tx}, params, true)
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
		return nil, fmt.Errorf("insert tasks: commit: %w", unavailable(ctx, err))
	}
	d.wakeLocal(queues)
	return out, nil
}

// InsertTx implements driver.Driver. The inserts run under a savepoint so
// a failure leaves nothing of the batch in the caller's transaction.
func (d *Driver) InsertTx(ctx context.Context, dtx driver.Tx, params []driver.InsertParams) ([]driver.InsertResult, error) {
	q, err := callerTx(dtx)
	if err != nil {
		return nil, err
	}
	var out []driver.InsertResult
	err = sqlutil.InsertSavepoint(ctx, func(ctx context.Context, sql string) error {
		_, err := q.exec(ctx, sql, nil)
		return err
	}, func() error {
		// Visible only when the caller commits: a notification for all.
		out, _, err = d.insertNotify(ctx, q, params, false)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// insert inserts params in the transaction q: tasks without idempotency
// keys with one COPY when there are enough of them (they cannot conflict)
// and q is a pgx transaction, the others one INSERT each. Results keep the
// order of params.
func (d *Driver) insert(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, error) {
	out, err := d.insertAll(ctx, q, params)
	if err != nil {
		return nil, err
	}
	var now time.Time
	if len(params) > 0 {
		now = params[0].Now
	}
	if err := d.countHits(ctx, q, now, out); err != nil {
		return nil, err
	}
	return out, nil
}

// insertAll is insert without counting idempotency hits.
func (d *Driver) insertAll(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, error) {
	var plain []int
	for i, p := range params {
		if p.IdemKey == "" {
			plain = append(plain, i)
		}
	}
	pq, _ := q.(pgxQuerier)
	tx, isTx := pq.db.(pgx.Tx)
	if len(plain) < copyMin || !isTx {
		return d.insertRows(ctx, q, params)
	}
	out := make([]driver.InsertResult, len(params))
	copied, err := d.copyInsert(ctx, tx, params, plain)
	if err != nil {
		return nil, err
	}
	for j, i := range plain {
		out[i] = driver.InsertResult{Task: copied[j]}
	}
	var keyed []driver.InsertParams
	var keyedAt []int
	for i, p := range params {
		if p.IdemKey != "" {
			keyed, keyedAt = append(keyed, p), append(keyedAt, i)
		}
	}
	if len(keyed) > 0 {
		res, err := d.insertRows(ctx, q, keyed)
		if err != nil {
			return nil, err
		}
		for j, i := range keyedAt {
			out[i] = res[j]
		}
	}
	return out, nil
}

// insertRows inserts params one statement each, in sqlutil.InsertOrder;
// results keep the order of params.
func (d *Driver) insertRows(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, error) {
	out := make([]driver.InsertResult, len(params))
	for _, i := range sqlutil.InsertOrder(params) {
		p := params[i]
		var row *driver.TaskRow
		err := q.query(ctx, d.sql.insert, []any{d.now(p.Now), p.Queue, p.Type, p.Priority, string(p.Payload),
			p.MaxAttempts, offset(p.RunAt, p.Now), p.Timeout.Milliseconds(), sqlutil.NullString(p.IdemKey),
			p.PayloadDigest, sqlutil.NullBytes(p.Meta)}, func(scan func(...any) error) error {
			var err error
			row, err = scanTask(scan)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("insert task: %w", err)
		}
		if row != nil {
			out[i] = driver.InsertResult{Task: row}
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
		if out[i], err = sqlutil.KeyHolder(row, p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Claim implements driver.Driver.
func (d *Driver) Claim(ctx context.Context, p driver.ClaimParams) ([]driver.TaskRow, error) {
	include, exclude, ok := sqlutil.ClaimTypes(p)
	if !ok {
		return nil, nil // no type to claim
	}
	out, err := d.claim(ctx, pgxQuerier{db: d.pool}, p, include, exclude)
	if err != nil {
		return nil, err
	}
	driver.SortClaimed(out)
	return out, nil
}

// claim runs the claim for p with its type filter (see sqlutil.ClaimTypes)
// on q.
func (d *Driver) claim(ctx context.Context, q querier, p driver.ClaimParams, include, exclude []string) ([]driver.TaskRow, error) {
	query, args := d.sql.claim, []any{d.now(p.Now), p.Queue, p.Limit, p.Owner, offset(p.LeaseExpiresAt, p.Now)}
	switch {
	case include != nil && p.Retried:
		query, args = d.sql.claimRetried, append(args, include)
	case include != nil:
		query, args = d.sql.claimTypes, append(args, include)
	case len(exclude) > 0:
		query, args = d.sql.claimExcluding, append(args, exclude)
	}
	c := sqlutil.GetClaimed()
	defer c.Release()
	err := q.query(ctx, query, args, func(scan func(...any) error) error {
		if err := scan(&c.ID, &c.Type, &c.Priority, &c.Payload, &c.Attempt, &c.MaxAttempts, &c.Fence,
			&c.RunAt, &c.TimeoutMS, &c.CreatedAt, &c.LeaseExpiresAt, &c.AttemptedAt, &c.Snoozes, &c.Meta); err != nil {
			return err
		}
		c.Add(p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	return c.Rows(), nil
}

// Claimed implements driver.Driver.
func (d *Driver) Claimed(ctx context.Context, p driver.ClaimedParams) ([]driver.TaskRow, error) {
	out, err := sqlutil.Collect(rowsOf(ctx, pgxQuerier{db: d.pool}, d.sql.claimed, d.now(p.Now), p.Owner, p.Queue, p.Limit), scanTask)
	if err != nil {
		return nil, fmt.Errorf("read back claimed tasks: %w", err)
	}
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
		if sqlutil.PlainSuccess(t) {
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
		err = beginFunc(ctx, d.pool, func(tx pgx.Tx) error { return finish(pgxQuerier{db: tx}) })
	}
	if err != nil {
		return nil, err
	}
	return sqlutil.AddAppliedBefore(ctx, p, ok, d.Get)
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
	errJSON, refund, err := sqlutil.TransitionArgs(t)
	if err != nil {
		return false, err
	}
	var runAt any
	if !t.RunAt.IsZero() {
		runAt = offset(t.RunAt, now)
	}
	n, err := q.byID().exec(ctx, d.sql.transition, []any{d.now(now), string(t.State), runAt, sqlutil.NullBytes(t.Result),
		refund, errJSON, t.ID, t.Fence, owner, sqlutil.SnoozeArg(t)})
	if err != nil {
		return false, fmt.Errorf("finish task %d: %w", t.ID, err)
	}
	if n == 1 && len(t.FollowUps) > 0 {
		if _, _, err := d.insertNotify(ctx, q, t.FollowUps, false); err != nil {
			return false, fmt.Errorf("finish task %d: insert follow-up: %w", t.ID, err)
		}
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

// ListExpired implements driver.Driver.
func (d *Driver) ListExpired(ctx context.Context, p driver.ExpiredParams) ([]driver.TaskRow, time.Time, error) {
	var out []driver.TaskRow
	var now time.Time
	err := pgxQuerier{db: d.pool}.query(ctx, d.sql.expired, []any{d.now(p.Now), p.Limit}, func(scan func(...any) error) error {
		r := driver.TaskRow{State: driver.StateRunning}
		var owner *string
		var expires, attempted *time.Time
		if err := scan(&r.ID, &r.Queue, &r.Type, &r.Priority, &r.Attempt, &r.MaxAttempts, &r.Fence, &r.RunAt,
			&owner, &expires, &attempted, &now); err != nil {
			return err
		}
		r.RunAt = r.RunAt.UTC()
		if owner != nil {
			r.LeaseOwner = *owner
		}
		r.LeaseExpiresAt, r.AttemptedAt = optTime(expires), optTime(attempted)
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list expired leases: %w", err)
	}
	if now.IsZero() {
		now = p.Now
	}
	return out, now.UTC(), nil
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
	var queues []string
	err := beginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		out = out[:0]
		q := pgxQuerier{db: tx}
		locked := map[int64]bool{}
		err := q.query(ctx, d.sql.lockExpired, []any{d.now(p.Now), ids}, func(scan func(...any) error) error {
			var id int64
			if err := scan(&id); err != nil {
				return err
			}
			locked[id] = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("rescue: %w", err)
		}
		for _, rt := range p.Tasks {
			if !locked[rt.Transition.ID] {
				continue
			}
			// Offsets are taken from the instant the expiry was judged,
			// which the transition adds them back to.
			applied, err := d.transition(ctx, q, rt.Owner, p.Now, rt.Transition)
			if err != nil {
				return err
			}
			if !applied {
				continue
			}
			row, err := d.getWith(ctx, q, rt.Transition.ID)
			if err != nil {
				return fmt.Errorf("rescue: %w", err)
			}
			out = append(out, *row)
		}
		rescued := make([]*driver.TaskRow, len(out))
		for i := range out {
			rescued[i] = &out[i]
		}
		queues, err = d.notifyReady(ctx, q, rescued, true)
		return err
	})
	if err != nil {
		return nil, err
	}
	d.wakeLocal(queues)
	return out, nil
}

// Get implements driver.Driver: keel_tasks first, then keel_archive.
func (d *Driver) Get(ctx context.Context, id int64) (*driver.TaskRow, error) {
	row, err := d.getWith(ctx, pgxQuerier{db: d.pool}, id)
	if err != nil {
		return nil, err
	}
	return row, nil
}

// GetByKey implements driver.Driver.
func (d *Driver) GetByKey(ctx context.Context, key string) (*driver.TaskRow, error) {
	row, err := d.one(ctx, pgxQuerier{db: d.pool}.byID(), d.sql.byKey, key)
	if err != nil {
		return nil, fmt.Errorf("get task by idempotency key: %w", err)
	}
	if row == nil {
		return nil, driver.ErrNotFound
	}
	return row, nil
}

func (d *Driver) getWith(ctx context.Context, q querier, id int64) (*driver.TaskRow, error) {
	row, err := d.one(ctx, q.byID(), d.sql.get, id)
	if err != nil {
		return nil, fmt.Errorf("get task %d: %w", id, err)
	}
	if row == nil {
		// Not in keel_tasks: archived, or unknown. A task archived since
		// the first read is found by this later one.
		if row, err = d.getArchived(ctx, q.byID(), id); err != nil {
			return nil, err
		}
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
		_, err := d.Get(ctx, id)
		return nil, sqlutil.MissingOrWrongState(id, err)
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
		_, err := d.Get(ctx, id)
		return nil, sqlutil.MissingOrWrongState(id, err)
	}
	return row, nil
}

// List implements driver.Driver.
func (d *Driver) List(ctx context.Context, p driver.Filter) ([]driver.TaskRow, error) {
	q, args := d.listSQL(p)
	// Planned for its values each time (byID): a cached generic plan
	// cannot tell a rare type or queue, best read on its index, from a
	// common one, best read by walking the ids.
	out, err := sqlutil.Collect(rowsOf(ctx, pgxQuerier{db: d.pool}.byID(), q, args...), scanTask)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return out, nil
}

// listSQL is List's query and arguments for p.
func (d *Driver) listSQL(p driver.Filter) (string, []any) {
	return sqlutil.ListQuery(d.sql.list, p, func(n int) string { return "$" + strconv.Itoa(n) },
		func(t time.Time) any { return t })
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
		return fmt.Errorf("resign leadership: %w", unavailable(ctx, err))
	}
	return nil
}

// SaveStep implements driver.Driver.
func (d *Driver) SaveStep(ctx context.Context, p driver.StepParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("save step: %w", err)
	}
	n, err := pgxQuerier{db: d.pool}.byID().exec(ctx, d.sql.saveStep, []any{d.now(p.Now), p.Name, string(p.Result),
		p.ID, p.Owner, p.Fence})
	if err != nil {
		return false, fmt.Errorf("save step %q of task %d: %w", p.Name, p.ID, err)
	}
	return n == 1, nil
}
