package sqlite

import (
	"database/sql"
	"strconv"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Rows and arguments. SQLite stores times as Unix microseconds (UTC) and
// lists of ids as JSON arrays.

// scanTask reads one row selected with taskColumns.
func scanTask(scan sqlutil.Scan) (*driver.TaskRow, error) {
	return sqlutil.ScanTask(scan, fromMicros, optTime)
}

// scanSetting reads one row selected with settingColumns.
func scanSetting(scan sqlutil.Scan) (*driver.Setting, error) {
	return sqlutil.ScanSetting(scan, fromMicros)
}

// scanNode reads one row of sqlListNodes.
func scanNode(scan sqlutil.Scan) (*driver.NodeRow, error) {
	return sqlutil.ScanNode(scan, fromMicros, sqlutil.JSONQueues)
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func optTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

// pairList renders pairs as a JSON array of two-element arrays.
func pairList(pairs [][2]int64) string {
	b := make([]byte, 0, len(pairs)*16+2)
	b = append(b, '[')
	for i, p := range pairs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, p[0], 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, p[1], 10)
		b = append(b, ']')
	}
	return string(append(b, ']'))
}

// int64List renders ids as a JSON array.
func int64List(ids []int64) string {
	b := make([]byte, 0, len(ids)*8+2)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}

// scanTypeDefaults reads one row selected with typeColumns.
func scanTypeDefaults(scan sqlutil.Scan) (*driver.TypeDefaults, error) {
	return sqlutil.ScanTypeDefaults(scan, fromMicros)
}

// scanAlert reads one row selected with alertColumns.
func scanAlert(scan sqlutil.Scan) (*driver.AlertRow, error) {
	return sqlutil.ScanAlert(scan, fromMicros, optTime)
}

// scanDelivery reads one row selected with sqlutil.DeliveryColumns.
func scanDelivery(scan sqlutil.Scan) (*driver.DeliveryRow, error) {
	return sqlutil.ScanDelivery(scan, fromMicros, optTime)
}
