package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Leases: heartbeats, expired leases and their rescue. Their SQL is in
// queries.go.

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
	return sqlutil.ListExpired(rowsOf(ctx, pgxQuerier{db: d.pool}, d.sql.expired, d.now(p.Now), p.Limit), p,
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
	var queues []string
	err := beginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		out = out[:0]
		q := pgxQuerier{db: tx}
		expired, _, err := sqlutil.StillExpired(p, rowsOf(ctx, q, d.sql.lockExpired, d.now(p.Now), ids))
		if err != nil {
			return fmt.Errorf("rescue: %w", err)
		}
		for _, rt := range expired {
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
