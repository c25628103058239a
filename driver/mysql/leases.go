package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Leases: heartbeats, expired leases and their rescue. Their SQL is in
// queries.go.

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
	return sqlutil.ListExpired(sqlutil.Query(ctx, d.db, sqlExpired.text, sqlExpired.args(d.now(p.Now), p.Limit)...), p,
		func(scan sqlutil.Scan, now *time.Time) (*driver.TaskRow, error) {
			return sqlutil.ScanExpired(scan, sqlutil.UTC, sqlutil.OptUTC, now)
		})
}

// Rescue implements driver.Driver.
func (d *Driver) Rescue(ctx context.Context, p driver.RescueParams) ([]driver.TaskRow, error) {
	if len(p.Tasks) == 0 {
		return nil, nil
	}
	ids := sqlutil.RescueIDs(p)
	var out []driver.TaskRow
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		lock := sqlLockExpired.with("{ids}", "?", len(ids), 1)
		expired, trs, err := sqlutil.StillExpired(p, sqlutil.Query(ctx, tx, lock.text, lock.args(nil, append(idArgs(ids), p.Now)...)...))
		if err != nil {
			return err
		}
		tasks, err := d.countedTasks(ctx, tx, trs)
		if err != nil {
			return err
		}
		var tally sqlutil.Tally
		for _, rt := range expired {
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
