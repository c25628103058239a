package postgres

import (
	"context"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// scanNode reads one row of sqlListNodes; queues is a text[].
func scanNode(scan sqlutil.Scan) (*driver.NodeRow, error) {
	return sqlutil.ScanNode(scan, sqlutil.UTC, func(qs []string) ([]string, error) { return qs, nil })
}

// rowsOf is the row loop of query on q.
func rowsOf(ctx context.Context, q querier, query string, args ...any) sqlutil.Rows {
	return func(row func(scan sqlutil.Scan) error) error { return q.query(ctx, query, args, row) }
}
