package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The automatic brake's rows (keel_brakes, migration 011).

const sqlListBrakes = `SELECT ` + sqlutil.BrakeColumns + ` FROM keel_brakes ORDER BY type`

// sqlEnsureBrake gives a type without a row a closed one, so that a
// change from closed has a row to update.
const sqlEnsureBrake = `INSERT IGNORE INTO keel_brakes (type, state, updated_at) VALUES (?, 'closed', ?)`

const sqlChangeBrake = `UPDATE keel_brakes SET state = ?, opened_at = ?, open_until = ?, probe_task_id = ?,
	probe_owner = ?, probe_at = ?, probe_attempt = ?, ratio = ?, attempts = ?, reason = ?, closed_at = ?, updated_at = ?
WHERE type = ? AND state IN (?, ?, ?) AND (? OR coalesce(probe_owner, '') = ?)`

const sqlSetBrakeConfig = `UPDATE keel_brakes SET cfg_window = ?, cfg_threshold = ?, cfg_cooldown_ms = ?, updated_at = ?
WHERE type = ?`

// SetBrakeConfig implements driver.Braker.
func (d *Driver) SetBrakeConfig(ctx context.Context, p driver.BrakeConfigParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, sqlEnsureBrake, p.Type, p.Now.UTC()); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, sqlSetBrakeConfig, sqlutil.BrakeConfigArgs(p, func(t time.Time) any { return t.UTC() })...)
		return err
	})
	if err != nil {
		return fmt.Errorf("set brake config of %s: %w", p.Type, err)
	}
	return nil
}

// ListBrakes implements driver.Braker.
func (d *Driver) ListBrakes(ctx context.Context) ([]driver.BrakeRow, error) {
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.db, sqlListBrakes), func(scan sqlutil.Scan) (*driver.BrakeRow, error) {
		return sqlutil.ScanBrake(scan, sqlutil.UTC)
	})
	if err != nil {
		return nil, fmt.Errorf("list brakes: %w", err)
	}
	return out, nil
}

// ChangeBrake implements driver.Braker.
func (d *Driver) ChangeBrake(ctx context.Context, c driver.BrakeChange) (bool, error) {
	if err := c.Validate(); err != nil {
		return false, err
	}
	tm := func(t time.Time) any {
		if t.IsZero() {
			return nil
		}
		return t.UTC()
	}
	var applied bool
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		if c.FromClosed() {
			if _, err := tx.ExecContext(ctx, sqlEnsureBrake, c.To.Type, c.Now.UTC()); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, sqlChangeBrake, sqlutil.BrakeArgs(c, tm)...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		applied = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("change brake of %s: %w", c.To.Type, err)
	}
	return applied, nil
}

var _ driver.Braker = (*Driver)(nil)
