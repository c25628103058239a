package postgres

import (
	"context"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// scanTask reads one row selected with taskColumns.
func scanTask(scan sqlutil.Scan) (*driver.TaskRow, error) {
	return sqlutil.ScanTask(scan, sqlutil.UTC, optTime)
}

// scanArchivedTask reads one row selected with taskColumns, archived_at.
func scanArchivedTask(scan sqlutil.Scan) (*driver.TaskRow, error) {
	return sqlutil.ScanArchivedTask(scan, sqlutil.UTC, optTime)
}

// scanSetting reads one row selected with settingColumns.
func scanSetting(scan sqlutil.Scan) (*driver.Setting, error) {
	return sqlutil.ScanSetting(scan, sqlutil.UTC)
}

// scanNode reads one row of sqlListNodes; queues is a text[].
func scanNode(scan sqlutil.Scan) (*driver.NodeRow, error) {
	return sqlutil.ScanNode(scan, sqlutil.UTC, func(qs []string) ([]string, error) { return qs, nil })
}

// rowsOf is the row loop of query on q.
func rowsOf(ctx context.Context, q querier, query string, args ...any) sqlutil.Rows {
	return func(row func(scan sqlutil.Scan) error) error { return q.query(ctx, query, args, row) }
}

func optTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// scanTypeDefaults reads one row selected with typeColumns.
func scanTypeDefaults(scan sqlutil.Scan) (*driver.TypeDefaults, error) {
	return sqlutil.ScanTypeDefaults(scan, sqlutil.UTC)
}

// scanAlert reads one row selected with sqlutil.AlertColumns.
func scanAlert(scan sqlutil.Scan) (*driver.AlertRow, error) {
	return sqlutil.ScanAlert(scan, sqlutil.UTC, optTime)
}

// scanDelivery reads one row selected with sqlutil.DeliveryColumns.
func scanDelivery(scan sqlutil.Scan) (*driver.DeliveryRow, error) {
	return sqlutil.ScanDelivery(scan, sqlutil.UTC, optTime)
}
