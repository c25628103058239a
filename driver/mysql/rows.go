package mysql

import (
	"database/sql"
	"slices"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

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

// appendStrings appends names to args, one argument each.
func appendStrings(args []any, names []string) []any {
	for _, n := range names {
		args = append(args, n)
	}
	return args
}
