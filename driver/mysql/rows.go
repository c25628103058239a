package mysql

import (
	"database/sql"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// scanTask reads one row selected with taskColumns.
func scanTask(scan sqlutil.Scan) (*driver.TaskRow, error) {
	return sqlutil.ScanTask(scan, sqlutil.UTC, optTime)
}

// scanSetting reads one row selected with settingColumns.
func scanSetting(scan sqlutil.Scan) (*driver.Setting, error) {
	return sqlutil.ScanSetting(scan, sqlutil.UTC)
}

// scanNode reads one row of sqlListNodes; queues is a JSON array.
func scanNode(scan sqlutil.Scan) (*driver.NodeRow, error) {
	return sqlutil.ScanNode(scan, sqlutil.UTC, sqlutil.JSONQueues)
}

// scanIDs reads a single column of ids and closes rows.
func scanIDs(rows *sql.Rows) ([]int64, error) {
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// idArgs returns ids as arguments, sorted so that every statement locks
// rows in the same order.
func idArgs(ids []int64) []any {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	out := make([]any, len(sorted))
	for i, id := range sorted {
		out[i] = id
	}
	return out
}

func optTime(t sql.NullTime) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// appendStrings appends names to args, one argument each.
func appendStrings(args []any, names []string) []any {
	for _, n := range names {
		args = append(args, n)
	}
	return args
}

// scanTypeDefaults reads one row selected with typeColumns.
func scanTypeDefaults(scan sqlutil.Scan) (*driver.TypeDefaults, error) {
	return sqlutil.ScanTypeDefaults(scan, sqlutil.UTC)
}

// scanAlert reads one row selected with alertColumns.
func scanAlert(scan sqlutil.Scan) (*driver.AlertRow, error) {
	return sqlutil.ScanAlert(scan, sqlutil.UTC, optTime)
}

// scanDelivery reads one row selected with sqlutil.DeliveryColumns.
func scanDelivery(scan sqlutil.Scan) (*driver.DeliveryRow, error) {
	return sqlutil.ScanDelivery(scan, sqlutil.UTC, optTime)
}
