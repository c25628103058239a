package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The live counters and history (migration 005): written by count in the
// transaction of every write to keel_tasks, read by Counts and Minutes,
// checked by Reconcile.

// count writes what tally changed, in the transaction tx. In a writer
// batch it only adds tally to the batch's own: the batch upserts the
// counts of all its operations once, before it commits (writeCounts).
func count(ctx context.Context, tx querier, tally *sqlutil.Tally) error {
	if q, ok := tx.(*cachedTx); ok {
		q.tally.Merge(tally)
		return nil
	}
	return writeCounts(ctx, tx, tally)
}

// writeCounts upserts tally's counter and history rows in tx.
func writeCounts(ctx context.Context, tx querier, tally *sqlutil.Tally) error {
	for _, st := range tally.Statements(sqlCountUpsert, countRow, sqlMinuteUpsert, minuteRow) {
		if _, err := tx.ExecContext(ctx, st.SQL, st.Args...); err != nil {
			return fmt.Errorf("update live counters: %w", err)
		}
	}
	return nil
}

// countedTasks returns, by id, the tasks the transitions ts describe
// (Transition.Task), reading the running ones whose caller did not.
func countedTasks(ctx context.Context, tx querier, ts []driver.Transition) (map[int64]*driver.TaskRow, error) {
	out, missing := sqlutil.DescribedTasks(ts)
	if len(missing) == 0 {
		return out, nil
	}
	rows, err := tx.QueryContext(ctx, sqlCountedRows, int64List(missing))
	if err != nil {
		return nil, fmt.Errorf("read finishing tasks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		r := &driver.TaskRow{State: driver.StateRunning}
		var runAt int64
		var attempted sql.NullInt64
		if err := rows.Scan(&r.ID, &r.Queue, &r.Type, &r.Priority, &r.Attempt, &runAt, &attempted); err != nil {
			return nil, fmt.Errorf("read finishing tasks: %w", err)
		}
		r.RunAt, r.AttemptedAt = fromMicros(runAt), optTime(attempted)
		out[r.ID] = r
	}
	return out, rows.Err()
}

// Reconcile implements driver.Driver: both counts are read in one read
// transaction (one snapshot), the difference is written by the writer.
func (d *Driver) Reconcile(ctx context.Context, p driver.ReconcileParams) ([]driver.CountRow, error) {
	tx, err := d.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("reconcile counters: %w", err)
	}
	defer tx.Rollback()
	truth, err := sqlutil.Collect(sqlutil.Query(ctx, tx, sqlTrueCounts), sqlutil.ScanCountRow)
	if err != nil {
		return nil, fmt.Errorf("reconcile counters: count tasks: %w", err)
	}
	kept, err := sqlutil.Collect(sqlutil.Query(ctx, tx, sqlCounts), sqlutil.ScanCountRow)
	if err != nil {
		return nil, fmt.Errorf("reconcile counters: %w", err)
	}
	tx.Rollback()
	diff := sqlutil.CountDiff(truth, kept)
	err = d.write(ctx, func(tx querier) error {
		c := sqlutil.SQL(tx)
		if err := sqlutil.UpsertCountRows(ctx, c, sqlCountUpsert, countRow, diff); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, sqlDropZeroCounts); err != nil {
			return err
		}
		return sqlutil.DropMinutes(ctx, c, sqlDropMinutes, p)
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile counters: %w", err)
	}
	return diff, nil
}
