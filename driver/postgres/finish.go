package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Finish and FinishTx: the fenced transitions that end an attempt. Their
// SQL is in queries.go.

// Finish implements driver.Driver: successes without a result in one
// statement, other transitions one statement each, in one transaction.
func (d *Driver) Finish(ctx context.Context, p driver.FinishParams) ([]int64, error) {
	var ok, ids []int64
	var keys []string
	others := sqlutil.SplitFinish(p.Transitions, func(t driver.Transition) {
		ids, keys = append(ids, t.ID), append(keys, strconv.FormatInt(t.ID, 10)+":"+strconv.FormatInt(t.Fence, 10))
	})
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
		err := d.SettleFinished(ctx, q, p.Now, others, ok)
		return err
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
	applied, err := d.transition(ctx, q, owner, now, t)
	if err != nil || !applied {
		return false, err
	}
	if err := d.SettleFinished(ctx, q, now, []driver.Transition{t}, []int64{t.ID}); err != nil {
		return false, err
	}
	return true, nil
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
