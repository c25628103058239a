package sqlite

import (
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Alerts, their notifier deliveries and stored documents. Writes go
// through the single writer; reads run in one read transaction, so an
// alert and its deliveries are of one snapshot. Their SQL is in queries.go.

// alertSQL are the alert statements of sqlutil.Ops.
var alertSQL = sqlutil.AlertSQL[querier]{Fire: sqlFireAlert, Get: sqlGetAlert, Open: sqlOpenAlert,
	List: sqlListAlerts, Update: sqlUpdateAlert,
	Resolve: sqlResolveAlert, RecordDelivery: sqlRecordDelivery, GetMeta: sqlGetMeta, PutMeta: sqlPutMeta,
	DeleteMeta: sqlDeleteMeta,
	Deliveries: func(ids []int64) (string, []any) { return sqlDeliveries, []any{int64List(ids)} },
	ScanAlert:  scanAlert, ScanDelivery: scanDelivery,
}
