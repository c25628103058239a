package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

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
		as, err := sqlutil.LoadAlerts(ctx, sqlutil.SQL(tx), alertSQL, sqlFireAlert, p.Rule, p.Subject, key, p.Message, p.Hint,
			sqlutil.NullBytes(p.Values), micros(sqlutil.AlertTime(p.Now)))
		if err != nil {
			return err
		}
		opened = len(as) == 1
		if !opened {
			if as, err = sqlutil.LoadAlerts(ctx, sqlutil.SQL(tx), alertSQL, sqlOpenAlert, key); err != nil {
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

// read runs fn in a read-only transaction of the reader pool.
func (d *Driver) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := d.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // read-only: nothing to keep
	return fn(tx)
}

// alertSQL are the alert statements of sqlutil.Ops.
var alertSQL = sqlutil.AlertSQL{Get: sqlGetAlert, Open: sqlOpenAlert, List: sqlListAlerts, Update: sqlUpdateAlert,
	Resolve: sqlResolveAlert, RecordDelivery: sqlRecordDelivery, GetMeta: sqlGetMeta, PutMeta: sqlPutMeta,
	DeleteMeta: sqlDeleteMeta,
	Deliveries: func(ids []int64) (string, []any) { return sqlDeliveries, []any{int64List(ids)} },
	ScanAlert:  scanAlert, ScanDelivery: scanDelivery,
}
