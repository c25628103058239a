package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Finish and FinishTx: the fenced transitions that end an attempt. Their
// SQL is in queries.go.

// Finish implements driver.Driver. Successes without a result go in one
// statement; other transitions one statement each, all in one group commit.
func (d *Driver) Finish(ctx context.Context, p driver.FinishParams) ([]int64, error) {
	var ok, ids []int64
	var pairs [][2]int64
	ends := sqlutil.Ends{}
	others := sqlutil.SplitFinish(p.Transitions, func(t driver.Transition) {
		ids, pairs = append(ids, t.ID), append(pairs, [2]int64{t.ID, t.Fence})
		ends.Add(t)
	})
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
				tally.Finished(tasks[id], ends.Success(id), p.Now)
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
		if err := d.SettleFinished(ctx, tx, p.Now, others, ok); err != nil {
			return err
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
	if err := d.SettleFinished(ctx, tx, now, []driver.Transition{t}, []int64{t.ID}); err != nil {
		return false, err
	}
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
