package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Alerts, their notifier deliveries and stored documents. Writes go
// through the single writer; reads run in one read transaction, so an
// alert and its deliveries are of one snapshot. Their SQL is in queries.go.

// FireAlert implements driver.Driver: the insert does nothing when the
// unique open_key holds an open alert already, which is then read back.
func (d *Driver) FireAlert(ctx context.Context, p driver.FireAlertParams) (*driver.AlertRow, bool, error) {
	if err := p.Validate(); err != nil {
		return nil, false, fmt.Errorf("fire alert: %w", err)
	}
	key := sqlutil.OpenKey(p.Rule, p.Subject)
	var (
		a      *driver.AlertRow
		opened bool
	)
	err := d.write(ctx, func(tx querier) error {
		as, err := loadAlerts(ctx, tx, sqlFireAlert, p.Rule, p.Subject, key, p.Message, p.Hint,
			sqlutil.NullBytes(p.Values), micros(sqlutil.AlertTime(p.Now)))
		if err != nil {
			return err
		}
		opened = len(as) == 1
		if !opened {
			if as, err = loadAlerts(ctx, tx, sqlOpenAlert, key); err != nil {
				return err
			}
		}
		if len(as) != 1 {
			return errors.New("no open alert after a conflict on its key")
		}
		a = &as[0]
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("fire alert %s %s: %w", p.Rule, p.Subject, err)
	}
	return a, opened, nil
}

// UpdateAlert implements driver.Driver.
func (d *Driver) UpdateAlert(ctx context.Context, p driver.UpdateAlertParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("update alert: %w", err)
	}
	var n int64
	err := d.write(ctx, func(tx querier) error {
		res, err := tx.ExecContext(ctx, sqlUpdateAlert, p.Message, sqlutil.NullBytes(p.Values), micros(sqlutil.AlertTime(p.Now)), p.ID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("update alert %d: %w", p.ID, err)
	}
	return n == 1, nil
}

// ResolveAlert implements driver.Driver.
func (d *Driver) ResolveAlert(ctx context.Context, p driver.ResolveAlertParams) (*driver.AlertRow, bool, error) {
	if err := p.Validate(); err != nil {
		return nil, false, fmt.Errorf("resolve alert: %w", err)
	}
	var (
		a        *driver.AlertRow
		resolved bool
	)
	err := d.write(ctx, func(tx querier) error {
		a = nil
		res, err := tx.ExecContext(ctx, sqlResolveAlert, micros(sqlutil.AlertTime(p.Now)), p.Message,
			sqlutil.NullBytes(p.Values), p.ID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		resolved = n == 1
		as, err := loadAlerts(ctx, tx, sqlGetAlert, p.ID)
		if len(as) == 1 {
			a = &as[0]
		}
		return err
	})
	if err == nil && a == nil {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, false, fmt.Errorf("resolve alert %d: %w", p.ID, err)
	}
	return a, resolved, nil
}

// GetAlert implements driver.Driver.
func (d *Driver) GetAlert(ctx context.Context, id int64) (*driver.AlertRow, error) {
	var as []driver.AlertRow
	err := d.read(ctx, func(tx *sql.Tx) error {
		var err error
		as, err = loadAlerts(ctx, tx, sqlGetAlert, id)
		return err
	})
	if err == nil && len(as) == 0 {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get alert %d: %w", id, err)
	}
	return &as[0], nil
}

// ListAlerts implements driver.Driver.
func (d *Driver) ListAlerts(ctx context.Context, f driver.AlertFilter) ([]driver.AlertRow, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	query, args := sqlutil.AlertListQuery(sqlListAlerts, f, sqlutil.Question, func(t time.Time) any { return micros(t) })
	var as []driver.AlertRow
	err := d.read(ctx, func(tx *sql.Tx) error {
		var err error
		as, err = loadAlerts(ctx, tx, query, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	return as, nil
}

// RecordDelivery implements driver.Driver: one upsert, which inserts
// nothing for an unknown alert.
func (d *Driver) RecordDelivery(ctx context.Context, p driver.DeliveryParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("record delivery: %w", err)
	}
	var n int64
	err := d.write(ctx, func(tx querier) error {
		res, err := tx.ExecContext(ctx, sqlRecordDelivery, p.AlertID, p.Event, p.Notifier,
			sqlutil.DeliveredAt(p, func(t time.Time) any { return micros(t) }), p.Error, micros(sqlutil.AlertTime(p.Now)))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err == nil && n == 0 {
		err = driver.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("record delivery of alert %d %s to %s: %w", p.AlertID, p.Event, p.Notifier, err)
	}
	return nil
}

// GetMeta implements driver.Driver.
func (d *Driver) GetMeta(ctx context.Context, name string) ([]byte, error) {
	var v []byte
	err := d.rdb.QueryRowContext(ctx, sqlGetMeta, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get meta %q: %w", name, err)
	}
	return sqlutil.MetaValue(v), nil
}

// PutMeta implements driver.Driver.
func (d *Driver) PutMeta(ctx context.Context, name string, value []byte, now time.Time) error {
	if err := driver.ValidateMeta(name, value); err != nil {
		return fmt.Errorf("put meta: %w", err)
	}
	err := d.write(ctx, func(tx querier) error {
		if value == nil {
			_, err := tx.ExecContext(ctx, sqlDeleteMeta, name)
			return err
		}
		_, err := tx.ExecContext(ctx, sqlPutMeta, name, value, micros(now))
		return err
	})
	if err != nil {
		return fmt.Errorf("put meta %q: %w", name, err)
	}
	return nil
}

// read runs fn in a read-only transaction of the reader pool.
func (d *Driver) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := d.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // read-only: nothing to keep
	return fn(tx)
}

// readRows reads the rows query selects, each scanned by scan, in a
// read-only transaction of the reader pool.
func readRows[R any](ctx context.Context, d *Driver, scan func(sqlutil.Scan) (*R, error), query string, args ...any) ([]R, error) {
	var out []R
	err := d.read(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = sqlutil.Collect(sqlutil.Query(ctx, tx, query, args...), scan)
		return err
	})
	return out, err
}

// loadAlerts reads the alerts query selects (alertColumns) and their
// deliveries.
func loadAlerts(ctx context.Context, q querier, query string, args ...any) ([]driver.AlertRow, error) {
	as, err := sqlutil.Collect(sqlutil.Query(ctx, q, query, args...), scanAlert)
	if err != nil || len(as) == 0 {
		return as, err
	}
	ds, err := sqlutil.Collect(sqlutil.Query(ctx, q, sqlDeliveries, int64List(sqlutil.AlertIDs(as))), scanDelivery)
	if err != nil {
		return nil, err
	}
	sqlutil.AttachDeliveries(as, ds)
	return as, nil
}
