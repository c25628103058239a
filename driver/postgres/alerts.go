package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Alerts, their notifier deliveries and stored documents. Every time is
// the params' own (the leader's clock), also without Options.CallerClock.
// Reads run in one read-only snapshot, so an alert and its deliveries
// agree. Their SQL is in queries.go.

// maxFireAttempts bounds FireAlert's insert-or-read loop: a read finds no
// open alert only when another leader resolved it between the two.
const maxFireAttempts = 8

// FireAlert implements driver.Driver: the insert does nothing when the
// unique open_key holds an open alert already, which is then read back by
// a second statement (whose snapshot sees the alert that won the key).
func (d *Driver) FireAlert(ctx context.Context, p driver.FireAlertParams) (*driver.AlertRow, bool, error) {
	if err := p.Validate(); err != nil {
		return nil, false, fmt.Errorf("fire alert: %w", err)
	}
	key := sqlutil.OpenKey(p.Rule, p.Subject)
	q := pgxQuerier{db: d.pool}
	for range maxFireAttempts {
		as, err := d.loadAlerts(ctx, q, sqlFireAlert, p.Rule, p.Subject, key, p.Message, p.Hint,
			sqlutil.NullBytes(p.Values), sqlutil.AlertTime(p.Now))
		if err != nil {
			return nil, false, fmt.Errorf("fire alert %s %s: %w", p.Rule, p.Subject, err)
		}
		if len(as) == 1 {
			return &as[0], true, nil
		}
		if as, err = d.loadAlerts(ctx, q, sqlOpenAlert, key); err != nil {
			return nil, false, fmt.Errorf("fire alert %s %s: %w", p.Rule, p.Subject, err)
		}
		if len(as) == 1 {
			return &as[0], false, nil
		}
	}
	return nil, false, fmt.Errorf("fire alert %s %s: its open alert was resolved %d times while firing", p.Rule, p.Subject, maxFireAttempts)
}

// UpdateAlert implements driver.Driver.
func (d *Driver) UpdateAlert(ctx context.Context, p driver.UpdateAlertParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, fmt.Errorf("update alert: %w", err)
	}
	q := pgxQuerier{db: d.pool}
	n, err := q.exec(ctx, d.q(sqlUpdateAlert), []any{p.Message, sqlutil.NullBytes(p.Values), sqlutil.AlertTime(p.Now), p.ID})
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
	q := pgxQuerier{db: d.pool}
	n, err := q.exec(ctx, d.q(sqlResolveAlert), []any{sqlutil.AlertTime(p.Now), p.Message, sqlutil.NullBytes(p.Values), p.ID})
	var as []driver.AlertRow
	if err == nil {
		as, err = d.loadAlerts(ctx, q, sqlGetAlert, p.ID)
	}
	if err == nil && len(as) == 0 {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, false, fmt.Errorf("resolve alert %d: %w", p.ID, err)
	}
	return &as[0], n == 1, nil
}

// GetAlert implements driver.Driver.
func (d *Driver) GetAlert(ctx context.Context, id int64) (*driver.AlertRow, error) {
	var as []driver.AlertRow
	err := d.read(ctx, func(q querier) error {
		var err error
		as, err = d.loadAlerts(ctx, q, sqlGetAlert, id)
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
	query, args := sqlutil.AlertListQuery(sqlListAlerts, f, func(n int) string { return fmt.Sprintf("$%d", n) },
		func(t time.Time) any { return t })
	var as []driver.AlertRow
	err := d.read(ctx, func(q querier) error {
		var err error
		as, err = d.loadAlerts(ctx, q, query, args...)
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
	n, err := pgxQuerier{db: d.pool}.exec(ctx, d.q(sqlRecordDelivery), []any{p.AlertID, p.Event, p.Notifier,
		sqlutil.DeliveredAt(p, func(t time.Time) any { return t }), p.Error, sqlutil.AlertTime(p.Now)})
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
	err := d.pool.QueryRow(ctx, d.q(sqlGetMeta), name).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get meta %q: %w", name, unavailable(ctx, err))
	}
	return sqlutil.MetaValue(v), nil
}

// PutMeta implements driver.Driver.
func (d *Driver) PutMeta(ctx context.Context, name string, value []byte, now time.Time) error {
	if err := driver.ValidateMeta(name, value); err != nil {
		return fmt.Errorf("put meta: %w", err)
	}
	var err error
	if value == nil {
		_, err = d.pool.Exec(ctx, d.q(sqlDeleteMeta), name)
	} else {
		_, err = d.pool.Exec(ctx, d.q(sqlPutMeta), name, value, sqlutil.AlertTime(now))
	}
	if err != nil {
		return fmt.Errorf("put meta %q: %w", name, unavailable(ctx, err))
	}
	return nil
}

// read runs fn in a read-only REPEATABLE READ transaction: one snapshot.
func (d *Driver) read(ctx context.Context, fn func(q querier) error) error {
	return beginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return fn(pgxQuerier{db: tx}) })
}

// loadAlerts reads the alerts query (a template selecting
// sqlutil.AlertColumns) returns and their deliveries.
func (d *Driver) loadAlerts(ctx context.Context, q querier, query string, args ...any) ([]driver.AlertRow, error) {
	as, err := sqlutil.Collect(rowsOf(ctx, q, d.q(query), args...), scanAlert)
	if err != nil || len(as) == 0 {
		return as, err
	}
	ds, err := sqlutil.Collect(rowsOf(ctx, q, d.q(sqlDeliveries), sqlutil.AlertIDs(as)), scanDelivery)
	if err != nil {
		return nil, err
	}
	sqlutil.AttachDeliveries(as, ds)
	return as, nil
}
