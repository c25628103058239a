package sqlutil

import (
	"time"

	"github.com/keelq/keel/driver"
)

// The row scans of databases that hand over timestamps as time.Time
// (MySQL with parseTime, PostgreSQL): a timestamp that may be NULL scans
// into a *time.Time (nil for NULL).

// OptUTC is the opt function of those databases: the zero time for NULL.
func OptUTC(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// ScanTaskUTC reads one row selected with the drivers' taskColumns.
func ScanTaskUTC(scan Scan) (*driver.TaskRow, error) { return ScanTask(scan, UTC, OptUTC) }

// ScanArchivedTaskUTC reads one row of keel_archive: taskColumns, then
// archived_at.
func ScanArchivedTaskUTC(scan Scan) (*driver.TaskRow, error) {
	return ScanArchivedTask(scan, UTC, OptUTC)
}

// ScanSettingUTC reads one row selected with the drivers' settingColumns.
func ScanSettingUTC(scan Scan) (*driver.Setting, error) { return ScanSetting(scan, UTC) }

// ScanTypeDefaultsUTC reads one row selected with the drivers'
// typeColumns.
func ScanTypeDefaultsUTC(scan Scan) (*driver.TypeDefaults, error) { return ScanTypeDefaults(scan, UTC) }

// ScanAlertUTC reads one row selected with AlertColumns.
func ScanAlertUTC(scan Scan) (*driver.AlertRow, error) { return ScanAlert(scan, UTC, OptUTC) }

// ScanDeliveryUTC reads one row selected with DeliveryColumns.
func ScanDeliveryUTC(scan Scan) (*driver.DeliveryRow, error) { return ScanDelivery(scan, UTC, OptUTC) }

// ScanRejectedUTC reads one row selected with RejectedColumns.
func ScanRejectedUTC(scan Scan) (*driver.RejectedRow, error) { return ScanRejected(scan, UTC, OptUTC) }

// ScanSourceUTC reads one row selected with SourceColumns.
func ScanSourceUTC(scan Scan) (*driver.SourceRow, error) { return ScanSource(scan, UTC) }

// ScanBatchUTC reads one row selected with BatchColumns.
func ScanBatchUTC(scan Scan) (*driver.BatchRow, error) { return ScanBatch(scan, UTC, OptUTC) }

// ScanBlockedUTC reads one row of SequenceSQL.Blocked.
func ScanBlockedUTC(scan Scan) (*driver.BlockedSequence, error) { return ScanBlocked(scan, OptUTC) }

// Offset is t relative to now in microseconds, for SQL that adds it to the
// (database) now. It subtracts Unix microseconds: time.Sub saturates at
// ±292 years, whereas these differences fit an int64 for ±292,000.
func Offset(t, now time.Time) int64 { return t.UnixMicro() - now.UnixMicro() }

// RunAtOffset is the run-time argument of an insert for SQL that adds it to
// the database's now: the offset, or NULL for a held task
// (driver.HeldUntil), which the insert stores as that instant itself.
// Added to the database's now, HeldUntil would land off it by the clocks'
// difference (past the largest time the database stores when its clock
// runs ahead) and the task would be neither held nor ever due.
func RunAtOffset(p driver.InsertParams) any {
	if driver.Held(p.RunAt) {
		return nil
	}
	return Offset(p.RunAt, p.Now)
}
