package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The task queries: insert, claim, finish, heartbeat, rescue, get, cancel,
// retry, list, counts and leadership. Their SQL is in queries.go.

// Insert implements driver.Driver: all tasks in one transaction.
func (d *Driver) Insert(ctx context.Context, params []driver.InsertParams) ([]driver.InsertResult, error) {
	var out []driver.InsertResult
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if out, err = d.insert(ctx, tx, params); err != nil {
			return err
		}
		// A context that ended before the commit writes nothing.
		return ctx.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// InsertTx implements driver.Driver. The inserts run under a savepoint so
// a failure leaves nothing of the batch in the caller's transaction. A
// deadlock there rolls back the caller's whole transaction, so it is
// returned, not retried.
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
		out, err = d.insert(ctx, tx, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// insert inserts params in the transaction q: tasks without idempotency
// keys with multi-row INSERTs (they cannot conflict), the others one
// INSERT each. Results keep the order of params.
func (d *Driver) insert(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, error) {
	out := make([]driver.InsertResult, len(params))
	var tally sqlutil.Tally
	var plain []int
	for i, p := range params {
		if p.IdemKey == "" {
			plain = append(plain, i)
		}
	}
	keyed := len(params) - len(plain)
	for len(plain) > 0 {
		n := min(len(plain), maxInsertRows)
		rows, err := d.insertMany(ctx, q, params, plain[:n])
		if err != nil {
			return nil, err
		}
		for j, i := range plain[:n] {
			out[i] = driver.InsertResult{Task: rows[j]}
			tally.Insert(sqlutil.StateOf(rows[j]), rows[j].CreatedAt)
		}
		plain = plain[n:]
	}
	// The keyed tasks in order of key: batches sharing keys lock them in
	// the same order.
	for _, i := range sqlutil.InsertOrder(params)[len(params)-keyed:] {
		res, err := d.insertKeyed(ctx, q, params[i], &tally)
		if err != nil {
			return nil, err
		}
		out[i] = res
	}
	if err := count(ctx, q, &tally); err != nil {
		return nil, err
	}
	return out, nil
}

// Claim implements driver.Driver: in one short transaction, lock up to
// Limit ready rows (FOR UPDATE SKIP LOCKED), mark them running and read
// them back.
func (d *Driver) Claim(ctx context.Context, p driver.ClaimParams) ([]driver.TaskRow, error) {
	include, exclude, ok := sqlutil.ClaimTypes(p)
	if !ok {
		return nil, nil // no type to claim
	}
	var out []driver.TaskRow
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = d.claimTx(ctx, tx, p, include, exclude)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	driver.SortClaimed(out)
	return out, nil
}

// claimTx claims in tx for p with its type filter (see
// sqlutil.ClaimTypes) and keeps the live counters right.
func (d *Driver) claimTx(ctx context.Context, tx *sql.Tx, p driver.ClaimParams, include, exclude []string) ([]driver.TaskRow, error) {
	pick, pickArgs := claimPick(p, include, exclude)
	var out []driver.TaskRow
	now := d.now(p.Now)
	err := func() error {
		c := sqlutil.GetClaimed()
		defer c.Release()
		var at time.Time
		err := sqlutil.Query(ctx, tx, pick.text, pick.args(now, pickArgs...)...)(func(scan sqlutil.Scan) error {
			if err := scan(&c.ID, &c.Type, &c.Priority, &c.Payload, &c.Attempt, &c.MaxAttempts, &c.Fence,
				&c.RunAt, &c.TimeoutMS, &c.CreatedAt, &c.Snoozes, &c.Meta, &at); err != nil {
				return err
			}
			c.Add(p)
			return nil
		})
		if err != nil || c.Len() == 0 {
			return err
		}
		out = c.Rows()
		ids := make([]int64, len(out))
		for i := range out {
			ids[i] = out[i].ID
		}
		// The mark writes the pick's now, so the rows read are the rows
		// written once attempt, fence and the lease move on.
		at = at.UTC()
		lease := offset(p.LeaseExpiresAt, p.Now)
		mark := sqlClaimMark.with("{ids}", "?", len(ids), 1)
		args := append([]any{p.Owner, lease}, idArgs(ids)...)
		res, err := tx.ExecContext(ctx, mark.text, mark.args(at, args...)...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != int64(len(ids)) {
			// Cannot happen: the pick locked the rows. Claim again.
			return errors.Join(err, fmt.Errorf("marked %d of %d tasks picked", n, len(ids)))
		}
		for i := range out {
			r := &out[i]
			r.Attempt, r.Fence = r.Attempt+1, r.Fence+1
			r.AttemptedAt, r.LeaseExpiresAt = at, at.Add(time.Duration(lease)*time.Microsecond)
		}
		// attempted_at is the claim's now.
		var tally sqlutil.Tally
		for i := range out {
			n := sqlutil.StateOf(&out[i])
			o := n
			o.State, o.Attempt = driver.StatePending, n.Attempt-1
			tally.Update(o, n, out[i].AttemptedAt, false)
		}
		return count(ctx, tx, &tally)
	}()
	return out, err
}

// claimPick is the claim's pick for the type filter types (see
// sqlutil.ClaimTypes), and its arguments.
func claimPick(p driver.ClaimParams, include, exclude []string) (stmt, []any) {
	pick, types := sqlClaimPick, []string(nil)
	switch {
	case include != nil && p.Retried:
		pick, types = sqlClaimPickRetried, include
	case include != nil:
		pick, types = sqlClaimPickTypes, include
	case len(exclude) > 0:
		pick, types = sqlClaimPickExcluding, exclude
	}
	if types == nil {
		return pick, []any{p.Queue, p.Limit}
	}
	pick = pick.with("{types}", "?", len(types), 1)
	return pick, append(appendStrings([]any{p.Queue}, types), p.Limit)
}

// Claimed implements driver.Driver.
func (d *Driver) Claimed(ctx context.Context, p driver.ClaimedParams) ([]driver.TaskRow, error) {
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.db, sqlClaimed.text, sqlClaimed.args(d.now(p.Now), p.Owner, p.Queue, p.Limit)...), scanTask)
	if err != nil {
		return nil, fmt.Errorf("read back claimed tasks: %w", err)
	}
	return out, nil
}

// Finish implements driver.Driver: in one transaction, successes without a
// result with one fenced UPDATE (after locking the rows that still qualify,
// to learn which applied, and reading the now the whole batch is written
// at), other transitions one statement each.
func (d *Driver) Finish(ctx context.Context, p driver.FinishParams) ([]int64, error) {
	var ok []int64
	var ids []int64
	var pairs []any
	var others []driver.Transition
	for _, t := range p.Transitions {
		if sqlutil.PlainSuccess(t) {
			ids, pairs = append(ids, t.ID), append(pairs, t.ID, t.Fence)
		} else {
			others = append(others, t)
		}
	}
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		ok = ok[:0]
		tasks, err := d.countedTasks(ctx, tx, p.Transitions)
		if err != nil {
			return err
		}
		var tally sqlutil.Tally
		var now time.Time
		if len(ids) > 0 {
			pick := sqlSucceedPick.with("{ids}", "?", len(ids), 1).with("{pairs}", "(?, ?)", len(ids), 2)
			args := append(idArgs(ids), pairs...)
			var held []int64
			err := sqlutil.Query(ctx, tx, pick.text, pick.args(d.now(p.Now), append(args, p.Owner)...)...)(func(scan sqlutil.Scan) error {
				var id int64
				if err := scan(&id, &now); err != nil {
					return err
				}
				held = append(held, id)
				return nil
			})
			if err != nil {
				return err
			}
			now = now.UTC()
			if len(held) > 0 {
				mark := sqlSucceedMark.with("{ids}", "?", len(held), 1)
				if _, err := tx.ExecContext(ctx, mark.text, mark.args(now, append(idArgs(held), p.Owner)...)...); err != nil {
					return err
				}
				ok = append(ok, held...)
				for _, id := range held {
					tally.Finished(tasks[id], driver.Transition{State: driver.StateSucceeded}, now)
				}
			}
		}
		if len(others) > 0 && now.IsZero() {
			if now, err = d.txNow(ctx, tx, p.Now); err != nil {
				return err
			}
		}
		for _, t := range others {
			applied, err := d.transition(ctx, tx, p.Owner, now, p.Now, t)
			if err != nil {
				return err
			}
			if applied {
				ok = append(ok, t.ID)
				tally.Finished(tasks[t.ID], stored(t, now, p.Now), now)
			}
		}
		return count(ctx, tx, &tally)
	})
	if err != nil {
		return nil, fmt.Errorf("finish tasks: %w", err)
	}
	return sqlutil.AddAppliedBefore(ctx, p, ok, d.Get)
}

// FinishTx implements driver.Driver.
func (d *Driver) FinishTx(ctx context.Context, dtx driver.Tx, owner string, now time.Time, t driver.Transition) (bool, error) {
	tx, err := callerTx(dtx)
	if err != nil {
		return false, err
	}
	tasks, err := d.countedTasks(ctx, tx, []driver.Transition{t})
	if err != nil {
		return false, err
	}
	at, err := d.txNow(ctx, tx, now)
	if err != nil {
		return false, err
	}
	applied, err := d.transition(ctx, tx, owner, at, now, t)
	if err != nil || !applied {
		return false, err
	}
	var tally sqlutil.Tally
	tally.Finished(tasks[t.ID], stored(t, at, now), at)
	return true, count(ctx, tx, &tally)
}

// transition applies t with one fenced UPDATE at now, the transaction's
// now (see txNow); t.RunAt is taken relative to caller, the clock it was
// computed on (see stored).
func (d *Driver) transition(ctx context.Context, q querier, owner string, now, caller time.Time, t driver.Transition) (bool, error) {
	errJSON, refund, err := sqlutil.TransitionArgs(t)
	if err != nil {
		return false, err
	}
	var runAt any
	if !t.RunAt.IsZero() {
		runAt = offset(t.RunAt, caller)
	}
	res, err := q.ExecContext(ctx, sqlTransition.text, sqlTransition.args(now, string(t.State), runAt,
		sqlutil.NullBytes(t.Result), refund, sqlutil.SnoozeArg(t), errJSON, errJSON, string(t.State), string(t.State),
		t.ID, t.Fence, owner)...)
	if err != nil {
		return false, fmt.Errorf("finish task %d: %w", t.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("finish task %d: %w", t.ID, err)
	}
	if n == 1 && len(t.FollowUps) > 0 {
		if _, err := d.insert(ctx, q, t.FollowUps); err != nil {
			return false, fmt.Errorf("finish task %d: insert follow-up: %w", t.ID, err)
		}
	}
	return n == 1, nil
}

// stored is t as transition stores it at now: its RunAt moved from the
// caller's clock to now's, to the microsecond.
func stored(t driver.Transition, now, caller time.Time) driver.Transition {
	if !t.RunAt.IsZero() {
		t.RunAt = now.Add(time.Duration(offset(t.RunAt, caller)) * time.Microsecond)
	}
	return t
}

// Heartbeat implements driver.Driver: lock the leases Owner still holds,
// then extend them, in one transaction.
func (d *Driver) Heartbeat(ctx context.Context, p driver.HeartbeatParams) ([]int64, error) {
	if len(p.IDs) == 0 {
		return nil, nil
	}
	var held []int64
	now := d.now(p.Now)
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		pick := sqlHeartbeatPick.with("{ids}", "?", len(p.IDs), 1)
		rows, err := tx.QueryContext(ctx, pick.text, pick.args(nil, append(idArgs(p.IDs), p.Owner)...)...)
		if err != nil {
			return err
		}
		if held, err = scanIDs(rows); err != nil || len(held) == 0 {
			return err
		}
		mark := sqlHeartbeatMark.with("{ids}", "?", len(held), 1)
		args := append([]any{offset(p.LeaseExpiresAt, p.Now)}, idArgs(held)...)
		_, err = tx.ExecContext(ctx, mark.text, mark.args(now, append(args, p.Owner)...)...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	return held, nil
}

// ListExpired implements driver.Driver.
func (d *Driver) ListExpired(ctx context.Context, p driver.ExpiredParams) ([]driver.TaskRow, time.Time, error) {
	rows, err := d.db.QueryContext(ctx, sqlExpired.text, sqlExpired.args(d.now(p.Now), p.Limit)...)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("list expired leases: %w", err)
	}
	defer rows.Close()
	var out []driver.TaskRow
	now := p.Now
	for rows.Next() {
		r := driver.TaskRow{State: driver.StateRunning}
		var owner sql.NullString
		var expires, attempted sql.NullTime
		if err := rows.Scan(&r.ID, &r.Queue, &r.Type, &r.Priority, &r.Attempt, &r.MaxAttempts, &r.Fence, &r.RunAt,
			&owner, &expires, &attempted, &now); err != nil {
			return nil, time.Time{}, fmt.Errorf("list expired leases: %w", err)
		}
		r.RunAt, r.LeaseOwner = r.RunAt.UTC(), owner.String
		r.LeaseExpiresAt, r.AttemptedAt = optTime(expires), optTime(attempted)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("list expired leases: %w", err)
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
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		lock := sqlLockExpired.with("{ids}", "?", len(ids), 1)
		rows, err := tx.QueryContext(ctx, lock.text, lock.args(nil, append(idArgs(ids), p.Now)...)...)
		if err != nil {
			return err
		}
		locked, err := scanIDs(rows)
		if err != nil {
			return err
		}
		expired := make(map[int64]bool, len(locked))
		for _, id := range locked {
			expired[id] = true
		}
		trs := make([]driver.Transition, 0, len(p.Tasks))
		for _, rt := range p.Tasks {
			if expired[rt.Transition.ID] {
				trs = append(trs, rt.Transition)
			}
		}
		tasks, err := d.countedTasks(ctx, tx, trs)
		if err != nil {
			return err
		}
		var tally sqlutil.Tally
		for _, rt := range p.Tasks {
			if !expired[rt.Transition.ID] {
				continue
			}
			// The transition runs at the instant the expiry was judged.
			applied, err := d.transition(ctx, tx, rt.Owner, p.Now, p.Now, rt.Transition)
			if err != nil {
				return err
			}
			if !applied {
				continue
			}
			tally.Finished(tasks[rt.Transition.ID], rt.Transition, p.Now)
			row, err := d.getWith(ctx, tx, rt.Transition.ID)
			if err != nil {
				return err
			}
			out = append(out, *row)
		}
		return count(ctx, tx, &tally)
	})
	if err != nil {
		return nil, fmt.Errorf("rescue: %w", err)
	}
	return out, nil
}

// Get implements driver.Driver: keel_tasks first, then keel_archive.
func (d *Driver) Get(ctx context.Context, id int64) (*driver.TaskRow, error) {
	row, err := d.getWith(ctx, d.db, id)
	if errors.Is(err, driver.ErrNotFound) {
		// Not in keel_tasks: archived, or unknown. A task archived since
		// the first read is found by this later one.
		return d.getArchived(ctx, d.db, id)
	}
	return row, err
}

// GetByKey implements driver.Driver.
func (d *Driver) GetByKey(ctx context.Context, key string) (*driver.TaskRow, error) {
	got, err := sqlutil.Collect(sqlutil.Query(ctx, d.db, sqlGetByKey, key), scanTask)
	if err != nil {
		return nil, fmt.Errorf("get task by idempotency key: %w", err)
	}
	if len(got) == 0 {
		return nil, driver.ErrNotFound
	}
	return &got[0], nil
}

func (d *Driver) getWith(ctx context.Context, q querier, id int64) (*driver.TaskRow, error) {
	got, err := sqlutil.Collect(sqlutil.Query(ctx, q, sqlGet, id), scanTask)
	if err != nil {
		return nil, fmt.Errorf("get task %d: %w", id, err)
	}
	if len(got) == 0 {
		return nil, driver.ErrNotFound
	}
	return &got[0], nil
}

// getMany loads the tasks with the given ids, in no particular order.
func (d *Driver) getMany(ctx context.Context, q querier, ids []int64) ([]driver.TaskRow, error) {
	s := sqlGetIDs.with("{ids}", "?", len(ids), 1)
	out := make([]driver.TaskRow, 0, len(ids))
	err := sqlutil.Query(ctx, q, s.text, s.args(nil, idArgs(ids)...)...)(func(scan sqlutil.Scan) error {
		r, err := scanTask(scan)
		if err != nil {
			return err
		}
		out = append(out, *r)
		return nil
	})
	return out, err
}

// update locks the task id (reading the transaction's now), runs one
// conditional single-row UPDATE at that now and, when it matched, reads
// the row back and counts the change, all in one transaction. It returns
// nil when nothing matched, ErrNotFound when there is no such task.
func (d *Driver) update(ctx context.Context, s stmt, now time.Time, id int64) (*driver.TaskRow, error) {
	var row *driver.TaskRow
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		row = nil
		var old *driver.TaskRow
		var at time.Time
		err := sqlutil.Query(ctx, tx, sqlGetLocked.text, sqlGetLocked.args(d.now(now), id)...)(func(scan sqlutil.Scan) error {
			var err error
			old, err = scanTask(func(dest ...any) error { return scan(append(dest, &at)...) })
			return err
		})
		if err != nil {
			return err
		}
		if old == nil {
			return driver.ErrNotFound
		}
		at = at.UTC()
		res, err := tx.ExecContext(ctx, s.text, s.args(at, id)...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		if row, err = d.getWith(ctx, tx, id); err != nil {
			return err
		}
		var tally sqlutil.Tally
		tally.Update(sqlutil.StateOf(old), sqlutil.StateOf(row), at, false)
		return count(ctx, tx, &tally)
	})
	return row, err
}

// Cancel implements driver.Driver.
func (d *Driver) Cancel(ctx context.Context, id int64, now time.Time) (*driver.TaskRow, error) {
	row, err := d.update(ctx, sqlCancel, now, id)
	if errors.Is(err, driver.ErrNotFound) {
		_, err := d.Get(ctx, id) // an archived task: wrong state
		return nil, sqlutil.MissingOrWrongState(id, err)
	}
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
	row, err := d.update(ctx, sqlRetry, now, id)
	if errors.Is(err, driver.ErrNotFound) {
		_, err := d.Get(ctx, id) // an archived task: wrong state
		return nil, sqlutil.MissingOrWrongState(id, err)
	}
	if isDuplicate(err) {
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
	q, args := sqlutil.ListQuery(sqlList, p, sqlutil.Question, func(t time.Time) any { return t })
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.db, q, args...), scanTask)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return out, nil
}

// Lead implements driver.Driver: take or renew the lease row with one
// conditional upsert, then read who holds it, in one transaction.
func (d *Driver) Lead(ctx context.Context, p driver.LeadParams) (bool, error) {
	leading := false
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, sqlLead.text, sqlLead.args(d.now(p.Now), p.Name, p.Owner, p.TTL.Microseconds())...); err != nil {
			return err
		}
		var owner string
		if err := tx.QueryRowContext(ctx, sqlLeader, p.Name).Scan(&owner); err != nil {
			return err
		}
		leading = owner == p.Owner
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("elect leader: %w", err)
	}
	return leading, nil
}

// Resign implements driver.Driver.
func (d *Driver) Resign(ctx context.Context, name, owner string) error {
	err := d.retry(ctx, func() error {
		_, err := d.db.ExecContext(ctx, sqlResign, name, owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("resign leadership: %w", err)
	}
	return nil
}

// SaveStep implements driver.Driver.
func (d *Driver) SaveStep(ctx context.Context, p driver.StepParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("save step: %w", err)
	}
	res, err := d.db.ExecContext(ctx, sqlSaveStep.text, sqlSaveStep.args(d.now(p.Now), p.Name, string(p.Result),
		p.ID, p.Fence, p.Owner, p.Owner)...)
	if err != nil {
		return false, fmt.Errorf("save step %q of task %d: %w", p.Name, p.ID, err)
	}
	n, err := res.RowsAffected() // rows matched (clientFoundRows)
	if err != nil {
		return false, fmt.Errorf("save step %q of task %d: %w", p.Name, p.ID, err)
	}
	return n == 1, nil
}
