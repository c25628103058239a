package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Alerts, their notifier deliveries and stored documents. Every time is
// the params' own (the leader's clock), also without Options.CallerClock.
// Reads run in one read-only snapshot, so an alert and its deliveries
// agree. Their SQL is in queries.go.

// maxFireAttempts bounds FireAlert's insert-or-read loop (see FireAlert).
const maxFireAttempts = 8

// FireAlert implements driver.Driver: the insert fails on the unique
// open_key when an alert of the rule and subject is open, and the open one
// is read back in the same transaction. The failed insert leaves a shared
// lock on that key, so the alert cannot be resolved before it is read.
func (d *Driver) FireAlert(ctx context.Context, p driver.FireAlertParams) (*driver.AlertRow, bool, error) {
	if err := p.Validate(); err != nil {
		return nil, false, fmt.Errorf("fire alert: %w", err)
	}
	key := sqlutil.OpenKey(p.Rule, p.Subject)
	var (
		a      *driver.AlertRow
		opened bool
	)
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		for range maxFireAttempts {
			res, err := tx.ExecContext(ctx, sqlFireAlert, p.Rule, p.Subject, key, p.Message, p.Hint,
				sqlutil.NullBytes(p.Values), sqlutil.AlertTime(p.Now))
			var as []driver.AlertRow
			switch {
			case err == nil:
				id, err := res.LastInsertId()
				if err != nil {
					return err
				}
				if as, err = loadAlerts(ctx, tx, sqlGetAlert, id); err != nil {
					return err
				}
				opened = true
			case isDuplicate(err):
				if as, err = loadAlerts(ctx, tx, sqlOpenAlert, key); err != nil {
					return err
				}
				opened = false
			default:
				return err
			}
			if len(as) == 1 {
				a = &as[0]
				return nil
			}
		}
		return fmt.Errorf("its open alert was resolved %d times while firing", maxFireAttempts)
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
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, sqlUpdateAlert, p.Message, sqlutil.NullBytes(p.Values), sqlutil.AlertTime(p.Now), p.ID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected() // rows matched (clientFoundRows)
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
		as       []driver.AlertRow
		resolved bool
	)
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, sqlResolveAlert, sqlutil.AlertTime(p.Now), p.Message, sqlutil.NullBytes(p.Values), p.ID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected() // rows matched (clientFoundRows)
		if err != nil {
			return err
		}
		resolved = n == 1
		as, err = loadAlerts(ctx, tx, sqlGetAlert, p.ID)
		return err
	})
	if err == nil && len(as) == 0 {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, false, fmt.Errorf("resolve alert %d: %w", p.ID, err)
	}
	return &as[0], resolved, nil
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
	query, args := sqlutil.AlertListQuery(sqlListAlerts, f, sqlutil.Question, func(t time.Time) any { return t })
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
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, sqlRecordDelivery, p.Event, p.Notifier,
			sqlutil.DeliveredAt(p, func(t time.Time) any { return t }), p.Error, sqlutil.AlertTime(p.Now), p.AlertID)
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
	err := d.db.QueryRowContext(ctx, sqlGetMeta, name).Scan(&v)
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
	err := d.retry(ctx, func() error {
		var err error
		if value == nil {
			_, err = d.db.ExecContext(ctx, sqlDeleteMeta, name)
		} else {
			_, err = d.db.ExecContext(ctx, sqlPutMeta, name, value, sqlutil.AlertTime(now))
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("put meta %q: %w", name, err)
	}
	return nil
}

// read runs fn in a read-only REPEATABLE READ transaction: one snapshot.
func (d *Driver) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // read-only: nothing to keep
	return fn(tx)
}

// loadAlerts reads the alerts query (selecting alertColumns) returns and
// their deliveries.
func loadAlerts(ctx context.Context, q querier, query string, args ...any) ([]driver.AlertRow, error) {
	as, err := sqlutil.Collect(sqlutil.Query(ctx, q, query, args...), scanAlert)
	if err != nil || len(as) == 0 {
		return as, err
	}
	ids := sqlutil.AlertIDs(as)
	idArgs := make([]any, len(ids))
	for i, id := range ids {
		idArgs[i] = id
	}
	ds, err := sqlutil.Collect(sqlutil.Query(ctx, q,
		strings.Replace(sqlDeliveries, "{ids}", sqlutil.Repeat("?", len(ids)), 1), idArgs...), scanDelivery)
	if err != nil {
		return nil, err
	}
	sqlutil.AttachDeliveries(as, ds)
	return as, nil
}
