package mysql

import (
	"context"
	"strings"

	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Alerts, their notifier deliveries and stored documents. Every time is
// the params' own (the leader's clock), also without Options.CallerClock.
// Reads run in one read-only snapshot, so an alert and its deliveries
// agree. Their SQL is in queries.go.

// alertSQL are the alert statements of sqlutil.Ops.
var alertSQL = sqlutil.AlertSQL[querier]{Fire: sqlFireAlert, Get: sqlGetAlert, Open: sqlOpenAlert,
	List: sqlListAlerts, Update: sqlUpdateAlert,
	Resolve: sqlResolveAlert, RecordDelivery: sqlRecordDelivery, GetMeta: sqlGetMeta, PutMeta: sqlPutMeta,
	DeleteMeta:     sqlDeleteMeta,
	DeliveryIDLast: true,
	// The insert fails on the unique open_key when an alert of the rule and
	// subject is open, and the open one is read back in the same
	// transaction. The failed insert leaves a shared lock on that key, so
	// the alert cannot be resolved before it is read.
	FireInsert: func(ctx context.Context, q querier, args []any) (int64, bool, error) {
		res, err := q.ExecContext(ctx, sqlFireAlert, args...)
		if isDuplicate(err) {
			return 0, false, nil
		}
		if err != nil {
			return 0, false, err
		}
		id, err := res.LastInsertId()
		return id, err == nil, err
	},
	Deliveries: func(ids []int64) (string, []any) {
		return strings.Replace(sqlDeliveries, "{ids}", sqlutil.Repeat("?", len(ids)), 1), idArgs(ids)
	},
	ScanAlert: sqlutil.ScanAlertUTC, ScanDelivery: sqlutil.ScanDeliveryUTC,
}
