package postgres

import (
	"context"
	"fmt"

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
	q := pgConn{q: pgxQuerier{db: d.pool}, d: d}
	for range maxFireAttempts {
		as, err := sqlutil.LoadAlerts(ctx, q, alertSQL, sqlFireAlert, p.Rule, p.Subject, key, p.Message, p.Hint,
			sqlutil.NullBytes(p.Values), sqlutil.AlertTime(p.Now))
		if err != nil {
			return nil, false, fmt.Errorf("fire alert %s %s: %w", p.Rule, p.Subject, err)
		}
		if len(as) == 1 {
			return &as[0], true, nil
		}
		if as, err = sqlutil.LoadAlerts(ctx, q, alertSQL, sqlOpenAlert, key); err != nil {
			return nil, false, fmt.Errorf("fire alert %s %s: %w", p.Rule, p.Subject, err)
		}
		if len(as) == 1 {
			return &as[0], false, nil
		}
	}
	return nil, false, fmt.Errorf("fire alert %s %s: its open alert was resolved %d times while firing", p.Rule, p.Subject, maxFireAttempts)
}

// read runs fn in a read-only REPEATABLE READ transaction: one snapshot.
func (d *Driver) read(ctx context.Context, fn func(q querier) error) error {
	return beginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return fn(pgxQuerier{db: tx}) })
}

// alertSQL are the alert statements of sqlutil.Ops.
var alertSQL = sqlutil.AlertSQL{Get: sqlGetAlert, Open: sqlOpenAlert, List: sqlListAlerts, Update: sqlUpdateAlert,
	Resolve: sqlResolveAlert, RecordDelivery: sqlRecordDelivery, GetMeta: sqlGetMeta, PutMeta: sqlPutMeta,
	DeleteMeta: sqlDeleteMeta,
	Deliveries: func(ids []int64) (string, []any) { return sqlDeliveries, []any{ids} },
	ScanAlert:  scanAlert, ScanDelivery: scanDelivery,
}
