package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The automatic brake's rows (keel_brakes, migration 013).

const sqlListBrakes = `SELECT ` + sqlutil.BrakeColumns + ` FROM {schema}.keel_brakes ORDER BY type`

// sqlEnsureBrake gives a type without a row a closed one, so that a
// change from closed has a row to update.
const sqlEnsureBrake = `INSERT INTO {schema}.keel_brakes (type, state, updated_at) VALUES ($1, 'closed', $2)
ON CONFLICT (type) DO NOTHING`

const sqlChangeBrake = `UPDATE {schema}.keel_brakes SET state = $1, opened_at = $2, open_until = $3,
	probe_task_id = $4, probe_owner = $5, probe_at = $6, probe_attempt = $7, ratio = $8, attempts = $9,
	reason = $10, closed_at = $11, updated_at = $12
WHERE type = $13 AND state IN ($14, $15, $16) AND ($17::boolean OR coalesce(probe_owner, '') = $18)`

const sqlSetBrakeConfig = `UPDATE {schema}.keel_brakes SET cfg_window = $1, cfg_threshold = $2, cfg_cooldown_ms = $3,
	updated_at = $4 WHERE type = $5`

// SetBrakeConfig implements driver.Braker.
func (d *Driver) SetBrakeConfig(ctx context.Context, p driver.BrakeConfigParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	err := beginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		q := pgxQuerier{db: tx}
		if _, err := q.exec(ctx, d.q(sqlEnsureBrake), []any{p.Type, p.Now}); err != nil {
			return err
		}
		_, err := q.exec(ctx, d.q(sqlSetBrakeConfig), sqlutil.BrakeConfigArgs(p, func(t time.Time) any { return t }))
		return err
	})
	if err != nil {
		return fmt.Errorf("set brake config of %s: %w", p.Type, err)
	}
	return nil
}

// ListBrakes implements driver.Braker.
func (d *Driver) ListBrakes(ctx context.Context) ([]driver.BrakeRow, error) {
	out, err := sqlutil.Collect(rowsOf(ctx, pgxQuerier{db: d.pool}, d.q(sqlListBrakes)), func(scan sqlutil.Scan) (*driver.BrakeRow, error) {
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
		return t
	}
	var applied bool
	err := beginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		q := pgxQuerier{db: tx}
		if c.FromClosed() {
			if _, err := q.exec(ctx, d.q(sqlEnsureBrake), []any{c.To.Type, c.Now}); err != nil {
				return err
			}
		}
		n, err := q.exec(ctx, d.q(sqlChangeBrake), sqlutil.BrakeArgs(c, tm))
		applied = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("change brake of %s: %w", c.To.Type, err)
	}
	return applied, nil
}

var _ driver.Braker = (*Driver)(nil)
