package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Finish and FinishTx: the fenced transitions that end an attempt. Their
// SQL is in queries.go.

// Finish implements driver.Driver: in one transaction, successes without a
// result with one fenced UPDATE (after locking the rows that still qualify,
// to learn which applied, and reading the now the whole batch is written
// at), other transitions one statement each.
func (d *Driver) Finish(ctx context.Context, p driver.FinishParams) ([]int64, error) {
	var ok, ids []int64
	var pairs []any
	ends := sqlutil.Ends{}
	others := sqlutil.SplitFinish(p.Transitions, func(t driver.Transition) {
		ids, pairs = append(ids, t.ID), append(pairs, t.ID, t.Fence)
		ends.Add(t)
	})
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
			held, at, err := sqlutil.IDsAt(sqlutil.Query(ctx, tx, pick.text, pick.args(d.now(p.Now), append(args, p.Owner)...)...), len(ids))
			if err != nil {
				return err
			}
			now = at
			if len(held) > 0 {
				mark := sqlSucceedMark.with("{ids}", "?", len(held), 1)
				if _, err := tx.ExecContext(ctx, mark.text, mark.args(now, append(idArgs(held), p.Owner)...)...); err != nil {
					return err
				}
				ok = append(ok, held...)
				for _, id := range held {
					tally.Finished(tasks[id], stored(ends.Success(id), now, p.Now), now)
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
		if err := d.SettleFinished(ctx, tx, now, others, ok); err != nil {
			return err
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
	if err := d.SettleFinished(ctx, tx, at, []driver.Transition{t}, []int64{t.ID}); err != nil {
		return false, err
	}
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

// stored is t as transition stores it at now: its RunAt and Ended moved
// from the caller's clock to now's, to the microsecond.
func stored(t driver.Transition, now, caller time.Time) driver.Transition {
	if !t.RunAt.IsZero() {
		t.RunAt = now.Add(time.Duration(offset(t.RunAt, caller)) * time.Microsecond)
	}
	if !t.Ended.IsZero() && !caller.IsZero() {
		t.Ended = now.Add(t.Ended.Sub(caller)) // on the database's clock, as now
	}
	return t
}
