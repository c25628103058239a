package sqlite

import (
	"context"
	"database/sql"

	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Alerts, their notifier deliveries and stored documents. Writes go
// through the single writer; reads run in one read transaction, so an
// alert and its deliveries are of one snapshot. Their SQL is in queries.go.

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
var alertSQL = sqlutil.AlertSQL[querier]{Fire: sqlFireAlert, Get: sqlGetAlert, Open: sqlOpenAlert,
	List: sqlListAlerts, Update: sqlUpdateAlert,
	Resolve: sqlResolveAlert, RecordDelivery: sqlRecordDelivery, GetMeta: sqlGetMeta, PutMeta: sqlPutMeta,
	DeleteMeta: sqlDeleteMeta,
	Deliveries: func(ids []int64) (string, []any) { return sqlDeliveries, []any{int64List(ids)} },
	ScanAlert:  scanAlert, ScanDelivery: scanDelivery,
}
