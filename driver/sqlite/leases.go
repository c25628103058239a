package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Leases: heartbeats, expired leases and their rescue. Their SQL is in
// queries.go.

// Heartbeat implements driver.Driver.
func (d *Driver) Heartbeat(ctx context.Context, p driver.HeartbeatParams) ([]int64, error) {
	ids := int64List(p.IDs)
	var held []int64
	err := d.write(ctx, func(tx querier) error {
		held = held[:0]
		w := waited(tx) // see waited
		rows, err := tx.QueryContext(ctx, sqlHeartbeat, micros(p.LeaseExpiresAt.Add(w)), micros(p.Now.Add(w)), ids, p.Owner)
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
	return sqlutil.ListExpired(sqlutil.Query(ctx, d.rdb, sqlExpired, micros(p.Now), p.Limit), p,
		func(scan sqlutil.Scan, _ *time.Time) (*driver.TaskRow, error) {
			return sqlutil.ScanExpired(scan, fromMicros, optTime)
		})
}

// Rescue implements driver.Driver.
func (d *Driver) Rescue(ctx context.Context, p driver.RescueParams) ([]driver.TaskRow, error) {
	if len(p.Tasks) == 0 {
		return nil, nil
	}
	ids := sqlutil.RescueIDs(p)
	var out []driver.TaskRow
	err := d.write(ctx, func(tx querier) error {
		out = out[:0]
		expired, trs, err := sqlutil.StillExpired(p, sqlutil.Query(ctx, tx, sqlLockExpired, int64List(ids), micros(p.Now)))
		if err != nil {
			return fmt.Errorf("rescue: %w", err)
		}
		tasks, err := countedTasks(ctx, tx, trs)
		if err != nil {
			return err
		}
		var tally sqlutil.Tally
		for _, rt := range expired {
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
