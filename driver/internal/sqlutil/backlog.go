package sqlutil

import (
	"database/sql"
	"fmt"

	"github.com/keelq/keel/driver"
)

// ScanBacklogPeak scans a row of minute and pending.
func ScanBacklogPeak(scan Scan) (*driver.BacklogPeak, error) {
	var p driver.BacklogPeak
	if err := scan(&p.Minute, &p.Pending); err != nil {
		return nil, err
	}
	return &p, nil
}

// FirstMinute scans the one row of a min(minute) query: NULL when the
// history holds no minute.
func FirstMinute(scan Scan) (int64, bool, error) {
	var m sql.NullInt64
	if err := scan(&m); err != nil {
		return 0, false, fmt.Errorf("read the first minute of history: %w", err)
	}
	return m.Int64, m.Valid, nil
}
