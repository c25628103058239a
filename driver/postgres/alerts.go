package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Alerts, their notifier deliveries and stored documents. Every time is
// the params' own (the leader's clock), also without Options.CallerClock.
// Reads run in one read-only snapshot, so an alert and its deliveries
// agree. Their SQL is in queries.go.

// read runs fn in a read-only REPEATABLE READ transaction: one snapshot.
func (d *Driver) read(ctx context.Context, fn func(q querier) error) error {
	return beginTxFunc(ctx, d.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return fn(pgxQuerier{db: tx}) })
}

// alertSQL are the alert statements of sqlutil.Ops.
var alertSQL = sqlutil.AlertSQL[querier]{Fire: sqlFireAlert, Get: sqlGetAlert, Open: sqlOpenAlert,
	List: sqlListAlerts, Update: sqlUpdateAlert,
	Resolve: sqlResolveAlert, RecordDelivery: sqlRecordDelivery, GetMeta: sqlGetMeta, PutMeta: sqlPutMeta,
	DeleteMeta: sqlDeleteMeta,
	// Each statement on its own: the read that follows an insert that did
	// nothing has a snapshot of its own, which sees the alert that won the
	// key.
	FireOnPool: true,
	Deliveries: func(ids []int64) (string, []any) { return sqlDeliveries, []any{ids} },
	ScanAlert:  sqlutil.ScanAlertUTC, ScanDelivery: sqlutil.ScanDeliveryUTC,
}
