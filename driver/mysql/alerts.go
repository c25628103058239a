package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

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
				if as, err = sqlutil.LoadAlerts(ctx, sqlutil.SQL(tx), alertSQL, sqlGetAlert, id); err != nil {
					return err
				}
				opened = true
			case isDuplicate(err):
				if as, err = sqlutil.LoadAlerts(ctx, sqlutil.SQL(tx), alertSQL, sqlOpenAlert, key); err != nil {
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

// read runs fn in a read-only REPEATABLE READ transaction: one snapshot.
func (d *Driver) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // read-only: nothing to keep
	return fn(tx)
}

// alertSQL are the alert statements of sqlutil.Ops.
var alertSQL = sqlutil.AlertSQL{Get: sqlGetAlert, Open: sqlOpenAlert, List: sqlListAlerts, Update: sqlUpdateAlert,
	Resolve: sqlResolveAlert, RecordDelivery: sqlRecordDelivery, GetMeta: sqlGetMeta, PutMeta: sqlPutMeta,
	DeleteMeta:     sqlDeleteMeta,
	DeliveryIDLast: true,
	Deliveries: func(ids []int64) (string, []any) {
		return strings.Replace(sqlDeliveries, "{ids}", sqlutil.Repeat("?", len(ids)), 1), idArgs(ids)
	},
	ScanAlert: scanAlert, ScanDelivery: scanDelivery,
}
